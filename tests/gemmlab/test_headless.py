"""Headless notebook runs: Output-widget mirroring is off and printed output is kept."""
from __future__ import annotations

import nbformat
import pytest

from gemmlab.notebook.headless import notebook_client


def test_output_widget_content_lands_in_the_cell_and_no_state_is_sent_back() -> None:
    pytest.importorskip("ipykernel")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(
        "import ipywidgets as w\n"
        "out = w.Output()\n"
        "def redraw(_=None):\n"
        "    out.clear_output(wait=True)\n"
        "    with out:\n"
        "        print('drawn', s.value)\n"
        "s = w.IntSlider(3)\n"
        "s.observe(redraw, names='value')\n"
        "redraw()\n"
        "display(w.VBox([s, out]))")]
    client = notebook_client(nb, timeout=60, kernel_name="python3")
    assert client.on_comm_open_jupyter_widget({}) is None
    client.execute()
    texts = [o.get("text", "") for o in nb.cells[0].outputs if o.get("output_type") == "stream"]
    assert any("drawn 3" in t for t in texts), nb.cells[0].outputs


def _widget_notebook():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(
        "import ipywidgets as w\nout = w.Output()\nwith out:\n    print('inside')\ndisplay(out)")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def test_executors_that_reinitialise_keep_mirroring_off() -> None:
    """nbconvert's ExecutePreprocessor (and nbgrader's Execute) run NotebookClient.__init__ again in
    preprocess(), which restores the default widget registry: emptying it on the instance is not
    enough (the control below shows the Output imitation coming back); the mixin is."""
    pytest.importorskip("ipykernel")
    from nbconvert.preprocessors import ExecutePreprocessor

    from gemmlab.notebook.headless import NoOutputWidgetMirroring, disable_output_widget_mirroring

    class Headless(NoOutputWidgetMirroring, ExecutePreprocessor):
        pass

    control = disable_output_widget_mirroring(ExecutePreprocessor(timeout=60, kernel_name="python3"))
    control.preprocess(_widget_notebook(), {})
    assert control.comm_objects, "control: without the mixin the re-initialised executor imitates Output"
    headless = Headless(timeout=60, kernel_name="python3")
    nb, _ = headless.preprocess(_widget_notebook(), {})
    assert not headless.comm_objects
    texts = [o.get("text", "") for o in nb.cells[0].outputs if o.get("output_type") == "stream"]
    assert any("inside" in t for t in texts), nb.cells[0].outputs
