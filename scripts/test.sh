#!/usr/bin/env bash
# Set up (if needed) and run the test suite. GPU tests run when a GPU is present, else skip.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --with-browser
exec .venv/bin/python -m pytest "$@"
