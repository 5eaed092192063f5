"""Autograde the solutions and the untouched student release in a throw-away course copy.

For each assignment, two "students" submit: ``solution`` hands in the solutions notebook,
``untouched`` the release exactly as a student receives it. Both are autograded with the
course's nbgrader configuration. The check passes when the solutions earn full marks and
the untouched release earns zero without the grader crashing. On a machine without a GPU
the GPU cells only compile, so there this checks the grading machinery, not the kernels.

    python tools/autograde_check.py                       # every assignment
    python tools/autograde_check.py 00_gpu_and_roofline --keep /tmp/ag
    python tools/autograde_check.py --jobs 4              # four assignments at a time
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "autograder" / "nbgrader_config.py"
sys.path.insert(0, str(Path(__file__).resolve().parent))
import release  # noqa: E402

STUDENTS = ("solution", "untouched")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    # The grader's Python kernels must import this checkout's gemmlab even if it is not installed.
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("CUTE_DSL_ARCH", "sm_90a")
    return env


def _nbgrader(course: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "nbgrader", *args, f"--NbGrader.config_file={CONFIG}",
           f"--CourseDirectory.root={course}",
           "--CourseDirectory.submitted_directory=submitted",
           "--CourseDirectory.autograded_directory=autograded",
           "--CourseDirectory.feedback_directory=feedback",
           f"--CourseDirectory.db_url=sqlite:///{course / 'gradebook.db'}"]
    return subprocess.run(cmd, cwd=course, env=_env(), capture_output=True, text=True)


def check(assignment: str, course: Path) -> dict[str, tuple[float, float]]:
    """Grade both students on one assignment; return {student: (score, max_score)}."""
    src = release.SOLUTIONS / assignment
    shutil.copytree(src, course / "solutions" / assignment)
    proc = _nbgrader(course, "generate_assignment", assignment, "--force")
    if proc.returncode != 0:
        raise RuntimeError(f"generate_assignment {assignment} failed:\n{proc.stdout}\n{proc.stderr}")
    handed_in = {"solution": src, "untouched": course / "course" / assignment}
    scores: dict[str, tuple[float, float]] = {}
    for student in STUDENTS:
        dest = course / "submitted" / student / assignment
        shutil.copytree(handed_in[student], dest, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
        start = time.perf_counter()
        proc = _nbgrader(course, "autograde", assignment, "--force", f"--student={student}")
        print(f"  {assignment}/{student}: nbgrader autograde {time.perf_counter() - start:.0f} s", flush=True)
        if proc.returncode != 0:
            raise RuntimeError(f"autograde {assignment} for {student!r} crashed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for student in STUDENTS:
            sub = gb.find_submission(assignment, student)
            scores[student] = (float(sub.score), float(sub.max_score))
    return scores


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("assignments", nargs="*", help="default: every assignment under solutions/")
    parser.add_argument("--keep", type=Path, help="grade in this folder and keep it (autograded notebooks, logs)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="assignments graded at once, each in its own course folder (compiles run in "
                             "parallel; on a GPU the performance bars then share it)")
    args = parser.parse_args(argv)
    names = args.assignments or release.assignments()
    course = args.keep or Path(tempfile.mkdtemp(prefix="gemmlab-autograde-"))
    course.mkdir(parents=True, exist_ok=True)
    try:
        from gemmlab.running.gpu import has_gpu
    except ImportError:
        sys.path.insert(0, str(ROOT))
        from gemmlab.running.gpu import has_gpu
    print(f"autograding in {course} ({'GPU' if has_gpu() else 'no GPU: GPU cells only compile'})")
    def one(name: str) -> bool:
        start = time.perf_counter()
        folder = course / name if args.jobs > 1 else course
        folder.mkdir(parents=True, exist_ok=True)
        try:
            scores = check(name, folder)
        except RuntimeError as err:
            print(f"{name}: FAILED after {time.perf_counter() - start:.0f} s\n{err}", flush=True)
            return False
        sol, unt = scores["solution"], scores["untouched"]
        good = sol[0] == sol[1] and sol[1] > 0 and unt[0] == 0
        print(f"{name}: solutions {sol[0]:g}/{sol[1]:g}, untouched release {unt[0]:g}/{unt[1]:g}"
              f"  {'ok' if good else 'WRONG (want full marks and zero)'}  ({time.perf_counter() - start:.0f} s)",
              flush=True)
        return good

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        ok = all(list(pool.map(one, names)))
    if not args.keep:
        shutil.rmtree(course, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
