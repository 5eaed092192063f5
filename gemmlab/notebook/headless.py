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


class NoOutputWidgetMirroring:
    """Mixin for ``nbclient.NotebookClient`` and its subclasses (nbconvert's
    ``ExecutePreprocessor``, nbgrader's ``Execute``): no widget is imitated, so nothing is
    sent back to the kernel.

    It overrides the method that builds the imitations rather than emptying
    ``widget_registry`` on the instance, because ``ExecutePreprocessor.preprocess`` runs
    ``NotebookClient.__init__`` again, which restores the registry (the autograder then
    stalled for a whole cell timeout now and then).
    """

    def on_comm_open_jupyter_widget(self, msg: dict) -> None:  # noqa: ARG002 - nbclient's signature
        return None


def disable_output_widget_mirroring(client: Any) -> Any:
    """Stop an already built ``client`` from sending Output-widget state to the kernel, for
    ``client.execute()`` (a later ``NotebookClient.__init__`` would undo it: for executors
    that re-initialise, subclass :class:`NoOutputWidgetMirroring` instead); returns the client."""
    client.widget_registry = {}
    client.comm_open_handlers["jupyter.widget"] = lambda msg: None
    return client


def notebook_client(nb: Any, **kwargs: Any) -> Any:
    """An ``nbclient.NotebookClient`` for ``nb`` with Output-widget mirroring off."""
    from nbclient import NotebookClient

    class HeadlessNotebookClient(NoOutputWidgetMirroring, NotebookClient):
        pass

    return HeadlessNotebookClient(nb, **kwargs)
