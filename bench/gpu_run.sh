#!/usr/bin/env bash
# On a GPU machine, from the repository root, with .whl/ from bench/gpu_wheels.sh: install the carried wheels (no
# network), then run bench/gpu.py on both shapes, its table and JSON into $OUT (else docs/). Extra arguments go
# to bench/gpu.py.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && HF_HUB_OFFLINE=1 PYTHONPATH=/tmp/site:lib PYTHONUNBUFFERED=1 python3 bench/gpu.py --device cuda --tokenizer .whl/tokenizer --out "${OUT:-docs}/engine-gpu.md" "$@"
