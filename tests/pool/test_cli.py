"""``python -m pool serve``: it judges on GPUs only, says what to do on a host without one, and takes its executor
from the caller only through ``main(make_executor=)`` (the Hub tests' fake pool), never from a command-line option."""
from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from pool.__main__ import main
from pool.errors import PoolError


def _roster(tmp_path: Path) -> str:
    roster = tmp_path / "roster.csv"
    roster.write_text("id\nalice\n")
    return str(roster)


def test_serve_without_a_visible_gpu_says_to_run_the_class_without_a_pool(tmp_path: Path, monkeypatch,
                                                                          capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert main(["serve", "--roster", _roster(tmp_path), "--ray", "off", "--no-sandbox"]) == 2
    err = capsys.readouterr().err
    assert "no GPU is visible on this host" in err and "--pool off" in err


def test_there_is_no_fake_backend_option(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["serve", "--roster", _roster(tmp_path), "--backend", "fake"])
    assert stop.value.code == 2 and "unrecognized arguments: --backend fake" in capsys.readouterr().err


def test_the_executor_comes_from_the_caller_with_the_parsed_options(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture) -> None:
    seen: list[argparse.Namespace] = []

    def refuse(args: argparse.Namespace):
        seen.append(args)
        raise PoolError("no judges today")

    assert main(["serve", "--roster", _roster(tmp_path), "--ray", "off", "--gpus", "3"], make_executor=refuse) == 2
    assert seen[0].gpus == "3" and seen[0].ray == "off"
    assert "python -m pool serve: no judges today" in capsys.readouterr().err
