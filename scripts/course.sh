#!/usr/bin/env bash
# Set up (if needed) and open the course in JupyterLab.
set -euo pipefail
cd "$(dirname "$0")/.."
# A second start installs nothing and prints nothing: setup.sh --check says whether .venv is current
# (its stamp of pyproject.toml and the Python). After an install, `gemmlab doctor` checks the toolchain.
if ! bash scripts/setup.sh --check; then
  bash scripts/setup.sh
  .venv/bin/gemmlab doctor || true
fi
# nbgrader's Validate button reads nbgrader_config.py from the server's working directory or the
# Jupyter config path: put the course's own there (per-cell time limits long enough for a C++ compile),
# so Validate neither warns "No nbgrader_config.py file found" nor runs with nbgrader's defaults.
export JUPYTER_CONFIG_PATH="$PWD/autograder${JUPYTER_CONFIG_PATH:+:$JUPYTER_CONFIG_PATH}"
# JupyterLab refuses to start as root ("Running as root is not recommended") unless told it may:
# containers and cloud machines often log in as root.
extra=()
if [ "$(id -u)" = 0 ]; then
  extra+=(--allow-root)
fi
exec .venv/bin/jupyter lab --notebook-dir=course ${extra[@]+"${extra[@]}"} "$@"
