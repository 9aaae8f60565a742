#!/usr/bin/env bash
# Fills .whl/ (git-ignored, never committed) with what bench/gpu.py needs on a GPU machine that reaches no
# network: the wheels its image lacks (Python 3.12, manylinux x86_64; torch, tokenizers, accelerate, pandas,
# scipy, scikit-learn, matplotlib and seaborn are there) and Llama-3's tokenizer from ../shared. Run here, in
# the repository root, before carrying .whl to the device; bench/gpu_run.sh installs and runs there.
#
#     bash bench/gpu_wheels.sh [TOKENIZER_DIR]
#
# Versions: this checkout's .venv where it has the package (transformers as the project runs it), else the
# ones seen working on an H200 (folktexts 0.7.1, folktables 0.0.12, netcal 1.4.0, pyro-ppl 1.9.2, lm_eval 0.4.13).
# typing_extensions travels too: this pydantic needs a newer one than the image may have.
set -euo pipefail
cd "$(dirname "$0")/.."
tokenizer=${1:-../shared/data/tokenizers/llama-3-8b-instruct}
python=${PYTHON:-.venv/bin/python}

exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qxF /.whl/ "$exclude" 2>/dev/null || echo /.whl/ >>"$exclude"

version() { # NAME DEFAULT: the version installed here, else DEFAULT
    "$python" -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$1" 2>/dev/null || echo "$2"
}
wheels=()
for spec in pydantic: pydantic_core: annotated-types: typing-inspection: typing_extensions: transformers: dill: chardet: \
    folktexts:0.7.1 folktables:0.0.12 netcal:1.4.0 pyro-ppl:1.9.2 pyro-api:0.1.2 lm_eval:0.4.13; do
    name=${spec%%:*}
    v=$(version "$name" "${spec#*:}")
    [ -n "$v" ] || { echo "gpu_wheels.sh: $name is not installed in $python and has no default version" >&2; exit 2; }
    wheels+=("$name==$v")
done

rm -rf .whl
mkdir -p .whl
"$python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl "${wheels[@]}"
mkdir -p .whl/tokenizer
cp "$tokenizer"/*.json .whl/tokenizer/
chmod -R u+w .whl

ls .whl/*.whl | sed 's|^.whl/||'
size=$(du -sm .whl | cut -f1)
echo "gpu_wheels.sh: .whl holds $(ls .whl/*.whl | wc -l) wheels and the tokenizer, $size MiB"
if [ "$size" -ge 40 ]; then
    echo "gpu_wheels.sh: over 40 MiB" >&2
    exit 1
fi
