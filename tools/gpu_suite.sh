#!/usr/bin/env bash
# Run the whole GPU side of the project in one go on a GPU machine that may have no network:
# install carried wheels (from tools/wheelhouse.py) into a private target, then the GPU tests,
# the bank-conflict validation under ncu and the benchmarks. Logs go to $OUT (default ./gpu-out).
#
#   bash tools/gpu_suite.sh [WHEELHOUSE_DIR ...]
#
# Environment: OUT (log folder), GEMMLAB_SUITE_PARTS (space-separated subset of:
# tests banks bench-toolchain bench-dsl bench-timing bench-solutions bench-clocks bench-grading bench-hostile
# autograde; bench-hostile: 50 submissions of notebook 00, one in five hostile, with 30 s cell limits
# so that the hanging ones cost 30 s, not the default 180),
# PYTEST_ARGS, GEMMLAB_GRADING_WORKERS (notebooks graded side by side on GPU 0 in bench-grading; default 4),
# GEMMLAB_SUITE_JOBS (parallel pytest processes, or pytest-xdist workers where installed, for the GPU
# tests that assert no speed; default 4),
# GEMMLAB_AUTOGRADE_JOBS (assignments autograded at once; default 1, since performance bars share the GPU).
#
# Device time is scarce and cold C++ compiles take ~20 s each on one core, so the "tests" part
# runs the GPU tests that assert no speed in several pytest processes at once (one per group of
# test files, sharing the on-disk compile cache), then the tests marked `timing` alone, on a
# quiet GPU, with the kernels they need already compiled.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu-out}"
mkdir -p "$OUT"
PARTS="${GEMMLAB_SUITE_PARTS:-tests banks bench-toolchain bench-dsl}"
SITE=/tmp/gemmlab-site

for house in "$@"; do
  if [ -f "$house/install.sh" ]; then
    bash "$house/install.sh" "$SITE" || { echo "installing wheels from $house failed"; exit 3; }
  else
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target "$SITE" "$house"/*.whl || { echo "installing wheels from $house failed"; exit 3; }
  fi
done
export PYTHONPATH="$PWD:$SITE:$SITE/nvidia_cutlass_dsl/dsl_packages${PYTHONPATH:+:$PYTHONPATH}"
# pip --target puts console scripts in $SITE/bin (nbgrader runs `alembic` from PATH);
# install.sh unpacks carried Debian packages (bwrap, the grader's sandbox) under debroot.
export PATH="$SITE/bin:$SITE/debroot/usr/bin:$PATH"
export PYTHONUNBUFFERED=1 GEMMLAB_CACHE="${GEMMLAB_CACHE:-/tmp/gemmlab-cache}"

status=0
run() {  # run NAME CMD...: log to $OUT/NAME.log, remember failures
  local name=$1; shift
  echo "=== $name: $*"
  local t0=$SECONDS
  "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  echo "=== $name: exit $rc after $((SECONDS - t0)) s"
  tail -n 25 "$OUT/$name.log"
  [ $rc -eq 0 ] || status=1
}

python3 -m gemmlab.cli doctor >"$OUT/doctor.log" 2>&1; tail -n 30 "$OUT/doctor.log"
for part in $PARTS; do
  case $part in
    tests)
      timeout_opt=""
      python3 -c "import pytest_timeout" 2>/dev/null && timeout_opt="--timeout=600"
      jobs=${GEMMLAB_SUITE_JOBS:-4}
      rm -f "$OUT"/tests-[0-9]*.log
      # SERIAL: GPU tests that need the GPU to themselves (the grader's hostile "hog" takes all its memory).
      serial=(tests/autograder/test_gpu_grading.py)
      ignore=(); for f in "${serial[@]}"; do ignore+=(--ignore="$f"); done
      if python3 -c "import xdist" 2>/dev/null; then
        # pytest-xdist hands out single tests, so a file's many cold compiles run side by side.
        echo "=== tests: GPU tests that assert no speed, pytest-xdist with $jobs workers"
        python3 -m pytest -m "gpu and not timing" -q $timeout_opt -p no:cacheprovider --durations=15 -rfE \
          -n "$jobs" --dist load "${ignore[@]}" ${PYTEST_ARGS:-} >"$OUT/tests-0.log" 2>&1 || status=1
      else
        mapfile -t files < <(python3 -m pytest -m "gpu and not timing" --collect-only -q -p no:cacheprovider \
                               "${ignore[@]}" ${PYTEST_ARGS:-} 2>/dev/null | grep "::" | cut -d: -f1 | sort -u)
        echo "=== tests: ${#files[@]} files with GPU tests that assert no speed, in $jobs processes"
        pids=()
        for ((j = 0; j < jobs; j++)); do
          group=()
          for ((i = j; i < ${#files[@]}; i += jobs)); do group+=("${files[i]}"); done
          [ ${#group[@]} -eq 0 ] && continue
          python3 -m pytest -m "gpu and not timing" -q $timeout_opt -p no:cacheprovider --durations=10 -rfE \
            ${PYTEST_ARGS:-} "${group[@]}" >"$OUT/tests-$j.log" 2>&1 &
          pids+=($!)
        done
        for pid in "${pids[@]}"; do wait "$pid" || status=1; done
      fi
      for ((j = 0; j < jobs; j++)); do [ -f "$OUT/tests-$j.log" ] && tail -n 6 "$OUT/tests-$j.log"; done
      run tests-serial python3 -m pytest -m "gpu and not timing" -q $timeout_opt -p no:cacheprovider -rfE \
        --durations=10 ${PYTEST_ARGS:-} "${serial[@]}"
      run tests-timing python3 -m pytest -m "gpu and timing" -q $timeout_opt -p no:cacheprovider -rfE \
        ${PYTEST_ARGS:-} ;;
    banks) run banks python3 benchmarks/bank_validation.py --out "$OUT/bank_measurements.json" ;;
    bench-toolchain) run bench-toolchain python3 benchmarks/toolchain.py ;;
    bench-dsl) run bench-dsl python3 benchmarks/dsl_compile.py ;;
    bench-timing) run bench-timing python3 benchmarks/timing_method.py ;;
    bench-solutions) run bench-solutions python3 benchmarks/solutions.py ;;
    bench-clocks) run bench-clocks python3 benchmarks/clocks.py hopper_ws gemm06_cpp --seconds 1.5 ;;
    bench-grading) run bench-grading python3 benchmarks/grading.py --only one --gpus 0 \
                     --workers-per-gpu "${GEMMLAB_GRADING_WORKERS:-4}" ;;
    bench-hostile) run bench-hostile python3 benchmarks/grading.py --only hostile --students 50 \
                     --assignments 00_gpu_and_roofline --gpus 0 --workers-per-gpu 6 --cell-timeout 30 ;;
    autograde) run autograde python3 tools/autograde_check.py --jobs "${GEMMLAB_AUTOGRADE_JOBS:-1}" ;;
    *) echo "unknown part $part"; status=1 ;;
  esac
done
exit $status
