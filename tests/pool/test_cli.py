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


def test_check_says_the_pool_cannot_start_without_a_gpu_and_listens_nowhere(tmp_path: Path, monkeypatch,
                                                                             capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert main(["serve", "--hub", "--check", "--ray", "off", "--no-sandbox"]) == 2
    err = capsys.readouterr().err
    assert "no GPU is visible on this host" in err and "--pool off" in err


def test_check_builds_the_judges_and_closes_them_without_serving(tmp_path: Path, monkeypatch,
                                                                 capsys: pytest.CaptureFixture) -> None:
    """``--check`` with ``--hub`` needs none of the Hub's credentials (only the service the Hub starts has them)."""
    import pool.service

    closed: list[bool] = []

    class Judges:
        def gpus(self) -> list[str]:
            return ["host gpu 0", "host gpu 1"]

        def close(self) -> None:
            closed.append(True)

    monkeypatch.delenv("JUPYTERHUB_API_TOKEN", raising=False)
    monkeypatch.setattr(pool.service, "serve_forever", lambda *a, **k: pytest.fail("--check must not serve"))
    assert main(["serve", "--hub", "--check", "--ray", "off", "--gpus", "0,1"], make_executor=lambda args: Judges()) == 0
    assert closed == [True]
    assert "ready to judge on host gpu 0, host gpu 1" in capsys.readouterr().out


def test_check_without_the_hub_still_needs_a_roster(capsys: pytest.CaptureFixture) -> None:
    assert main(["serve", "--check", "--ray", "off"], make_executor=lambda args: pytest.fail("not reached")) == 2
    assert "--roster" in capsys.readouterr().err
