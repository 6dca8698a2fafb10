#!/usr/bin/env bash
# The one test command (README, .ci/run): system packages, .venv, lint, import layers, then the whole pytest suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/system-deps.sh
bash scripts/setup.sh --deps-only
.venv/bin/ruff check .
.venv/bin/lint-imports --no-cache
set +e
# 2 workers (the CI machine has 2 cores); PYTEST_WORKERS=0 runs in one process
.venv/bin/python -m pytest -n "${PYTEST_WORKERS:-2}" "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure here" >&2
  exit 1
fi
exit "$status"
