"""Headless notebook runs: Output-widget mirroring is off and printed output is kept."""
from __future__ import annotations

import nbformat
import pytest

from gemmlab.headless import notebook_client


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
    assert client.widget_registry == {}
    client.execute()
    texts = [o.get("text", "") for o in nb.cells[0].outputs if o.get("output_type") == "stream"]
    assert any("drawn 3" in t for t in texts), nb.cells[0].outputs
