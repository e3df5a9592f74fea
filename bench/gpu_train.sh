#!/usr/bin/env bash
# Trains the default model on a lent GPU machine and leaves the exported checkpoint in $OUT/genui-small.
#
# Runs on the device machine, in its copy of the repo (docs/model.md, "Training on a lent GPU", has the whole
# recipe). The machine has PyTorch but an older transformers and no network: the wheels genui needs travel in
# .whl/ (carried), as do data/packed.npz and data/tokenizer/. Within one lease, calls that follow each other
# reuse runs/gpu/ on the machine, so a second call resumes the first one's run.
#
#   MINUTES  training minutes in this call (default 8; a call may run 10 minutes in all)
#   INIT     weights a new run starts from (default models/genui-small; "none" starts from scratch)
#   ARGS     anything else for `genui train` (e.g. "--canvas-tokens 65536 --lr 2e-3")
#   DEVICE, PER_SITE, WHEELS   cuda, 30 held-out pages per site, .whl (a dry run here: cpu, 1, none)
set -euo pipefail
: "${OUT:?OUT must name the folder whose files come back}"
MINUTES=${MINUTES:-8}
INIT=${INIT:-models/genui-small}
DEVICE=${DEVICE:-cuda}
PER_SITE=${PER_SITE:-30}
WHEELS=${WHEELS:-.whl}
if compgen -G "$WHEELS/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$WHEELS"/*.whl
    export PYTHONPATH=/tmp/site:$PWD
fi
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null || true
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"

start=()
if [ ! -f runs/gpu/training_state.pt ] && [ "$INIT" != none ]; then
    start=(--init "$INIT")
fi
# shellcheck disable=SC2086
python3 -m lab.scratch --device "$DEVICE" --out runs/gpu "${start[@]}" --minutes "$MINUTES" --fit-schedule \
    --steps 1000000 --canvas-tokens 32768 --save-minutes 3 --log-every 50 ${ARGS:-} 2>&1 | tee "$OUT/train.log"
python3 -m lab.scratch --out runs/gpu --export "$OUT/genui-small"
# The held-out report, where genui's web dependencies came along in .whl/ (seconds on a GPU).
python3 -m lab.quality --model "$OUT/genui-small" --corpus data/heldout.jsonl --packed data/packed.npz \
    --per-site "$PER_SITE" --json \
    >"$OUT/quality.json" 2>"$OUT/quality.err" || echo "quality report skipped: see quality.err"
ls -la "$OUT" "$OUT/genui-small"
