#!/bin/sh
# The command of every dvc.yaml stage: `sh infra/stage.sh <stage> [args]` runs `python -m lead.stages.<stage>`
# with the project's interpreter, so that `.venv/bin/dvc repro` works without activating the venv (a bare
# `python` would be the system's, without the project's packages). The interpreter, in this order: the
# active virtual environment's, the `.venv` that `make setup` builds at the repository root, `python` on PATH.
set -eu
stage="$1"
shift
if [ -n "${VIRTUAL_ENV:-}" ] && [ -x "$VIRTUAL_ENV/bin/python" ]; then
    python="$VIRTUAL_ENV/bin/python"
elif [ -x "${DVC_ROOT:-.}/.venv/bin/python" ]; then
    python="${DVC_ROOT:-.}/.venv/bin/python"
else
    python=python
fi
exec "$python" -m "lead.stages.$stage" "$@"
