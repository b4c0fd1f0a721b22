#!/usr/bin/env bash
# The figures in BENCHMARKS.md from one command on a CUDA machine with torch, torch_geometric and triton
# (benchmark-only), with TensorRT's Python bindings on PYTHONPATH for the plugin's GPU tests and its enqueue
# timings (real TensorRT, or its real bindings laid out by ../shared/trt-bindings/setup):
#
#   [ENQUEUE_ALSO_WITH=<other TensorRT bindings folder>] benchmarks/run_gpu.sh OUT_DIR [--quick]
#
# A bindings folder laid out by setup gets the plugin host (tests/plugin_host/build.py: here, or before carrying
# it, where g++ and TensorRT's headers are) for tests/test_plugin_host_gpu.py, the registry tests and
# bench_enqueue.py's rows through the bindings' C++ trampoline; without it they skip, saying so.
#
# Runs the GPU tests (tests/test_kernels_gpu.py, tests/test_small_updates_gpu.py, tests/test_plugin_gpu.py,
# tests/test_aot_plugin_gpu.py, tests/test_cuda_graph_gpu.py, tests/test_plugin_host_gpu.py; a failure is
# reported on the last line and the benchmarks still run), then
# bench_scatter_add.py, bench_enqueue.py, bench_state_update.py, bench_aot.py, bench_breakdown.py and
# probe_small_updates.py (the plans behind the per-step tables), each with --out. Under OUT_DIR: gpu_tests.log
# (the tests' output), bench_scatter_add.{md,csv}, scatter_add.png, bench_enqueue.md, bench_state_update.md,
# bench_aot.md, bench_breakdown.md, probe_small_updates.md; with ENQUEUE_ALSO_WITH, bench_enqueue.py once more
# with that folder as PYTHONPATH (the host-time table's second column, e.g. TensorRT 10.4's bindings), its
# table appended to OUT_DIR/bench_enqueue.md: 9 files.
set -uo pipefail
out=${1:?usage: benchmarks/run_gpu.sh OUT_DIR [--quick]}
quick=${2:-}
cd "$(dirname "$0")/.." || exit 1
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python3 -c 'import sys, torch; print(f"python {sys.version.split()[0]}, torch {torch.__version__}, {torch.cuda.get_device_name()}")'
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader || true
git log -1 --format='commit %H' 2>/dev/null || true
for layout in ${PYTHONPATH:+${PYTHONPATH//:/ }} ${ENQUEUE_ALSO_WITH:-}; do
    [ -d "$layout/tensorrt_libs" ] && { python3 tests/plugin_host/build.py "$layout" || true; }
done
# RUN_GPU_PART=steps (the GPU tests, bench_enqueue, bench_state_update, bench_aot, probe_small_updates) or
# RUN_GPU_PART=kernel (bench_scatter_add, bench_breakdown) runs half, for callers whose commands are limited to
# a few minutes each (two calls in a row on one machine then give the whole set); default: everything.
part=${RUN_GPU_PART:-all}
case "$part" in all|steps|kernel) ;; *) echo "run_gpu.sh: RUN_GPU_PART must be all, steps or kernel, got '$part'" >&2; exit 2 ;; esac
want() { [ "$part" = all ] || [ "$part" = "$1" ]; }
size() { [ "$quick" = "--quick" ] && echo "$1" || echo "$2"; }  # size QUICK_ARGS FULL_ARGS
tests=0
status=0
if want steps; then
    gpu_tests="tests/test_kernels_gpu.py tests/test_small_updates_gpu.py tests/test_plugin_gpu.py tests/test_aot_plugin_gpu.py tests/test_cuda_graph_gpu.py tests/test_plugin_host_gpu.py"
    python3 -m pytest -m gpu $gpu_tests -q -p no:cacheprovider >"$out/gpu_tests.log" 2>&1
    tests=$?
    grep -E "^tensorrt:|passed|failed|^FAILED" "$out/gpu_tests.log" | tail -n 12
    python3 benchmarks/bench_enqueue.py --out "$out" || status=1
    python3 benchmarks/bench_state_update.py $(size "--batches 10000" "") --out "$out" || status=1
    python3 benchmarks/bench_aot.py $(size "--batches 10000" "") --out "$out" || status=1
    python3 benchmarks/probe_small_updates.py $(size "--batches 10000" "") --out "$out" || status=1
fi
if want kernel; then
    python3 benchmarks/bench_scatter_add.py $(size --quick "") --out "$out" || status=1
    python3 benchmarks/bench_breakdown.py $(size "--sizes 1e3:1e6:64" "--dtypes float32,float16") --out "$out" || status=1
fi
if [ -n "${ENQUEUE_ALSO_WITH:-}" ] && want steps; then
    PYTHONPATH="$ENQUEUE_ALSO_WITH" python3 benchmarks/bench_enqueue.py --out "$out/enqueue-also" || status=1
    { echo; cat "$out/enqueue-also/bench_enqueue.md"; } >>"$out/bench_enqueue.md" && rm -r "$out/enqueue-also"
fi
if [ "$tests" -ne 0 ]; then
    echo "run_gpu.sh: GPU TESTS FAILED (exit $tests): see $out/gpu_tests.log"
    exit 1
fi
exit $status
