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
  # uv installs the same wheels faster than pip (a clean .venv from this machine's wheels, bytecode
  # compiled: 36 s against 66 s), most of a clean CI run's set-up. uv does not read pip's
  # configuration, so pip's own settings (a local wheel folder, extra indexes, a constraints file)
  # are handed on, and uv, like pip, takes the best version from any index. Where uv cannot be had
  # (offline, no wheel for it), pip installs as before.
  uv_args=()
  while IFS= read -r setting; do
    key=${setting%%=*} value=${setting#*=}
    value=${value#\'} value=${value%\'}
    case ${key#*.} in
      find-links) for v in $value; do uv_args+=(--find-links "$v"); done ;;
      extra-index-url) for v in $value; do uv_args+=(--extra-index-url "$v"); done ;;
      index-url) uv_args+=(--index-url "$value") ;;
      constraint) for v in $value; do uv_args+=(--constraint "$v"); done ;;
    esac
  done < <(.venv/bin/python -m pip config list 2>/dev/null)
  if ! { .venv/bin/python -m pip install --quiet uv \
    && .venv/bin/uv pip install --quiet --compile-bytecode --python .venv/bin/python \
      --index-strategy unsafe-best-match \
      "${uv_args[@]}" -r requirements.txt; }; then
    echo "uv could not install the requirements; installing them with pip" >&2
    .venv/bin/python -m pip install --quiet --upgrade pip
    .venv/bin/python -m pip install --quiet -r requirements.txt
  fi
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
