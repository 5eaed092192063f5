"""``python -m classroom``: run a class on one machine (JupyterHub, the exchange, the GPU pool, grades to the LMS).

Commands, in the order an instructor uses them (README's "Run a class" section):

- ``start CLASS --roster roster.csv --instructor NAME``: make the class folder (first time) and run
  the Hub; prints where the students' passwords are (local logins) and the URL;
- ``release CLASS ASSIGNMENT``: put the assignment in the gradebook and in the exchange for students to fetch;
- ``collect CLASS ASSIGNMENT``: gather the students' hand-ins for grading;
- ``grade CLASS ASSIGNMENT``: collect, autograde in the sandbox, feedback for each student to fetch,
  and the grades as CSV files for Canvas and Moodle (and through LTI AGS where the LMS offers it);
- ``passwords CLASS [--only NAME ...]``: new passwords (a lost or leaked one).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Sequence

from pool.errors import PoolError

from .settings import POOL_KINDS, ClassDir, ClassError, ClassSettings, LtiSettings


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m classroom", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    q = sub.add_parser("start", help="make the class folder (first time) and run the Hub")
    q.add_argument("class_dir", type=Path)
    q.add_argument("--roster", type=Path, help="students: nbgrader's roster CSV (an 'id' column) or one name a line")
    q.add_argument("--instructor", action="append", default=[], help="an instructor's Hub name (repeatable)")
    q.add_argument("--auth", choices=("local", "lti"), default=None, help="local passwords (default) or LTI 1.3")
    q.add_argument("--lti", type=Path, help="JSON of the LMS's registration (issuer, client_id, authorize_url, "
                                            "jwks_url, token_url, deployment_id, context_id)")
    q.add_argument("--ip", default=None, help="address the Hub listens on (default 127.0.0.1)")
    q.add_argument("--port", type=int, default=None, help="the Hub's port (default 8000)")
    q.add_argument("--pool", choices=POOL_KINDS, default=None,
                   help="the GPU pool: this host's GPUs (default), or off (a host without a GPU; GPU cells then "
                        "need a GPU of the student's own)")
    q.add_argument("--pool-port", type=int, default=None)
    q.add_argument("--prepare-only", action="store_true", help="make the folder and passwords, do not run the Hub")
    for name, text in (("release", "put an assignment in the exchange"), ("collect", "gather hand-ins for grading"),
                       ("grade", "collect, autograde, feedback, export (and LTI AGS)")):
        q = sub.add_parser(name, help=text)
        q.add_argument("class_dir", type=Path)
        q.add_argument("assignment")
        if name == "grade":
            q.add_argument("--no-sandbox", action="store_true", help="grade without bubblewrap (trusted work only)")
            q.add_argument("--gpus", help="GPU indices for the grader (default: every GPU)")
            q.add_argument("--workers", type=int, help="parallel grading workers without GPUs")
    q = sub.add_parser("passwords", help="issue new passwords (local logins)")
    q.add_argument("class_dir", type=Path)
    q.add_argument("--only", nargs="+", metavar="NAME")
    return p


def _registration(path: Path) -> LtiSettings:
    """The LMS's registration of the tool (``--lti FILE``), or a ClassError naming what is wrong with it."""
    try:
        return LtiSettings(**json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError) as exc:
        raise ClassError(f"{path} is not the LMS's registration (a JSON object with issuer, client_id, authorize_url, "
                         f"jwks_url, and optionally token_url, deployment_id, context_id): {exc}") from None


def _settings(args: argparse.Namespace, where: ClassDir) -> ClassSettings:
    """The saved settings, updated by what this ``start`` was told."""
    from pool.roster import read_roster

    old = where.load() if where.settings_file.exists() else None
    students = [s.lower() for s in read_roster(args.roster)] if args.roster else (old.students if old else [])
    lti = _registration(args.lti) if args.lti else (old.lti if old else None)
    base = {} if old is None else {k: getattr(old, k) for k in ("course_id", "ip", "port", "auth", "pool", "pool_port",
                                                                 "pool_args", "pool_program", "student_memory_mb")}
    for key in ("ip", "port", "auth", "pool", "pool_port"):
        if getattr(args, key) is not None:
            base[key] = getattr(args, key)
    instructors = [i.lower() for i in args.instructor] or (old.instructors if old else [])
    return ClassSettings(students=students, instructors=instructors, lti=lti, **base)


#: Seconds the pool may take to say whether it can start (it imports torch to count the GPUs).
POOL_CHECK_S = 180


def check_pool(settings: ClassSettings) -> None:
    """Ask the pool the Hub would start (``serve --check``) whether it can: else the class would start, its pool
    would exit at once, and the reason would be only in the Hub's log. ClassError with the pool's reason."""
    command = settings.pool_command(sys.executable, "--check")
    try:
        done = subprocess.run(command, cwd=Path(__file__).resolve().parent.parent, capture_output=True, text=True,
                              timeout=POOL_CHECK_S)
    except subprocess.TimeoutExpired:
        raise ClassError(f"the GPU pool did not say within {POOL_CHECK_S} s whether it can start "
                         f"({' '.join(command[1:])}); the Hub was not started.") from None
    if done.returncode != 0:
        lines = (done.stderr.strip() or done.stdout.strip() or f"it exited with {done.returncode}").splitlines()
        raise ClassError(f"the GPU pool cannot start here, so the Hub was not started. {lines[-1]}")


def cmd_start(args: argparse.Namespace) -> int:
    from pool.tokens import write_private

    from .accounts import Accounts, write_passwords
    from .prepare import prepare_class

    where = ClassDir(args.class_dir)
    settings = _settings(args, where)
    where = ClassDir(args.class_dir, settings.course_id)
    prepare_class(where, settings)
    write_private(where.settings_file, settings.to_json())
    if settings.auth == "local":
        accounts = Accounts.load(where.accounts)
        users = settings.students + settings.instructors
        accounts.keep_only(users)
        issued = accounts.issue(u for u in users if u not in accounts.names())
        accounts.save(where.accounts)
        if issued:
            write_passwords(where.passwords, issued)
            print(f"{len(issued)} new password(s) in {where.passwords}: hand each user theirs, then delete the file.")
    if args.prepare_only:
        print(f"class folder ready: {where.root}")
        return 0
    hub = shutil.which("jupyterhub", path=str(Path(sys.executable).parent)) or shutil.which("jupyterhub")
    if hub is None:
        raise ClassError("JupyterHub is not installed: pip install -e '.[class]' (scripts/setup.sh --class).")
    if settings.pool != "off":
        check_pool(settings)
    env = {**os.environ, "GEMMLAB_CLASS_DIR": str(where.root),
           "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")}
    print(f"the class: http://{settings.ip}:{settings.port}/ (Ctrl-C stops the Hub, the pool and every server)",
          flush=True)
    config = Path(__file__).resolve().parent / "jupyterhub_config.py"
    os.execve(hub, [hub, "-f", str(config)], env)
    return 0


def cmd_passwords(args: argparse.Namespace) -> int:
    from .accounts import Accounts, write_passwords

    where = ClassDir(args.class_dir)
    settings = where.load()
    users = settings.students + settings.instructors
    unknown = sorted(set(args.only or []) - set(users))
    if unknown:
        raise ClassError(f"not in the class: {', '.join(unknown)}")
    accounts = Accounts.load(where.accounts)
    issued = accounts.issue(args.only or users)
    accounts.save(where.accounts)
    write_passwords(where.passwords, issued)
    print(f"{len(issued)} new password(s) in {where.passwords}; the old ones no longer work.")
    return 0


def cmd_release(args: argparse.Namespace) -> int:
    from .exchange import release

    where = ClassDir(args.class_dir)
    where = ClassDir(args.class_dir, where.load().course_id)
    print(release(where, args.assignment))
    return 0


def cmd_collect(args: argparse.Namespace) -> int:
    from .exchange import collect

    where = ClassDir(args.class_dir)
    where = ClassDir(args.class_dir, where.load().course_id)
    report = collect(where, args.assignment)
    print(report.text())
    return 0


def cmd_grade(args: argparse.Namespace) -> int:
    from .grading import grade

    where = ClassDir(args.class_dir)
    where = ClassDir(args.class_dir, where.load().course_id)
    return grade(where, args.assignment, sandbox=not args.no_sandbox, gpus=args.gpus, workers=args.workers)


COMMANDS = {"start": cmd_start, "passwords": cmd_passwords, "release": cmd_release, "collect": cmd_collect,
            "grade": cmd_grade}


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except (ClassError, PoolError) as exc:   # a roster the pool's reader refuses is a PoolError
        print(f"python -m classroom {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
