#!/usr/bin/env bash
# Runs the CUDA backend's GPU test on an sm_90 machine (H100/H200) with the
# NVIDIA driver and nvcc: the tiny HuggingFace fixture on the GPU against
# transformers' logits and the CPU engine's greedy continuation.
#
# Build the test binary first (no Go toolchain is needed where it runs):
#   CGO_ENABLED=0 go test -c -o bin/runtime_cuda.test ./runtime/cuda
# then run this from the repository root:
#   scripts/h200_cuda_check.sh [RESULTS_DIR]
# RESULTS_DIR (default: results/h200) receives tiny_fixture_cuda.json and the log.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/results/h200}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
bin=$root/bin/runtime_cuda.test
[ -x "$bin" ] || { echo "missing $bin: build it with CGO_ENABLED=0 go test -c -o bin/runtime_cuda.test ./runtime/cuda" >&2; exit 1; }
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
export PATH=$PATH:/usr/local/cuda/bin
nvcc --version | tail -n 2 || true
cd "$root/runtime/cuda"
set +e
AIMA_GPU_RESULTS=$dir/tiny_fixture_cuda.json "$bin" -test.v -test.count=1 -test.timeout=8m \
  -test.run '^TestHuggingFaceOnGPU$' 2>&1 | tee "$dir/tiny_fixture_cuda.log"
rc=${PIPESTATUS[0]}
set -e
if grep -q -- '--- SKIP' "$dir/tiny_fixture_cuda.log"; then
  echo "the GPU test skipped: no usable CUDA driver here" >&2
  exit 1
fi
exit "$rc"
