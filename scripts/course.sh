#!/usr/bin/env bash
# Set up (if needed) and open the course in JupyterLab.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/gemmlab doctor || true
exec .venv/bin/jupyter lab --notebook-dir=course "$@"
