"""Regenerate the student release ``course/<assignment>/`` from ``solutions/<assignment>/``.

The solutions notebooks are the source of truth. This runs ``nbgrader generate_assignment``
(solutions and hidden tests removed, cells locked and checksummed) into a scratch folder
with a throw-away gradebook, strips outputs and execution counts so the release is
byte-for-byte reproducible, and then either replaces ``course/<assignment>/`` or, with
``--check``, only reports whether the committed release is up to date (exit 1 if not).

    python tools/release.py                 # every assignment under solutions/
    python tools/release.py 00_gpu_and_roofline --check
"""
from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions"
COURSE = ROOT / "course"
CONFIG = ROOT / "autograder" / "nbgrader_config.py"


class ReleaseError(RuntimeError):
    """nbgrader refused to generate an assignment; the message carries its log."""


def assignments() -> list[str]:
    """Every folder under solutions/ that holds a notebook, in order."""
    return sorted(p.name for p in SOLUTIONS.iterdir() if p.is_dir() and any(p.glob("*.ipynb")))


def _env() -> dict[str, str]:
    # nbgrader runs `alembic` to create the gradebook: our environment's bin/ must be on PATH.
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env


def normalize_notebook(path: Path) -> None:
    """No outputs, no execution counts, no run-time metadata: the release must not depend on a run."""
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
        for key in ("execution", "collapsed", "scrolled"):
            cell.metadata.pop(key, None)
    nb.metadata.pop("widgets", None)
    nbformat.write(nb, path)


def _nbgrader_generate(pattern: str, dest: Path) -> None:
    """``nbgrader generate_assignment PATTERN`` (an assignment, or ``*`` for all) into ``dest``."""
    with tempfile.TemporaryDirectory(prefix="gemmlab-gradebook-") as tmp:
        cmd = [
            sys.executable, "-m", "nbgrader", "generate_assignment", pattern,
            "--force", f"--NbGrader.config_file={CONFIG}",
            f"--CourseDirectory.release_directory={dest}",
            f"--CourseDirectory.db_url=sqlite:///{Path(tmp) / 'gradebook.db'}",
        ]
        proc = subprocess.run(cmd, cwd=ROOT, env=_env(), capture_output=True, text=True)
    if proc.returncode != 0:
        raise ReleaseError(f"nbgrader generate_assignment {pattern} failed:\n{proc.stdout}\n{proc.stderr}")


def _released(assignment: str, dest: Path) -> Path:
    out = dest / assignment
    if not out.is_dir():
        raise ReleaseError(f"nbgrader generate_assignment wrote no {out}")
    for nb in out.glob("**/*.ipynb"):
        normalize_notebook(nb)
    return out


def generate(assignment: str, dest: Path) -> Path:
    """Generate one assignment's release into ``dest/<assignment>`` and return that folder."""
    _nbgrader_generate(assignment, dest)
    return _released(assignment, dest)


def generate_all(dest: Path) -> dict[str, Path]:
    """Every assignment's release into ``dest`` in one nbgrader run (it starts once, not once an assignment):
    assignment -> its folder."""
    _nbgrader_generate("*", dest)
    return {name: _released(name, dest) for name in assignments()}


def differences(a: Path, b: Path) -> list[str]:
    """Relative paths that differ between two release folders (missing on either side included)."""
    if not b.is_dir():
        return [f"{b.name}/ is missing"]
    diffs: list[str] = []

    def walk(cmp: filecmp.dircmp, prefix: str) -> None:
        diffs.extend(f"{prefix}{n} (only in the fresh release)" for n in cmp.left_only)
        diffs.extend(f"{prefix}{n} (only in course/)" for n in cmp.right_only)
        diffs.extend(f"{prefix}{n} (differs)" for n in cmp.diff_files)
        for name, sub in cmp.subdirs.items():
            walk(sub, f"{prefix}{name}/")

    walk(filecmp.dircmp(a, b, ignore=[".ipynb_checkpoints", "__pycache__"]), f"{b.name}/")
    # dircmp compares shallowly (size+mtime) first; re-check "same" files byte by byte.
    for path in a.rglob("*"):
        other = b / path.relative_to(a)
        if path.is_file() and other.is_file() and path.read_bytes() != other.read_bytes():
            entry = f"{b.name}/{path.relative_to(a)} (differs)"
            if entry not in diffs:
                diffs.append(entry)
    return diffs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("assignments", nargs="*", help="assignment folders (default: all under solutions/)")
    parser.add_argument("--check", action="store_true", help="only report whether course/ is up to date")
    args = parser.parse_args(argv)
    names = args.assignments or assignments()
    stale: list[str] = []
    with tempfile.TemporaryDirectory(prefix="gemmlab-release-") as tmp:
        try:
            released = generate_all(Path(tmp)) if not args.assignments else {n: generate(n, Path(tmp)) for n in names}
        except ReleaseError as err:
            print(err, file=sys.stderr)
            return 2
        for name in names:
            fresh = released[name]
            target = COURSE / name
            if args.check:
                diffs = differences(fresh, target)
                stale += diffs
                print(f"{name}: {'up to date' if not diffs else 'STALE'}")
                for d in diffs:
                    print(f"  {d}")
            else:
                if target.exists():
                    shutil.rmtree(target)
                shutil.copytree(fresh, target)
                print(f"{name}: released to {target.relative_to(ROOT)}")
    if stale:
        print("course/ is out of date: run `python tools/release.py` and commit course/.", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
