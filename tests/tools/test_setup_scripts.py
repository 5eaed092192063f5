"""scripts/course.sh starts JupyterLab the way a student's machine needs: as root it passes
--allow-root (JupyterLab refuses to start otherwise), and nbgrader's Validate finds the course's
nbgrader_config.py through the Jupyter config path. scripts/setup.sh installs on a clean clone (as CI
does) and, once its stamp is current, runs no pip and prints nothing, so a second course start is quiet
and fast. Run on copies of the scripts with stand-ins for Python's venv and pip, gemmlab, jupyter and
apt-get, so nothing is installed or started."""
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


# ------------------------------------------------------------------ setup.sh: install once, then stay quiet

_PIP_STUB = r'''#!/usr/bin/env bash
# A venv's python: pip is recorded (and "installs" into the fake site); anything else runs the real Python
# without its site-packages, so only what this stub installed is importable.
if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then
  shift 2
  echo "PIP $*" >> "$FAKE_LOG"
  [ -n "${FAKE_PIP_FAILS:-}" ] && { echo "ERROR: no matching distribution (stand-in)"; exit 1; }
  case " $* " in
    *" -e "*) mkdir -p "$FAKE_SITE/gemmlab-0.1.0.dist-info"
              printf 'Metadata-Version: 2.1\nName: gemmlab\nVersion: 0.1.0\n' > "$FAKE_SITE/gemmlab-0.1.0.dist-info/METADATA"
              mkdir -p "$FAKE_SITE/gemmlab"; echo '__version__ = "0.1.0"' > "$FAKE_SITE/gemmlab/__init__.py"
              echo "Editable installation. Please be careful with folders (stand-in for setuptools' notice)" >&2 ;;
    *" torch"*) mkdir -p "$FAKE_SITE/torch"; touch "$FAKE_SITE/torch/__init__.py" ;;
  esac
  exit 0
fi
PYTHONPATH="$FAKE_SITE" exec "$REAL_PYTHON" -S "$@"
'''


def _setup_repo(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A checkout with the real setup.sh and course.sh, stand-ins for Python's venv and pip, gemmlab doctor,
    jupyter, apt-get and bwrap (so nothing is installed or started), and the environment to run them in."""
    import sys

    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    for script in ("setup.sh", "course.sh"):
        shutil.copy(ROOT / "scripts" / script, repo / "scripts" / script)
    (repo / "pyproject.toml").write_text('[project]\nname = "gemmlab"\nversion = "0.1.0"\n')
    tools = tmp_path / "bin"
    tools.mkdir()
    stub = tools / "venv-python"
    stub.write_text(_PIP_STUB)
    log = tmp_path / "calls.log"
    # `python3 -m venv .venv` makes a venv whose python is the stand-in; gemmlab and jupyter record their calls.
    (tools / "python3").write_text(
        f'#!/usr/bin/env bash\nif [ "$1 $2" = "-m venv" ]; then mkdir -p "$3/bin"; cp "{stub}" "$3/bin/python"\n'
        f'  printf \'#!/usr/bin/env bash\\necho "DOCTOR" >> "$FAKE_LOG"\\n\' > "$3/bin/gemmlab"\n'
        f'  printf \'#!/usr/bin/env bash\\necho "JUPYTER $*" >> "$FAKE_LOG"\\n\' > "$3/bin/jupyter"\n'
        f'  chmod +x "$3/bin/python" "$3/bin/gemmlab" "$3/bin/jupyter"; echo "VENV" >> "$FAKE_LOG"; exit 0; fi\n'
        f'exec "{sys.executable}" "$@"\n')
    (tools / "apt-get").write_text('#!/usr/bin/env bash\necho "APT $*" >> "$FAKE_LOG"\n')
    (tools / "bwrap").write_text("#!/usr/bin/env bash\nexit 0\n")
    # npm "installs" configurable-http-proxy where setup.sh looks for it, or fails when FAKE_NPM_FAILS is set
    (tools / "npm").write_text('#!/usr/bin/env bash\necho "NPM $*" >> "$FAKE_LOG"\n'
                               '[ -n "${FAKE_NPM_FAILS:-}" ] && exit 1\n'
                               'bin=.venv/chp/node_modules/.bin; mkdir -p $bin\n'
                               'touch $bin/configurable-http-proxy; chmod +x $bin/configurable-http-proxy\n')
    for tool in tools.iterdir():
        tool.chmod(0o755)
    (repo / "autograder").mkdir()
    env = {"PATH": f"{tools}:/usr/bin:/bin", "HOME": str(tmp_path), "FAKE_LOG": str(log),
           "FAKE_SITE": str(tmp_path / "site"), "REAL_PYTHON": sys.executable, "PYTHON": str(tools / "python3")}
    return repo, env


def _setup(repo: Path, env: dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(repo / "scripts" / "setup.sh"), *args], capture_output=True, text=True,
                          env=env, check=check, timeout=120)


def _calls(env: dict[str, str]) -> list[str]:
    path = Path(env["FAKE_LOG"])
    calls = path.read_text().splitlines() if path.exists() else []
    path.write_text("")
    return calls


def test_setup_installs_on_a_clean_clone_and_is_quiet_and_pip_free_the_second_time(tmp_path: Path) -> None:
    repo, env = _setup_repo(tmp_path)
    assert _setup(repo, env, "--check", check=False).returncode == 1        # nothing there yet
    first = _setup(repo, env)
    calls = _calls(env)
    assert calls[0] == "VENV" and "PIP install --quiet --upgrade pip" in calls
    assert "PIP install --quiet torch==2.13.0" in calls                      # no GPU: the CPU build
    assert "PIP install --quiet -e .[test,grade,class]" in calls
    # the slow-to-import IRI checker goes after the install that brought it (every notebook reader paid for it)
    installed = calls.index("PIP install --quiet -e .[test,grade,class]")
    assert calls.index("PIP uninstall --quiet -y rfc3987-syntax") > installed
    assert "gemmlab is installed in .venv (0.1.0)." in first.stdout
    assert "careful with folders" not in first.stdout + first.stderr       # pip's chatter stays in the log
    assert "careful with folders" in (repo / ".venv" / "setup.log").read_text()
    assert _setup(repo, env, "--check").returncode == 0
    second = _setup(repo, env)
    assert _calls(env) == [] and second.stdout == "" and second.stderr == ""


def test_setup_tries_npm_once_per_install_and_says_how_to_try_again(tmp_path: Path) -> None:
    repo, env = _setup_repo(tmp_path)
    env["FAKE_NPM_FAILS"] = "1"
    first = _setup(repo, env)
    assert any(c.startswith("NPM install") and "--fetch-retries=1" in c for c in _calls(env))
    assert "could not install configurable-http-proxy" in first.stderr and "GEMMLAB_REINSTALL=1" in first.stderr
    second = _setup(repo, env)
    assert _calls(env) == [] and second.stdout == "" and second.stderr == "", "npm is not tried on every run"
    del env["FAKE_NPM_FAILS"]
    env["GEMMLAB_REINSTALL"] = "1"
    third = _setup(repo, env)
    assert any(c.startswith("NPM install") for c in _calls(env)) and "could not install" not in third.stderr
    assert (repo / ".venv" / "chp" / "node_modules" / ".bin" / "configurable-http-proxy").exists()


def test_setup_runs_pip_again_when_pyproject_changes_or_gemmlab_is_gone(tmp_path: Path) -> None:
    repo, env = _setup_repo(tmp_path)
    _setup(repo, env)
    _calls(env)
    (repo / "pyproject.toml").write_text((repo / "pyproject.toml").read_text() + 'dependencies = ["numpy"]\n')
    assert _setup(repo, env, "--check", check=False).returncode == 1
    _setup(repo, env)
    calls = _calls(env)
    assert "PIP install --quiet -e .[test,grade,class]" in calls and not any("torch" in c for c in calls)  # torch stays
    assert _setup(repo, env, "--check").returncode == 0
    shutil.rmtree(tmp_path / "site" / "gemmlab-0.1.0.dist-info")           # pip uninstall gemmlab
    _setup(repo, env)
    assert "PIP install --quiet -e .[test,grade,class]" in _calls(env)
    env["GEMMLAB_REINSTALL"] = "1"
    _setup(repo, env)
    assert "PIP install --quiet -e .[test,grade,class]" in _calls(env)


def test_setup_takes_a_cuda_torch_where_a_gpu_is(tmp_path: Path) -> None:
    repo, env = _setup_repo(tmp_path)
    smi = Path(env["PATH"].split(":")[0]) / "nvidia-smi"
    smi.write_text("#!/usr/bin/env bash\nexit 0\n")
    smi.chmod(0o755)
    _setup(repo, env)
    calls = _calls(env)
    assert "PIP install --quiet torch" in calls and not any("torch==" in c for c in calls)


def test_setup_shows_pips_log_when_pip_fails_and_leaves_no_stamp(tmp_path: Path) -> None:
    repo, env = _setup_repo(tmp_path)
    failed = _setup(repo, {**env, "FAKE_PIP_FAILS": "1"}, check=False)
    assert failed.returncode != 0
    assert "failed; its log" in failed.stderr and "no matching distribution (stand-in)" in failed.stderr
    assert not (repo / ".venv" / ".gemmlab-setup-stamp").exists()
    assert _setup(repo, env, "--check", check=False).returncode == 1


def test_a_second_course_start_installs_nothing_and_skips_the_doctor(tmp_path: Path) -> None:
    repo, env = _setup_repo(tmp_path)

    def start() -> list[str]:
        subprocess.run(["bash", str(repo / "scripts" / "course.sh"), "--no-browser"], capture_output=True,
                       text=True, env=env, check=True, timeout=120)
        return _calls(env)

    first = start()
    assert "DOCTOR" in first and any(c.startswith("PIP install --quiet -e") for c in first)
    second = start()
    assert [c.split()[0] for c in second] == ["JUPYTER"], second         # no pip, no doctor, no apt
