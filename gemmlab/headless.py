"""Run notebooks without a browser (tests, timing, grading) without nbclient's widget stall.

nbclient imitates a browser for ipywidgets' ``Output`` widget: it sends the widget's new
state back to the kernel on the shell socket while it is waiting on that same socket for
the cell's ``execute_reply``. Now and then the reply is then not noticed until the cell's
timeout runs out (jupyter/nbclient#312), which we saw as widget cells taking exactly the
timeout, and once as a dead kernel. Headless runs need no widget state, so they switch
the imitation off: what a cell prints inside ``with output_widget:`` still lands in the
cell's outputs.
"""
from __future__ import annotations

from typing import Any


def disable_output_widget_mirroring(client: Any) -> Any:
    """Stop ``client`` (an nbclient ``NotebookClient`` or nbconvert/nbgrader executor) from
    sending Output-widget state to the kernel; returns the client."""
    client.widget_registry = {}
    return client


def notebook_client(nb: Any, **kwargs: Any) -> Any:
    """An ``nbclient.NotebookClient`` for ``nb`` with Output-widget mirroring off."""
    from nbclient import NotebookClient

    return disable_output_widget_mirroring(NotebookClient(nb, **kwargs))
