#!/usr/bin/env bash
# Create .venv and install gemmlab with everything the course and the tests need.
# Needs only Python >= 3.10 and pip: the CUDA compiler and headers come as pip wheels.
# Safe to run again: an existing .venv is reused, and pip runs only when the install is not current:
# after a successful install a stamp in .venv records a hash of pyproject.toml, this script, the
# Python and the checkout's path; while it matches (and gemmlab is still installed), pip is skipped.
#   bash scripts/setup.sh [--with-browser]   # install what is missing or out of date
#   bash scripts/setup.sh --check            # exit 0 if the install is current, 1 if not; installs nothing
#   GEMMLAB_REINSTALL=1 bash scripts/setup.sh  # run pip even if the stamp says current
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
PY=.venv/bin/python
STAMP=.venv/.gemmlab-setup-stamp
LOG=.venv/setup.log
EXTRAS="test,grade,class"

# The hash the stamp holds: what decides whether the install is current.
install_hash() {
  "$PY" - "$PWD" "$EXTRAS" <<'EOF'
import hashlib, pathlib, sys
h = hashlib.sha256()
for part in (pathlib.Path("pyproject.toml").read_bytes(), pathlib.Path("scripts/setup.sh").read_bytes(),
             sys.version.encode(), sys.argv[1].encode(), sys.argv[2].encode()):
    h.update(hashlib.sha256(part).digest())
print(h.hexdigest())
EOF
}

# Current: a venv, a stamp that matches, and gemmlab still installed in it (and torch, below).
is_current() {
  [ -z "${GEMMLAB_REINSTALL:-}" ] && [ -x "$PY" ] && [ -f "$STAMP" ] \
    && [ "$(cat "$STAMP")" = "$(install_hash)" ] \
    && "$PY" -c "import importlib.metadata as m; m.version('gemmlab')" >/dev/null 2>&1
}

# torch is not pinned in pyproject.toml, so that a GPU machine keeps its CUDA build and a
# CPU machine can keep a CPU build. One is installed only when none is there yet (a look-up, no import).
has_torch() {
  "$PY" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)" 2>/dev/null
}

if [ "${1:-}" = "--check" ]; then
  if is_current && has_torch; then exit 0; else exit 1; fi
fi

if is_current && has_torch; then
  installed=0
else
  installed=1
  if [ ! -x "$PY" ]; then
    "$PYTHON" -m venv .venv
  fi
  rm -f "$STAMP"
  echo "Installing gemmlab and what it needs into .venv (the first time takes minutes; pip's log: $LOG)..."
  : > "$LOG"
  # pip's output goes to the log and is shown only when pip fails.
  pip_quietly() {
    if ! "$PY" -m pip "$@" >>"$LOG" 2>&1; then
      echo "pip $* failed; its log ($LOG) ends:" >&2
      tail -n 40 "$LOG" >&2
      exit 1
    fi
  }
  pip_quietly install --quiet --upgrade pip
  if ! has_torch; then
    if command -v nvidia-smi >/dev/null 2>&1; then
      pip_quietly install --quiet torch
    else
      # No GPU: this release is available as a CPU build on machines that provide one locally.
      pip_quietly install --quiet "torch==${GEMMLAB_CPU_TORCH:-2.13.0}"
    fi
  fi
  pip_quietly install --quiet -e ".[$EXTRAS]"
  # jupyter-events asks for jsonschema's IRI format checker, rfc3987-syntax, which builds a grammar when it is
  # imported: about 0.9 s of CPU in every process that reads a notebook (nbformat imports jsonschema's format
  # checks): each grading worker, nbgrader command and Jupyter server. Nothing here checks IRIs; without it
  # jsonschema skips only the "iri" formats.
  pip_quietly uninstall --quiet -y rfc3987-syntax
  install_hash > "$STAMP"
fi

# The class's JupyterHub (python -m classroom) routes through configurable-http-proxy, a Node.js program from
# npm: installed into .venv/chp, where classroom/jupyterhub_config.py looks for it. Tried with each install
# (not on every run, so a machine without npm or a network stays quiet), with npm's retries bounded.
if [ "$installed" = 1 ] && [ ! -x .venv/chp/node_modules/.bin/configurable-http-proxy ]; then
  if command -v npm >/dev/null 2>&1; then
    npm install --silent --no-audit --no-fund --fetch-retries=1 --fetch-timeout=30000 \
        --prefix .venv/chp configurable-http-proxy@5 >/dev/null 2>&1 \
      || echo "could not install configurable-http-proxy with npm: the class tests will skip" \
              "(GEMMLAB_REINSTALL=1 bash scripts/setup.sh tries again)" >&2
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
if [ "$installed" = 1 ]; then
  echo "gemmlab is installed in .venv ($("$PY" -c 'import gemmlab; print(gemmlab.__version__)'))."
fi
