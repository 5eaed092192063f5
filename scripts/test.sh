#!/usr/bin/env bash
# Set up (if needed) and run the test suite. GPU tests run when a GPU is present, else skip.
# Without a GPU the tests run in one process per CPU core and one more (pytest-xdist), a test file per
# process at a time, so a file's expensive fixtures (a course, a compiled kernel) are made once; the extra
# process keeps every core busy while others wait on a Hub, a browser or a grading's kernels (on 2 cores:
# busy 85-92% of the run with two, ~100% with three). With a GPU they run in one process, so the tests that
# time kernels have the GPU to themselves. GEMMLAB_TEST_JOBS=N chooses.
set -euo pipefail
cd "$(dirname "$0")/.."
# Some machines set PYTHONDONTWRITEBYTECODE (the 2-core test machine does). Then every test process rewrote
# every test module's asserts again: collecting took 10.6 s of CPU a process instead of 5.9. Cached bytecode
# is checked against its source's time stamp, so it is never stale.
unset PYTHONDONTWRITEBYTECODE
bash scripts/setup.sh --with-browser
default=$(( $( (nproc || getconf _NPROCESSORS_ONLN || echo 1) 2>/dev/null ) + 1 ))
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then default=1; fi
jobs="${GEMMLAB_TEST_JOBS:-$default}"
if [ "$jobs" = "1" ]; then
  exec .venv/bin/python -m pytest "$@"
fi
exec .venv/bin/python -m pytest -n "$jobs" --dist loadfile "$@"
