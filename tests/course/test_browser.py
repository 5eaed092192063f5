"""The student and instructor flows in a real browser: JupyterLab driven by Playwright.

A throw-away course folder gets the course's nbgrader configuration, notebook 01 released
with ``nbgrader generate_assignment`` and one submission autograded with ``nbgrader
autograde``. ``jupyter lab`` from this environment serves it on a free localhost port
with a token, and Debian's headless Chromium (Playwright's own browsers are never
downloaded) plays

* a student: opens notebook 01, runs it, moves the thread slider of the partition
  explorer and sees another thread highlighted, types in the exercise solutions and
  validates the notebook with nbgrader's Validate button (which, without a GPU, fails the GPU
  test and says its points were not checked);
* an instructor: opens the formgrader from the Nbgrader menu and finds the autograded
  submission with its score.

Screenshots of every step go to ``$GEMMLAB_ARTIFACTS/browser`` (default
``test-artifacts/browser`` in the checkout). ``scripts/setup.sh`` installs Chromium with
apt where it runs as root on Debian; elsewhere set ``GEMMLAB_CHROMIUM`` to a Chromium binary. The
tests skip only where Chromium is missing and setup could not have installed it (not root,
not Debian) and $CI is unset.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from tests.support import ROOT
from tests.support.browser import require_browser
from autograder.cell_metadata import grade_id, is_graded
ASSIGNMENT = "01_layouts_and_partitioning"
NOTEBOOK = f"{ASSIGNMENT}.ipynb"
STUDENT = "alice"
#: Solution cells the student types in the browser (all of them: Validate then fails only the GPU test,
#: and only where there is no GPU to run it).
TYPED = ("crd2idx_solution", "owned_solution", "copy_dsl_solution")
#: Solution cells of the submission the instructor finds autograded (the copy kernel is left out).
SUBMITTED = ("crd2idx_solution", "owned_solution")
#: Generous limits for a loaded 2-core machine: kernel start plus torch/CuTe DSL imports, a DSL compile, while
#: the other test worker grades a notebook (CI saw one Validate take over 180 s that way; alone this whole test
#: takes 24 s).
RUN_TIMEOUT_MS = 360_000
UI_TIMEOUT_MS = 60_000

pytestmark = [pytest.mark.browser, pytest.mark.slow]


# --------------------------------------------------------------------------- environment

def _artifacts() -> Path:
    base = Path(os.environ.get("GEMMLAB_ARTIFACTS") or ROOT / "test-artifacts")
    out = base / "browser"
    out.mkdir(parents=True, exist_ok=True)
    return out


def _clear_artifacts() -> None:
    """Start each run with an empty screenshot folder, so no picture is from an older run."""
    for f in _artifacts().iterdir():
        if f.is_file() and f.suffix in (".png", ".txt", ".log"):
            f.unlink()


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    # Kernels (the student's, Validate's and autograde's) import this checkout's gemmlab.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.setdefault("CUTE_DSL_ARCH", "sm_90a")
    env.update(extra or {})
    return env


def _solution_source(cell_source: str) -> str:
    """A solutions cell as the student would write it: the solution markers dropped."""
    return "\n".join(line for line in cell_source.splitlines()
                     if "### BEGIN SOLUTION" not in line and "### END SOLUTION" not in line)


def _solutions() -> dict[str, str]:
    nb = nbformat.read(ROOT / "solutions" / ASSIGNMENT / NOTEBOOK, as_version=4)
    found = {grade_id(c): _solution_source(c.source) for c in nb.cells}
    missing = [g for g in TYPED if g not in found]
    assert not missing, f"solutions/{ASSIGNMENT}/{NOTEBOOK} has no cells {missing}; update TYPED in {__file__}"
    return found


def _nbgrader(course: Path, *args: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=_env(),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"


@pytest.fixture(scope="module")
def course(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A course folder with notebook 01 released, a student copy and an autograded submission."""
    require_browser()
    _clear_artifacts()
    root = tmp_path_factory.mktemp("browser-course")
    (root / "nbgrader_config.py").write_text(
        "c = get_config()  # noqa: F821\n"
        f"load_subconfig('nbgrader_config.py', path={str(ROOT / 'autograder')!r})  # noqa: F821\n"
        f"c.CourseDirectory.root = {str(root)!r}\n"
        "c.CourseDirectory.submitted_directory = 'submitted'\n"
        "c.CourseDirectory.autograded_directory = 'autograded'\n"
        "c.CourseDirectory.feedback_directory = 'feedback'\n"
        f"c.CourseDirectory.db_url = {'sqlite:///' + str(root / 'gradebook.db')!r}\n"
        f"c.Exchange.root = {str(root / 'exchange')!r}\n")
    shutil.copytree(ROOT / "solutions" / ASSIGNMENT, root / "solutions" / ASSIGNMENT,
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    _nbgrader(root, "generate_assignment", ASSIGNMENT, "--force")

    # The student works on the committed release, exactly what students download.
    shutil.copytree(ROOT / "course" / ASSIGNMENT, root / "student" / ASSIGNMENT,
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints"))

    # The submission: the release with two exercises solved (the copy kernel is not).
    solutions = _solutions()
    nb = nbformat.read(ROOT / "course" / ASSIGNMENT / NOTEBOOK, as_version=4)
    for cell in nb.cells:
        gid = grade_id(cell)
        if gid in SUBMITTED:
            cell.source = solutions[gid]
    sub = root / "submitted" / STUDENT / ASSIGNMENT
    sub.mkdir(parents=True)
    nbformat.write(nb, sub / NOTEBOOK)
    (sub / "timestamp.txt").write_text("2026-11-20 17:45:00 UTC")
    _nbgrader(root, "db", "student", "add", STUDENT, "--first-name=Alice", "--last-name=Liddell")
    _nbgrader(root, "autograde", ASSIGNMENT, f"--student={STUDENT}", "--force")

    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", "gemmlab") as gb:
        s = gb.find_submission(ASSIGNMENT, STUDENT)
        score, max_score = float(s.score), float(s.max_score)
    # The graded cells right after the two solved exercises pass, the copy kernel test fails.
    points = {c.metadata["nbgrader"]["grade_id"]: c.metadata["nbgrader"].get("points", 0)
              for c in nb.cells if is_graded(c)}
    want = points["test_crd2idx"] + points["test_owned"]
    assert (score, max_score) == (want, sum(points.values())), (
        f"autograde scored the prepared submission {score}/{max_score}, expected {want}/{sum(points.values())} "
        "(crd2idx and owned_by solved, the copy kernel not)")
    return {"root": root, "score": score, "max_score": max_score}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(course: dict) -> dict:
    """``jupyter lab`` on the course folder: isolated settings, a token, nbgrader's extensions."""
    root: Path = course["root"]
    home = root.parent / (root.name + "-jupyter")
    settings = home / "settings"
    for name, value in {
        # Every cell stays in the DOM, so cells far down can be found and read.
        "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
        # No news/update toasts over the buttons.
        "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
            "fetchNews": "false", "checkForUpdates": False},
    }.items():
        path = settings / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value))
    port, token = _free_port(), secrets.token_hex(16)
    log = open(_artifacts() / "jupyter-lab.log", "w")
    cmd = [str(Path(sys.executable).parent / "jupyter"), "lab", "--no-browser", "--ip=127.0.0.1",
           f"--port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
           f"--ServerApp.root_dir={root}", "--allow-root", "--LabApp.expose_app_in_browser=True",
           f"--LabApp.user_settings_dir={settings}", f"--LabApp.workspaces_dir={home / 'workspaces'}"]
    proc = subprocess.Popen(cmd, cwd=root, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                            env=_env({"JUPYTER_RUNTIME_DIR": str(home / "runtime"),
                                      "JUPYTER_CONFIG_DIR": str(home / "config"),
                                      "IPYTHONDIR": str(home / "ipython")}))
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None:
                pytest.fail(f"jupyter lab exited with {proc.returncode}; see {log.name}")
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"jupyter lab did not answer on {base} within 90 s; see {log.name}")
            time.sleep(0.5)
        yield {"base": base, "token": token, "root": root}
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


@pytest.fixture(scope="module")
def browser(course: dict):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=require_browser(), headless=True)
        yield b
        b.close()


@pytest.fixture
def page(browser, lab: dict, request: pytest.FixtureRequest):
    """A fresh browser tab; JavaScript errors of the page are written next to the screenshots."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    pg.set_default_timeout(UI_TIMEOUT_MS)
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    yield pg
    (_artifacts() / f"{request.node.name}-page-errors.txt").write_text("\n".join(errors))
    context.close()


@contextlib.contextmanager
def _screenshot_on_failure(page, name: str):
    try:
        yield
    except BaseException:
        _shot(page, f"{name}-FAILED")
        raise


def _shot(page, name: str) -> None:
    try:
        page.screenshot(path=str(_artifacts() / f"{name}.png"), full_page=False)
    except Exception as exc:  # a screenshot must never hide the real failure
        print(f"screenshot {name} failed: {exc}")


# --------------------------------------------------------------------------- JupyterLab helpers

def _open(page, lab: dict, path: str) -> None:
    page.goto(f"{lab['base']}/lab/tree/{path}?token={lab['token']}")
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell.currentWidget", timeout=UI_TIMEOUT_MS)


def _kernel_idle_js() -> str:
    return """() => {
        const w = window.jupyterapp.shell.currentWidget;
        const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
        return !!k && k.status === 'idle';
    }"""


def _prompts(page) -> list[str]:
    return page.eval_on_selector_all(
        ".jp-Notebook .jp-CodeCell .jp-InputArea-prompt", "els => els.map(e => e.textContent.trim())")


def _code_cell(page, first_line: str):
    """The code cell whose source contains ``first_line``."""
    cell = page.locator(".jp-Notebook .jp-CodeCell").filter(
        has=page.locator(".cm-content", has_text=first_line))
    assert cell.count() == 1, f"expected one code cell containing {first_line!r}, found {cell.count()}"
    return cell


def _menu(page, *labels: str) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{re.escape(labels[0])}$")).click()
    for label in labels[1:]:
        page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{re.escape(label)}$")).click()


def _run_all(page) -> None:
    """Run > Run All Cells, then wait until nothing is queued and the kernel is idle.

    Run All stops at a cell that raises; the callers check what ran and what it printed."""
    first = page.locator(".jp-Notebook .jp-CodeCell .jp-InputArea-prompt").first
    before = first.inner_text()
    _menu(page, "Run", "Run All Cells")
    page.wait_for_function("([p, old]) => p.textContent !== old", arg=[first.element_handle(), before],
                           timeout=UI_TIMEOUT_MS)
    page.wait_for_function(
        """() => ![...document.querySelectorAll('.jp-Notebook .jp-InputArea-prompt')]
                   .some(e => e.textContent.includes('*'))""", timeout=RUN_TIMEOUT_MS)
    page.wait_for_function(_kernel_idle_js(), timeout=RUN_TIMEOUT_MS)


def _type_into(page, cell, text: str) -> None:
    """Replace a cell's source the way a student pastes code: click, select all, type."""
    editor = cell.locator(".cm-content")
    editor.click()
    page.keyboard.press("Control+a")
    page.keyboard.press("Delete")
    page.keyboard.insert_text(text)
    page.keyboard.press("Escape")  # command mode, so later shortcuts go to the notebook


def _cell_text(cell) -> str:
    return cell.locator(".jp-OutputArea").inner_text()


def _highlighted(src: str):
    """Boolean mask of the strongly blue pixels (the highlighted elements) of a PNG data URL."""
    import base64
    import io

    import matplotlib.image

    assert src and src.startswith("data:image/png;base64,"), f"expected a PNG data URL, got {src[:60]!r}"
    rgb = matplotlib.image.imread(io.BytesIO(base64.b64decode(src.split(",", 1)[1])), format="png")[..., :3]
    r, g, b = (rgb[..., i] * 255 for i in range(3))
    return (b > 120) & (b - r > 80)


def _validate(page) -> object:
    """Click nbgrader's Validate in the notebook toolbar (it saves first); return its dialog.

    No Ctrl+S before it: a second save racing Validate's own makes JupyterLab ask whether
    the file changed on disk."""
    page.locator(".validate-button").click()
    dialog = page.locator(".jp-Dialog")
    dialog.wait_for(timeout=RUN_TIMEOUT_MS)
    body = dialog.locator(".validation-success, .validation-failed, .validation-changed, "
                          ".validation-type-changed, .validation-error, .jp-Dialog-body")
    body.first.wait_for(timeout=RUN_TIMEOUT_MS)
    return dialog


# --------------------------------------------------------------------------- the tests

def test_student_runs_explores_and_validates(page, lab: dict) -> None:
    with _screenshot_on_failure(page, "student"):
        _student(page, lab)


def test_instructor_sees_autograded_score(page, lab: dict, course: dict) -> None:
    with _screenshot_on_failure(page, "instructor"):
        _instructor(page, lab, course)


def _student(page, lab: dict) -> None:
    _open(page, lab, f"student/{ASSIGNMENT}/{NOTEBOOK}")
    page.wait_for_function(_kernel_idle_js(), timeout=RUN_TIMEOUT_MS)
    assert page.locator(".validate-button").count() == 1, (
        "nbgrader's Validate button is not in the notebook toolbar: is the @jupyter/nbgrader lab "
        "extension installed and enabled?")
    _shot(page, "student-01-opened")

    # Untouched, Run All stops at the first test with the placeholder's NotImplementedError.
    crd_test = _code_cell(page, "# Test: crd2idx (graded)")
    _run_all(page)
    assert "NotImplementedError" in _cell_text(crd_test), (
        f"the crd2idx test cell of the untouched notebook should fail with NotImplementedError; "
        f"its output was {_cell_text(crd_test)[:500]!r}")
    _shot(page, "student-02-untouched-run-all-stops")

    solutions = _solutions()
    heads = {"crd2idx_solution": "def crd2idx(", "owned_solution": "def owned_by(",
             "copy_dsl_solution": "def copy_tiles_kernel("}
    # One exercise done is not enough: Validate fails and names a test still failing.
    _type_into(page, _code_cell(page, heads[TYPED[0]]), solutions[TYPED[0]])
    dialog = _validate(page)
    _shot(page, "student-03-validate-one-exercise")
    text = dialog.inner_text()
    assert dialog.locator(".validation-failed").count() == 1, (
        f"Validate should fail with only crd2idx solved; the dialog said:\n{text[:3000]}")
    assert "_check_owned" in text and "_check_crd2idx" not in text, (
        f"Validate should list the owned_by test as failed and not the solved crd2idx test:\n{text[:3000]}")
    dialog.get_by_role("button").last.click()
    dialog.wait_for(state="detached")

    for gid in TYPED[1:]:
        _type_into(page, _code_cell(page, heads[gid]), solutions[gid])
    _shot(page, "student-04-solutions-typed")

    _run_all(page)
    tracebacks = [t for t in page.locator(".jp-Notebook .jp-RenderedText").all_inner_texts()
                  if "Traceback" in t]
    assert not tracebacks, f"a cell raised after the solutions were typed in:\n{tracebacks[0][:2000]}"
    prompts = _prompts(page)
    assert all(re.fullmatch(r"\[\d+\]:", p) for p in prompts), (
        f"after typing the solutions, Run All should execute every code cell; prompts: {prompts}")
    for ok in ("crd2idx: correct", "owned_by: correct", "DSL kernel compiled"):
        assert page.get_by_text(ok).count() >= 1, f"{ok!r} was not printed by Run All"
    _shot(page, "student-05-solutions-run")

    # The partition explorer: click further along the thread slider, see another thread.
    explorer = _code_cell(page, "def show_owner(")
    explorer.scroll_into_view_if_needed()
    slider = explorer.locator(".widget-slider .noUi-target, .widget-slider .slider").first
    slider.wait_for(timeout=UI_TIMEOUT_MS)
    readout = explorer.locator(".widget-readout")
    image = explorer.locator(".jp-OutputArea-output img").first
    image.wait_for(timeout=UI_TIMEOUT_MS)
    before_value, before_png = readout.inner_text().strip(), image.get_attribute("src")
    assert before_value == "0", f"the explorer should start at thread 0, shows {before_value!r}"
    _shot(page, "student-06-explorer-thread-0")
    box = slider.bounding_box()
    page.mouse.click(box["x"] + box["width"] * 0.7, box["y"] + box["height"] / 2)
    page.wait_for_function("([r]) => r.textContent.trim() !== '0'", arg=[readout.element_handle()],
                           timeout=UI_TIMEOUT_MS)
    thread = int(readout.inner_text().strip())
    assert 1 <= thread <= 31, f"clicking the slider set thread {thread}, outside 1..31"
    page.wait_for_function("([img, old]) => img.isConnected ? img.src !== old : true",
                           arg=[image.element_handle(), before_png], timeout=UI_TIMEOUT_MS)
    after_png = explorer.locator(".jp-OutputArea-output img").first.get_attribute("src")
    assert after_png and after_png != before_png, "the explorer's picture did not change with the thread"
    # Each thread owns 8 of the 256 elements, disjoint from thread 0's: as many highlighted
    # pixels as before, none of them where thread 0's were.
    mask0, mask1 = _highlighted(before_png), _highlighted(after_png)
    assert mask0.shape == mask1.shape and mask0.sum() > 0, "no highlighted elements in the explorer's picture"
    assert abs(int(mask1.sum()) - int(mask0.sum())) < 0.1 * mask0.sum(), (
        f"thread {thread} highlights {mask1.sum()} pixels, thread 0 {mask0.sum()}: both own 8 elements")
    assert (mask0 & mask1).sum() < 0.05 * mask0.sum(), (
        f"thread {thread}'s highlighted elements overlap thread 0's; the picture did not follow the slider")
    _shot(page, f"student-07-explorer-thread-{thread}")

    # Validate saves the notebook, then nbgrader runs it in a fresh kernel and checks the tests.
    dialog = _validate(page)
    _shot(page, "student-08-validate")
    text = dialog.inner_text()
    from gemmlab.running.gpu import has_gpu

    if has_gpu():
        assert dialog.locator(".validation-success").count() == 1, f"Validate did not succeed:\n{text[:3000]}"
        assert "Success! Your notebook passes all the tests." in text
    else:   # no "Success" for points nothing checked: the GPU test fails, saying so, and nothing else does
        assert dialog.locator(".validation-failed").count() == 1, (
            f"Validate should fail the GPU test it cannot run here; the dialog said:\n{text[:3000]}")
        assert "NOT CHECKED (4 points): the copy kernel test needs a GPU" in text, text[:3000]
        assert "_check_copy" in text and "_check_owned" not in text and "_check_crd2idx" not in text, (
            f"only the GPU test may be listed as failed:\n{text[:3000]}")
    dialog.get_by_role("button").last.click()
    dialog.wait_for(state="detached")


def _instructor(page, lab: dict, course: dict) -> None:
    page.goto(f"{lab['base']}/lab?token={lab['token']}")
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell", timeout=UI_TIMEOUT_MS)
    page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").wait_for(timeout=UI_TIMEOUT_MS)
    _menu(page, "Nbgrader", "Formgrader")
    frame = page.frame_locator("iframe").first
    row = frame.locator("tr", has_text=ASSIGNMENT)
    row.first.wait_for(timeout=UI_TIMEOUT_MS)
    _shot(page, "instructor-01-formgrader")
    link = row.first.locator("td.num-submissions a")
    assert link.inner_text().strip() == "1", f"the formgrader lists {link.inner_text()!r} submissions, expected 1"
    link.click()
    student = frame.locator("tr", has_text="Liddell, Alice").first
    student.wait_for(timeout=UI_TIMEOUT_MS)
    score = student.locator("td.score")
    want = f"{course['score']:g} / {course['max_score']:g}"
    frame.locator("td.score", has_text=want).first.wait_for(timeout=UI_TIMEOUT_MS)
    assert score.inner_text().strip() == want, (
        f"the formgrader shows {score.inner_text()!r} for {STUDENT}, the gradebook has {want}")
    _shot(page, "instructor-02-submission-score")
