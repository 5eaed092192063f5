#!/usr/bin/env bash
# Create .venv and install gemmlab with everything the course and the tests need.
# Needs only Python >= 3.10 and pip: the CUDA compiler and headers come as pip wheels.
# Safe to run again: an existing .venv is reused and only what is missing is installed.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
PY=.venv/bin/python
"$PY" -m pip install --quiet --upgrade pip

# torch is not pinned in pyproject.toml, so that a GPU machine keeps its CUDA build and a
# CPU machine can keep a CPU build. Install one only when none is there yet.
if ! "$PY" -c "import torch" 2>/dev/null; then
  if command -v nvidia-smi >/dev/null 2>&1; then
    "$PY" -m pip install --quiet torch
  else
    # No GPU: this release is available as a CPU build on machines that provide one locally.
    "$PY" -m pip install --quiet "torch==${GEMMLAB_CPU_TORCH:-2.13.0}"
  fi
fi

"$PY" -m pip install --quiet -e ".[test,grade,class]"
# The class's JupyterHub (python -m classroom) routes through configurable-http-proxy, a Node.js program from
# npm: installed into .venv/chp, where classroom/jupyterhub_config.py looks for it.
if [ ! -x .venv/chp/node_modules/.bin/configurable-http-proxy ]; then
  if command -v npm >/dev/null 2>&1; then
    npm install --silent --no-audit --no-fund --prefix .venv/chp configurable-http-proxy@5 >/dev/null \
      || echo "could not install configurable-http-proxy with npm: the class tests will skip" >&2
  else
    echo "note: no npm here; python -m classroom needs configurable-http-proxy (npm install -g configurable-http-proxy)" >&2
  fi
fi
# The grader sandboxes submissions with bubblewrap: install it where we may (root, apt).
if ! command -v bwrap >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  apt-get install -y -q bubblewrap >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q bubblewrap >/dev/null; } \
    || echo "could not install bubblewrap: the grader's sandbox tests will skip" >&2
fi

# --with-browser (scripts/test.sh passes it): tests/course/test_browser.py drives JupyterLab with
# Playwright in Debian's Chromium; Playwright's own browser downloads are never used. As
# root on Debian (as in CI) install the `chromium` package; elsewhere those tests skip
# unless GEMMLAB_CHROMIUM names a Chromium binary.
if [ "${1:-}" = "--with-browser" ] && [ -z "${GEMMLAB_CHROMIUM:-}" ] \
   && [ ! -x /usr/lib/chromium/chromium ] && ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
     && grep -qx 'ID=debian' /etc/os-release 2>/dev/null; then
    echo "Installing Debian's chromium for the browser tests (apt-get)..."
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq chromium >/dev/null 2>&1 \
      || { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; } \
      || echo "warning: apt-get could not install chromium; the browser tests will fail" >&2
  else
    echo "note: no Chromium here; tests/course/test_browser.py will skip (install Debian's chromium" \
         "package as root, or set GEMMLAB_CHROMIUM to a Chromium binary)." >&2
  fi
fi
# nbgrader's lab extension and widgets render without a rebuild in JupyterLab 4.
echo "gemmlab is installed in .venv ($("$PY" -c 'import gemmlab; print(gemmlab.__version__)'))."
