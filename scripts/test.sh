#!/usr/bin/env bash
# The one test command (README, .ci/run): system packages, .venv, lint, import layers, then the whole pytest suite.
set -euo pipefail
cd "$(dirname "$0")/.."
# Debian's packages and the .venv install side by side, as both wait on downloads (Chromium and a
# .venv with nothing cached, here: 41 s instead of 46 s).
bash scripts/system-deps.sh &
system_deps=$!
bash scripts/setup.sh --deps-only
wait "$system_deps"
.venv/bin/ruff check .
.venv/bin/lint-imports --no-cache
set +e
# 3 workers on the CI machine's 2 cores: with 2, a fifth of the CPU time went unused while tests
# waited on the apps, browsers and processes they start (clean clone here: 8 min 2 s with 2,
# 6 min 50 s with 3). PYTEST_WORKERS=0 runs in one process.
.venv/bin/python -m pytest -n "${PYTEST_WORKERS:-3}" "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure here" >&2
  exit 1
fi
exit "$status"
