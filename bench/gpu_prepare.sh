#!/usr/bin/env bash
# Run here (with network to PyPI) before lending the training to a GPU machine: bench/gpu_train.sh runs there.
#
# Makes what the device needs and cannot fetch: .whl/ (transformers 5.23, which has DiffusionGemma, plus genui's
# web dependencies for the quality report, built for the device's Python 3.12) and data/heldout.jsonl (the
# held-out pages' rows: the whole corpus is too big to carry). data/packed.npz and data/tokenizer come from
# `genui corpus`. Then call the device tool's run with
#   command: MINUTES=8 bash bench/gpu_train.sh
#   carry:   [".whl", "data/packed.npz", "data/tokenizer", "data/heldout.jsonl"]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
version() { "$PY" -m pip show "$1" | awk '/^Version/{print $2}'; }
rm -rf .whl
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
    "transformers==$(version transformers)" "regex==$(version regex)" "starlette==$(version starlette)" \
    "bleach==$(version bleach)" "tinycss2==$(version tinycss2)" "webencodings==$(version webencodings)"
grep '"holdout": true' data/corpus.jsonl >data/heldout.jsonl
du -sh .whl data/packed.npz data/tokenizer data/heldout.jsonl
