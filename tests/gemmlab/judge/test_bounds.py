"""Everything a student's kernel sends the judge is bounded before it is used, and each refusal names its limit:
the description of the answers (its size, its nesting), replies to calls, plain data."""
from __future__ import annotations

import json

import pytest

from gemmlab.judge import answers, plain
from gemmlab.judge.answers import AnswerError


def test_a_value_too_large_for_the_description_is_opaque_and_the_others_still_cross() -> None:
    """An honest answer beside a huge value: the huge one fails its tests naming the limit; the rest are bound
    (a 200 MB value once dropped the student's correct answer silently)."""
    namespace = {"table": "x" * (answers.MAX_DESCRIPTION_CHARS + 10), "tile": (128, 64), "f": lambda x: x}
    described = json.loads(answers.describe(namespace, ["table", "tile", "f"]))
    assert described["table"]["kind"] == "opaque" and f"{answers.MAX_DESCRIPTION_CHARS:,} in all" in \
        described["table"]["why"]
    bound: dict = {}
    answers.bind(bound, json.dumps(described), ["table", "tile", "f"])
    assert bound["tile"] == (128, 64) and isinstance(bound["f"], answers.Answer)
    with pytest.raises(AnswerError, match="does not reach the tests"):
        bound["table"] == "x"
    assert len(answers.describe({n: "y" * (1 << 20) for n in "abcdefg"}, list("abcdefg"))) \
        <= answers.MAX_DESCRIPTION_CHARS + 65536, "several large values together stay within the limit too"


@pytest.mark.parametrize("description, limit", [
    ("[" * 200_000 + "]" * 200_000, "nested more than 8 levels deep"),
    (json.dumps({"a": {"kind": "value", "data": "1"}, "pad": "p" * (answers.MAX_DESCRIPTION_CHARS + 70_000)}),
     "characters; at most"),
    ("{not json", "is not JSON"),
])
def test_a_forged_description_is_refused_naming_the_limit(description: str, limit: str) -> None:
    with pytest.raises(AnswerError, match=limit):
        answers.bind({}, description, ["a"])


def test_replies_to_calls_are_read_within_their_limits(monkeypatch) -> None:
    for reply, words in (("[" * 1000 + "]" * 1000, "nested more than 64 levels"),
                         (json.dumps({"id": 1, "result": "1", "pad": "z" * 5000}), "characters; at most 4,000")):
        monkeypatch.setattr(answers, "channel", lambda request, reply=reply: reply)
        monkeypatch.setattr(answers, "MAX_REPLY_CHARS", 4000)
        with pytest.raises(AnswerError, match=words):
            answers._reply("square", reply, answers.MAX_REPLY_CHARS)


def test_plain_data_nested_without_end_is_refused_not_a_recursion_error() -> None:
    for text in ("[" * 200_000 + "]" * 200_000, '{"t": "tuple", "v": ' * 5000 + "[]" + "}" * 5000):
        with pytest.raises(plain.NotPlainData, match="nested more than"):
            plain.decode(text)
    assert plain.json_depth('{"a": "[[[[", "b": [[1], {"c": []}]}') == 4, "brackets inside strings do not count"
    assert plain.loads('{"a": [1, 2]}', "x", max_depth=2) == {"a": [1, 2]}
    with pytest.raises(plain.NotPlainData, match="x is nested more than 1 levels deep"):
        plain.loads('{"a": [1, 2]}', "x", max_depth=1)
