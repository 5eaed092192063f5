"""A call watched for a library's code: every way a student's function can reach pycute or gemmlab.layout is
seen (a direct call, an alias bound earlier, a method, a helper, the library's own function as the answer, an
import inside the call, a thread it starts); the student's own arithmetic is not; a removed hook is reported.
Through the judge's answers channel (tests/gemmlab/judge/test_answers.py) the same watch runs on the student's
side and its report crosses back."""
from __future__ import annotations

import sys
import threading

import pycute
import pytest
from pycute import crd2idx as imported_early

import gemmlab.layout as gl
from gemmlab.notebook import nbhelpers
from gemmlab.checking.library_watch import library_roots, watched_call

LIBS = ["pycute", "gemmlab.layout"]


def own(coord, shape, stride):
    if isinstance(shape, tuple):
        return sum(own(c, s, d) for c, s, d in zip(coord, shape, stride))
    return coord * stride


def helper(coord, shape, stride):
    return gl.Layout(shape, stride)(coord)


def in_a_thread(coord, shape, stride):
    out = []
    worker = threading.Thread(target=lambda: out.append(pycute.crd2idx(coord, shape, stride)))
    worker.start()
    worker.join()
    return out[0]


def late_import(coord, shape, stride):
    import pycute as again        # already imported: the watch knows the library by where its code lives
    return again.crd2idx(coord, shape, stride)


CHEATS = {
    "pycute.crd2idx": lambda c, s, d: pycute.crd2idx(c, s, d),
    "an alias imported before the call": lambda c, s, d: imported_early(c, s, d),
    "a Layout called": lambda c, s, d: gl.Layout(s, d)(c),
    "a helper that calls it": helper,
    "the library's function itself": pycute.crd2idx,
    "a thread the call starts": in_a_thread,
    "an import inside the call": late_import,
    "gemmlab.layout.size for a shape's size": lambda c, s, d: own(c, s, d) + 0 * gl.size(gl.Layout(s, d)),
}


@pytest.mark.parametrize("name", CHEATS)
def test_every_way_into_the_library_is_seen(name: str) -> None:
    seen = watched_call(CHEATS[name], (((1, 2), 5), ((2, 4), 8), ((1, 16), 2)), libraries=LIBS)
    assert not seen.clean and seen.entered, name
    assert all(e.split(":")[0] in LIBS for e in seen.entered)


def test_the_students_own_arithmetic_is_clean_and_returned() -> None:
    seen = watched_call(own, (((1, 2), 5), ((2, 4), 8), ((1, 16), 2)), libraries=LIBS)
    assert seen.clean and seen.result == 1 * 1 + 2 * 16 + 5 * 2
    assert seen.to_dict() == {"entered": [], "hook_removed": False}


def test_numpy_and_the_standard_library_are_not_watched() -> None:
    import math

    import numpy as np
    seen = watched_call(lambda: int(np.prod([2, 3])) + math.prod([4]), libraries=LIBS)
    assert seen.clean and seen.result == 10


def test_a_removed_hook_is_reported_and_the_earlier_one_restored() -> None:
    calls = []
    before = lambda frame, event, arg: calls.append(event)  # noqa: E731 - a profiler the student had running
    sys.setprofile(before)
    try:
        seen = watched_call(lambda: sys.setprofile(None) or pycute.crd2idx(1, 4, 2), libraries=LIBS)
        assert seen.hook_removed and not seen.clean
        assert sys.getprofile() is before
    finally:
        sys.setprofile(None)


def test_an_exception_propagates_and_leaves_no_hook() -> None:
    def broken():
        raise ValueError("mine")

    with pytest.raises(ValueError, match="mine"):
        watched_call(broken, libraries=LIBS)
    assert sys.getprofile() is None and threading.getprofile() is None


def test_library_roots() -> None:
    roots = library_roots(LIBS + ["surely_not_installed_here"])
    assert roots["pycute"] and roots["gemmlab.layout"] and roots["surely_not_installed_here"] == ()
    for bad in ("pycute", [], ["x; import os"], ["a"] * 9):
        with pytest.raises(ValueError):
            library_roots(bad)


def test_ask_without_locally_names_what_ran_and_spares_honest_work() -> None:
    assert nbhelpers.ask_without(LIBS, own, (2, 3), (4, 8), (8, 1)) == 19
    with pytest.raises(nbhelpers.CheckFailed, match="pycute: pycute.int_tuple.crd2idx"):
        nbhelpers.ask_without(LIBS, CHEATS["pycute.crd2idx"], (2, 3), (4, 8), (8, 1))

    def placeholder(coord, shape, stride):
        raise NotImplementedError()

    with pytest.raises(nbhelpers.ExerciseNotDone, match="placeholder"):
        nbhelpers.ask_without(LIBS, placeholder, 1, 4, 2)
