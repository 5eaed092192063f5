"""nbgrader configuration for the gemmlab course.

Use it from anywhere with ``JUPYTER_CONFIG_PATH=autograder nbgrader <command>`` (what
``scripts/course.sh`` sets for JupyterLab, so that the Validate button finds it), or run nbgrader
inside ``autograder/``. ``--NbGrader.config_file=autograder/nbgrader_config.py`` loads it too, but
nbgrader 0.9.6 then looks for ``nbgrader_config.py.py`` before loading and warns "No
nbgrader_config.py file found". The course root is the repository root:
``solutions/`` holds the source notebooks (with solutions and hidden tests) and
``course/`` the generated student release; everything grading produces stays under
``autograder/`` and is git-ignored.
"""
import os
import secrets
import sys
from pathlib import Path

c = get_config()  # noqa: F821 - provided by traitlets when nbgrader loads this file

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:   # nbgrader run from a checkout: gemmlab and autograder are not installed
    sys.path.append(str(ROOT))

from autograder.cell_metadata import grade_id  # noqa: E402

c.CourseDirectory.course_id = "gemmlab"
c.CourseDirectory.root = str(ROOT)
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "course"
c.CourseDirectory.submitted_directory = "autograder/submitted"
c.CourseDirectory.autograded_directory = "autograder/autograded"
c.CourseDirectory.feedback_directory = "autograder/feedback"
c.CourseDirectory.db_url = f"sqlite:///{HERE / 'gradebook.db'}"
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", ".*"]
c.Exchange.root = str(HERE / "exchange")

# Release: students get no outputs (tools/release.py strips the rest).
c.ClearOutput.enabled = True

# Autograde. Default per-cell limit covers one CuTe C++ compile (~20 s on a small CPU);
# graded cells whose grade_id ends in "_slow" (GPU checks, several compiles) get longer.
# Keyed on grade_id because students cannot change it (tags they can).
DEFAULT_CELL_TIMEOUT_S = 180
SLOW_CELL_TIMEOUT_S = 600


def cell_timeout(cell) -> int:
    """Seconds autograde lets ``cell`` run: long only for cells the course marked slow."""
    return SLOW_CELL_TIMEOUT_S if grade_id(cell).endswith("_slow") else DEFAULT_CELL_TIMEOUT_S


def _headless_autograde_preprocessors() -> list:
    """nbgrader's autograde steps with its executor replaced by one that does not mirror
    Output widgets back to the kernel (gemmlab/notebook/headless.py says why: it can stall a widget
    cell until its timeout)."""
    from nbgrader.converters.autograde import Autograde
    from nbgrader.preprocessors import Execute

    from gemmlab.notebook.headless import NoOutputWidgetMirroring

    class HeadlessExecute(NoOutputWidgetMirroring, Execute):
        pass

    return [HeadlessExecute if pp is Execute else pp
            for pp in Autograde.class_traits()["autograde_preprocessors"].make_dynamic_default()]


c.Autograde.autograde_preprocessors = _headless_autograde_preprocessors()
c.Execute.timeout = DEFAULT_CELL_TIMEOUT_S
c.Execute.timeout_func = cell_timeout
c.Execute.interrupt_on_timeout = True
# nbclient skips cells tagged "skip-execution"; a student could tag the test cells with
# it. A secret tag (fresh on every load, or fixed by the instructor) closes that hole.
c.Execute.skip_cells_with_tag = os.environ.get(
    "GEMMLAB_SKIP_TAG", "gemmlab-skip-" + secrets.token_hex(16))
# A deleted test cell comes back from the gradebook instead of needing manual grading.
c.OverwriteCells.add_missing_cells = True

# Feedback never shows the hidden tests.
c.GenerateFeedback.preprocessors = [
    "nbgrader.preprocessors.GetGrades",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
    "nbgrader.preprocessors.ClearHiddenTests",
]
