"""scripts/course.sh starts JupyterLab the way a student's machine needs: as root it passes
--allow-root (JupyterLab refuses to start otherwise), and nbgrader's Validate finds the course's
nbgrader_config.py through the Jupyter config path. Run on a copy of the scripts with stand-ins
for setup.sh, gemmlab and jupyter, so nothing is installed or started."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.support import ROOT


def _fake_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "course.sh", repo / "scripts" / "course.sh")
    (repo / "scripts" / "setup.sh").write_text("#!/usr/bin/env bash\nexit 0\n")
    (repo / "autograder").mkdir()
    shutil.copy(ROOT / "autograder" / "nbgrader_config.py", repo / "autograder" / "nbgrader_config.py")
    bin_dir = repo / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "gemmlab").write_text("#!/usr/bin/env bash\nexit 0\n")
    (bin_dir / "jupyter").write_text('#!/usr/bin/env bash\necho "ARGS $*"\necho "CONFIG_PATH $JUPYTER_CONFIG_PATH"\n')
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    return repo


def _run(repo: Path, *args: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "JUPYTER_CONFIG_PATH"}
    out = subprocess.run(["bash", str(repo / "scripts" / "course.sh"), *args], capture_output=True, text=True,
                         env=env, check=True, timeout=60).stdout
    return dict(line.split(" ", 1) for line in out.splitlines() if " " in line)


def test_course_script_allows_root_only_as_root(tmp_path: Path) -> None:
    seen = _run(_fake_repo(tmp_path), "--no-browser")
    args = seen["ARGS"].split()
    assert args[:2] == ["lab", "--notebook-dir=course"] and args[-1] == "--no-browser", args
    assert ("--allow-root" in args) == (os.geteuid() == 0), args


def test_validate_finds_the_course_nbgrader_config(tmp_path: Path) -> None:
    repo = _fake_repo(tmp_path)
    first = _run(repo)["CONFIG_PATH"].split(os.pathsep)[0]
    assert (Path(first) / "nbgrader_config.py").is_file(), first
    assert Path(first).resolve() == (repo / "autograder").resolve()
