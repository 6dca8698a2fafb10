#!/usr/bin/env bash
# Create .venv, install requirements, and (unless --deps-only) prepare the demo data:
# the bundled demo corpus in the SQLite store and an SM-CNN trained on it, so the first run works offline.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null || PYTHON=python3

if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.requirements.sha
want=$(sha1sum requirements.txt | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -r requirements.txt
  echo "$want" > "$stamp"
fi

if [ "${1:-}" != "--deps-only" ]; then
  .venv/bin/python -m qa_core data demo
  # Read the whole listing first: `grep -q` stops reading at the first match, and under pipefail the
  # writer's broken pipe would fail the test and retrain the model for nothing.
  models=$(.venv/bin/python -m qa_core models)
  if ! grep -q '"model": "smcnn", "versions": \[{' <<<"$models"; then
    .venv/bin/python -m qa_core train --model smcnn --data demo --seed 1
  fi
fi
