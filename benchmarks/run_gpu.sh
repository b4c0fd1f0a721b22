#!/usr/bin/env bash
# The figures in BENCHMARKS.md from one command on a CUDA machine (torch, torch_geometric, triton; the real
# TensorRT Python bindings on PYTHONPATH for the plugin's tests and enqueue timings):
#   benchmarks/run_gpu.sh OUT_DIR [--quick]
# Runs the GPU tests, then bench_scatter_add.py --out, bench_enqueue.py and bench_state_update.py --out,
# writing each one's table and a log under OUT_DIR. Stops at the first failure.
set -euo pipefail
out=${1:?usage: benchmarks/run_gpu.sh OUT_DIR [--quick]}
quick=${2:-}
cd "$(dirname "$0")/.."
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python3 -c 'import sys, torch; print(f"python {sys.version.split()[0]}, torch {torch.__version__}, {torch.cuda.get_device_name()}")'
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader || true
git log -1 --format='commit %H %s' 2>/dev/null || true
python3 -m pytest -m gpu tests/test_kernels_gpu.py tests/test_plugin_gpu.py -q -p no:cacheprovider 2>&1 | tail -n 5 | tee "$out/gpu_tests.log"
python3 benchmarks/bench_enqueue.py --out "$out"
if [ "$quick" = "--quick" ]; then
    python3 benchmarks/bench_scatter_add.py --quick --out "$out"
    python3 benchmarks/bench_state_update.py --batches 10000 --out "$out"
else
    python3 benchmarks/bench_scatter_add.py --out "$out"
    python3 benchmarks/bench_state_update.py --out "$out"
fi
