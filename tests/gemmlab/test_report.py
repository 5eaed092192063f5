"""gemmlab.checking.report: a result published as JSON display data in an IPython kernel, nothing elsewhere."""
from __future__ import annotations

import pytest

from gemmlab.checking.report import RESULT_MIME, payload, publish


class _Result:
    def to_dict(self) -> dict:
        return {"ratio": 0.75, "shape": [8, 8, 8]}


def test_publish_without_ipython_sends_nothing(capsys) -> None:
    publish("bench", _Result())
    assert capsys.readouterr() == ("", "")


def test_publish_in_ipython_sends_only_the_json_payload() -> None:
    pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    InteractiveShell.instance()
    try:
        with capture_output() as captured:
            publish("perf_bar", _Result())
    finally:
        InteractiveShell.clear_instance()
    assert [o.data for o in captured.outputs] == [{RESULT_MIME: payload("perf_bar", _Result())}]
    assert captured.outputs[0].data[RESULT_MIME] == {"kind": "perf_bar", "data": {"ratio": 0.75, "shape": [8, 8, 8]}}
