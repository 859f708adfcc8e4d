#!/usr/bin/env bash
# The day a GPU is available: prove the CUDA path of the full profile in minutes, no download.
#
#   scripts/gpu_check.sh                 # CUDA, Llama-3-8B shapes with random weights (bf16, ~17 GB), < 10 min
#   scripts/gpu_check.sh --dry-run       # what it would run; loads nothing
#   scripts/gpu_check.sh --tiny          # the same code at tiny shapes on the CPU (what CI runs)
#
# It builds the streaming video LLM at Llama-3-8B / SigLIP-L shapes on the GPU, times frame steps and tokens of the
# runtime with no policy and with ReSV at 1K and 4K cached tokens (interleaved), runs a short COIN evaluation of
# full and ReSV through python -m vrex_lib.eval's runner, and prints one name=value line per figure (see
# scripts/gpu_check.py). Needs a CUDA build of torch (environment.yml pins the CPU wheel: install the CUDA wheel of
# the same version first, e.g. pip install torch==2.13.0 --index-url <your CUDA wheel index>).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ -z "${PY:-}" ] && [ ! -x .venv/bin/python ]; then
  echo "gpu_check: no .venv here ($PWD/.venv/bin/python): run \`make setup\` first, or set PY=<a python with this project's packages and a CUDA torch>" >&2
  exit 2
fi
PY="${PY:-.venv/bin/python}"
if ! "$PY" -c "import torch, transformers" 2>/dev/null; then
  echo "gpu_check: $PY cannot import torch and transformers: run \`make setup\` (then install the CUDA torch wheel), or set PY=<such a python>" >&2
  exit 2
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
limit=600  # seconds: the check must finish in 10 minutes
for arg in "$@"; do
  case "$arg" in --tiny|--dry-run) limit=300;; esac
done
if [[ " $* " != *" --tiny "* && " $* " != *" --dry-run "* ]] && ! command -v nvidia-smi >/dev/null; then
  echo "gpu_check: no nvidia-smi on this machine: run it on a CUDA machine, or use --tiny / --dry-run" >&2
  exit 2
fi
start=$(date +%s)
timeout "$limit" "$PY" scripts/gpu_check.py "$@"
echo "# gpu_check: done in $(( $(date +%s) - start )) s (limit ${limit} s)"
