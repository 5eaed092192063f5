"""``python -m pool tokens|serve``: issue students' tokens, run the pool service."""
from __future__ import annotations

import argparse
import csv
import io
import sys
from pathlib import Path
from typing import Callable, Sequence

from .auth import Authenticator
from .errors import PoolError
from .hub_auth import HubUsers, hub_auth_from_env
from .limits import StudentLimits, UsageLedger
from .roster import read_roster
from .scheduler import DEFAULT_SLOTS_PER_GPU, Executor, FairScheduler
from .tokens import TokenStore, default_store_path, write_private
from .worker import LocalExecutor, sandbox_problem, visible_gpus


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m pool", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    tokens = sub.add_parser("tokens", help="issue one token per student of the roster (replacing earlier ones)")
    tokens.add_argument("--roster", type=Path, required=True, help="CSV with an 'id' column, or one id a line")
    tokens.add_argument("--out", type=Path, required=True, help="CSV of student,token,expires to hand out")
    tokens.add_argument("--days", type=float, default=30.0, help="days each token stays valid (default 30)")
    tokens.add_argument("--only", nargs="+", metavar="STUDENT", help="issue for these students only")
    tokens.add_argument("--store", type=Path, help="the server's hashes (default: ROSTER.tokens.json beside it)")

    serve = sub.add_parser("serve", help="run the HTTP service in front of the GPUs")
    serve.add_argument("--roster", type=Path, help="students with pool tokens (required without --hub)")
    serve.add_argument("--hub", action="store_true",
                       help="serve the JupyterHub's users by their Hub tokens (run as a Hub service: pool/README.md)")
    serve.add_argument("--store", type=Path, help="the token hashes (default: ROSTER.tokens.json beside it)")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8765)
    serve.add_argument("--ray", choices=("local", "auto", "off"), default="local",
                       help="local: a private one-host Ray; auto: join the running cluster; off: no Ray, this host's GPUs")
    serve.add_argument("--gpus", help="off: CUDA indices to use (default: all visible); local/auto: how many GPUs")
    serve.add_argument("--slots-per-gpu", type=int, default=DEFAULT_SLOTS_PER_GPU,
                       help="requests judged side by side on one GPU (default %(default)s)")
    serve.add_argument("--concurrent-jobs", type=int, default=2, help="per student, queued or running")
    serve.add_argument("--gpu-seconds-per-hour", type=float, default=900.0, help="per student")
    serve.add_argument("--profiles-per-hour", type=int, default=12,
                       help="per student: Nsight Compute readouts and timelines, each holding a GPU alone (0: none)")
    serve.add_argument("--job-timeout", type=float, default=300.0, help="wall-clock seconds of one judge process")
    serve.add_argument("--no-sandbox", action="store_true", help="run judges without bubblewrap (trusted hosts only)")
    serve.add_argument("--check", action="store_true",
                       help="only say whether serve can start here (sandbox, GPUs; the roster unless --hub), then exit")
    return parser


def issue(args: argparse.Namespace) -> int:
    roster = read_roster(args.roster)
    students = roster if not args.only else [s for s in args.only if s in roster]
    missing = sorted(set(args.only or []) - set(roster))
    if missing:
        raise PoolError(f"not on the roster: {', '.join(missing)}")
    if args.days <= 0:
        raise PoolError("--days must be above 0.")
    store_path = args.store or default_store_path(args.roster)
    store = TokenStore.load(store_path)
    issued = store.issue(students, args.days * 86400.0)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["student", "token", "expires"])
    for t in issued:
        writer.writerow([t.student, t.token, t.expires_text])
    write_private(args.out, out.getvalue())
    store.save(store_path)
    print(f"{len(issued)} token(s) in {args.out} (hand each student theirs; keep the file private); "
          f"hashes in {store_path}.")
    return 0


#: Builds the service's executor (what judges on which GPU) from ``serve``'s options.
ExecutorFactory = Callable[[argparse.Namespace], Executor]


def sandboxed(args: argparse.Namespace) -> bool:
    """Whether ``serve``'s judges run in the grading sandbox (unless ``--no-sandbox``); PoolError where it cannot."""
    if args.no_sandbox:
        return False
    if why := sandbox_problem():
        raise PoolError(f"the judge cannot run in the grading sandbox here: {why}. Install bubblewrap, or pass "
                        "--no-sandbox on a host that runs nothing else.")
    return True


def gpu_executor(args: argparse.Namespace) -> Executor:
    """The GPU judges of ``serve``'s options: this host's GPUs (``--ray off``) or a Ray cluster's, sandboxed."""
    sandbox = sandboxed(args)
    if args.ray == "off":
        gpus = args.gpus.split(",") if args.gpus else visible_gpus()
        if not gpus:
            raise PoolError("no GPU is visible on this host (CUDA_VISIBLE_DEVICES, torch): the pool judges kernels on "
                            "GPUs, so run it on a GPU host (a class without one runs with --pool off).")
        return LocalExecutor(gpus, sandbox)
    from .ray_pool import RayExecutor

    if args.gpus and not args.gpus.isdigit():
        raise PoolError(f"with Ray, --gpus is how many GPUs to use (a number), not {args.gpus!r}.")
    count = int(args.gpus) if args.gpus else None
    return RayExecutor(None if args.ray == "local" else "auto", sandbox, None, args.slots_per_gpu, count)


def _authenticator(args: argparse.Namespace) -> Authenticator | HubUsers:
    if args.roster is None and not args.hub:
        raise PoolError("say who may use the pool: --roster roster.csv (tokens) or --hub (the JupyterHub's users).")
    roster = Authenticator(args.roster, args.store or default_store_path(args.roster)) if args.roster else None
    return HubUsers(hub_auth_from_env(), roster) if args.hub else roster


def check(args: argparse.Namespace, make_executor: ExecutorFactory = gpu_executor) -> int:
    """``serve --check``: what ``serve`` would refuse, said before anything listens, so that a class is not started
    whose pool would exit at once. With Ray, the cluster's GPUs are found only when the pool starts."""
    if not args.hub:        # the Hub's credentials exist only in the service the Hub starts
        _authenticator(args)
    if args.ray != "off":
        sandboxed(args)
        print("python -m pool serve: the sandbox is usable; Ray's GPUs are found when the pool starts.")
        return 0
    executor = make_executor(args)
    try:
        print(f"python -m pool serve: ready to judge on {', '.join(executor.gpus())}.")
    finally:
        executor.close()
    return 0


def serve(args: argparse.Namespace, make_executor: ExecutorFactory = gpu_executor) -> int:
    import os

    from .service import Pool, serve_forever

    if args.check:
        return check(args, make_executor)
    auth = _authenticator(args)
    limits = StudentLimits(args.concurrent_jobs, args.gpu_seconds_per_hour, profiles_per_hour=args.profiles_per_hour)
    executor = make_executor(args)
    scheduler = FairScheduler(executor, args.slots_per_gpu, args.job_timeout)
    prefix = os.environ.get("JUPYTERHUB_SERVICE_PREFIX", "/") if args.hub else "/"
    who = f"{len(auth.students())} roster students" + (" and the Hub's users" if args.hub else "")
    print(f"pool: {who}, GPUs: {', '.join(scheduler.labels)}; "
          f"serving http://{args.host}:{args.port}{prefix}v1/ (Ctrl-C stops)", flush=True)
    serve_forever(Pool(auth, UsageLedger(limits), scheduler), args.host, args.port, prefix)
    return 0


def main(argv: Sequence[str] | None = None, make_executor: ExecutorFactory = gpu_executor) -> int:
    """The command line; ``make_executor`` builds what ``serve`` judges with (the repository's tests pass one
    whose judge needs no GPU)."""
    args = _parser().parse_args(argv)
    try:
        return issue(args) if args.command == "tokens" else serve(args, make_executor)
    except PoolError as exc:
        print(f"python -m pool {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
