"""Everything a student's kernel sends the judge is bounded before it is used, and each refusal names its limit:
the description of the answers (its size, its nesting), replies to calls, plain data."""
from __future__ import annotations

import json

import pytest

from gemmlab.answers import serving, stand_ins, wire
from gemmlab.judge import plain
from gemmlab.answers.wire import AnswerError


def test_a_value_too_large_for_the_description_is_opaque_and_the_others_still_cross() -> None:
    """An honest answer beside a huge value: the huge one fails its tests naming the limit; the rest are bound
    (a 200 MB value once dropped the student's correct answer silently)."""
    namespace = {"table": "x" * (wire.MAX_DESCRIPTION_CHARS + 10), "tile": (128, 64), "f": lambda x: x}
    described = json.loads(serving.describe(namespace, ["table", "tile", "f"]))
    assert described["table"]["kind"] == "opaque" and f"{wire.MAX_DESCRIPTION_CHARS:,} in all" in \
        described["table"]["why"]
    bound: dict = {}
    stand_ins.bind(bound, json.dumps(described), ["table", "tile", "f"])
    assert bound["tile"] == (128, 64) and isinstance(bound["f"], stand_ins.Answer)
    with pytest.raises(AnswerError, match="does not reach the tests"):
        bound["table"] == "x"
    assert len(serving.describe({n: "y" * (1 << 20) for n in "abcdefg"}, list("abcdefg"))) \
        <= wire.MAX_DESCRIPTION_CHARS + 65536, "several large values together stay within the limit too"


@pytest.mark.parametrize("description, limit", [
    ("[" * 200_000 + "]" * 200_000, "nested more than 8 levels deep"),
    (json.dumps({"a": {"kind": "value", "data": "1"}, "pad": "p" * (wire.MAX_DESCRIPTION_CHARS + 70_000)}),
     "characters; at most"),
    ("{not json", "is not JSON"),
])
def test_a_forged_description_is_refused_naming_the_limit(description: str, limit: str) -> None:
    with pytest.raises(AnswerError, match=limit):
        stand_ins.bind({}, description, ["a"])


def test_replies_to_calls_are_read_within_their_limits(monkeypatch) -> None:
    for reply, words in (("[" * 1000 + "]" * 1000, "nested more than 64 levels"),
                         (json.dumps({"id": 1, "result": "1", "pad": "z" * 5000}), "characters; at most 4,000")):
        monkeypatch.setattr(stand_ins, "channel", lambda request, reply=reply: reply)
        monkeypatch.setattr(stand_ins, "MAX_REPLY_CHARS", 4000)
        with pytest.raises(AnswerError, match=words):
            stand_ins.read_reply("square", reply, stand_ins.MAX_REPLY_CHARS)


def test_plain_data_nested_without_end_is_refused_not_a_recursion_error() -> None:
    for text in ("[" * 200_000 + "]" * 200_000, '{"t": "tuple", "v": ' * 5000 + "[]" + "}" * 5000):
        with pytest.raises(plain.NotPlainData, match="nested more than"):
            plain.decode(text)
    assert plain.json_depth('{"a": "[[[[", "b": [[1], {"c": []}]}') == 4, "brackets inside strings do not count"
    assert plain.loads('{"a": [1, 2]}', "x", max_depth=2) == {"a": [1, 2]}
    with pytest.raises(plain.NotPlainData, match="x is nested more than 1 levels deep"):
        plain.loads('{"a": [1, 2]}', "x", max_depth=1)


def test_the_walk_over_nested_values_reaches_as_deep_as_plain_data() -> None:
    nested: object = "leaf"
    for _ in range(plain.MAX_DEPTH):
        nested = [nested]
    found = wire.rebuilt(nested, lambda part: "replaced" if part == "leaf" else wire.KEEP)
    for _ in range(plain.MAX_DEPTH):
        found = found[0]
    assert found == "replaced", "a mark as deep as plain data allows is still replaced"
    too_deep = [nested]
    kept = wire.rebuilt(too_deep, lambda part: "replaced" if part == "leaf" else wire.KEEP)
    with pytest.raises(plain.NotPlainData, match="nested more than"):
        plain.encode(kept, "the value")


def test_a_tuple_subclass_is_a_leaf_of_the_walk() -> None:
    from collections import namedtuple

    Pair = namedtuple("Pair", "a b")
    value = [Pair("leaf", 1), ("leaf", 2)]
    out = wire.rebuilt(value, lambda part: "x" if part == "leaf" else wire.KEEP)
    assert out == [Pair("leaf", 1), ("x", 2)]
