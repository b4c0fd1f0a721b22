#!/usr/bin/env bash
# The figures in BENCHMARKS.md from one command on a CUDA machine with torch, torch_geometric and triton
# (benchmark-only), with TensorRT's Python bindings on PYTHONPATH for the plugin's GPU tests and its enqueue
# timings (real TensorRT, or its real bindings laid out by ../shared/trt-bindings/setup):
#
#   [ENQUEUE_ALSO_WITH=<other TensorRT bindings folder>] benchmarks/run_gpu.sh OUT_DIR [--quick]
#
# A bindings folder laid out by setup gets the plugin host (tests/plugin_host/build.py: here, or before carrying
# it, where g++ and TensorRT's headers are) for tests/plugin/test_plugin_host_gpu.py, the registry tests and
# bench_enqueue.py's rows through the bindings' C++ trampoline; without it they skip, saying so.
#
# Runs the GPU tests (the `gpu_tests` files below; a failure is reported on the last line and the benchmarks
# still run), then bench_enqueue.py (host time beside torch), bench_state_update.py, bench_aot.py and
# bench_overwrite.py (per-step device time, host time and one step at a time beside torch, cells at or below
# torch counted), bench_scatter_add.py (the kernel table beside torch and PyG), bench_aot_cells.py (the AOT
# chains on the kernel table's cells, plain and captured, per step, and the launch floor) and bench_breakdown.py,
# each with --out, in ONE device call
# (each stage's seconds printed together at the end). Under OUT_DIR, 11 files (the device tool brings back 8 at
# most: run RUN_GPU_PART=steps and kernel in separate calls there): gpu_tests.log (the tests' output),
# bench_scatter_add.{md,csv}, scatter_add.png, bench_enqueue.md, bench_state_update.md, bench_aot.md,
# bench_overwrite.md, bench_aot_cells.md, aot_cells.csv, bench_breakdown.md; with ENQUEUE_ALSO_WITH,
# bench_enqueue.py once more with that folder as PYTHONPATH (the host-time table's second column, e.g. TensorRT
# 10.4's bindings), its table appended to OUT_DIR/bench_enqueue.md.
#
# On this workplace's device tool (one call, commands of at most 10 minutes; files back at most 8, so keep
# OUT_DIR's count there): copy the tree into a git-ignored folder of the checkout with the bindings layouts
# inside it (the plugin host built), carry that folder, and run, e.g.
#   cd .gpu/main && PYTHONPATH=$PWD/.trt/11.4.0.106 ENQUEUE_ALSO_WITH=$PWD/.trt/10.4.0 benchmarks/run_gpu.sh $OUT
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
# RUN_GPU_PART=steps (the GPU tests, bench_enqueue, bench_state_update, bench_aot) or RUN_GPU_PART=kernel
# (bench_scatter_add, bench_breakdown) runs half; RUN_GPU_PART=tests or step-benches one of the steps part's
# two halves (each well inside a 10-minute call); default: everything, in one call.
part=${RUN_GPU_PART:-all}
case "$part" in all|steps|kernel|tests|step-benches) ;;
    *) echo "run_gpu.sh: RUN_GPU_PART must be all, steps, kernel, tests or step-benches, got '$part'" >&2; exit 2 ;;
esac
want() {  # want steps|kernel|tests|step-benches: whether this part runs
    case "$1" in
        tests|step-benches) [ "$part" = "$1" ] || [ "$part" = steps ] || [ "$part" = all ] ;;
        *) [ "$part" = all ] || [ "$part" = "$1" ] ;;
    esac
}
size() { [ "$quick" = "--quick" ] && echo "$1" || echo "$2"; }  # size QUICK_ARGS FULL_ARGS
tests=0
status=0
stages=""
stage() {  # stage NAME COMMAND...: runs it and notes its seconds (printed together at the end); a failure sets status
    local name=$1 began=$SECONDS
    shift
    "$@" || status=1
    stages+="run_gpu.sh: $name took $((SECONDS - began)) s"$'\n'
}
if want tests; then
    gpu_tests="tests/kernels/test_kernels_gpu.py tests/kernels/test_small_updates_gpu.py tests/plugin/test_plugin_gpu.py tests/kernels/test_overwrite_op_gpu.py tests/network/test_cuda_graph_gpu.py tests/plugin/test_plugin_host_gpu.py tests/kernels/test_kernel_fuzz_gpu.py tests/kernels/test_overwrite_gpu.py tests/kernels/test_aot_family_gpu.py tests/inplace/test_own_op_gpu.py"
    began=$SECONDS
    python3 -m pytest -m gpu $gpu_tests -q -p no:cacheprovider >"$out/gpu_tests.log" 2>&1
    tests=$?
    stages+="run_gpu.sh: GPU tests took $((SECONDS - began)) s"$'\n'
    grep -E "^tensorrt:|passed|failed|^FAILED" "$out/gpu_tests.log" | tail -n 12
fi
if want step-benches; then
    stage bench_enqueue python3 benchmarks/bench_enqueue.py --out "$out"
    if [ -n "${ENQUEUE_ALSO_WITH:-}" ]; then
        stage "bench_enqueue (ENQUEUE_ALSO_WITH)" env PYTHONPATH="$ENQUEUE_ALSO_WITH" python3 benchmarks/bench_enqueue.py --out "$out/enqueue-also"
        { echo; cat "$out/enqueue-also/bench_enqueue.md"; } >>"$out/bench_enqueue.md" && rm -r "$out/enqueue-also"
    fi
    stage bench_state_update python3 benchmarks/bench_state_update.py $(size "--batches 10000" "") --out "$out"
    stage bench_aot python3 benchmarks/bench_aot.py $(size "--batches 10000" "") --out "$out"
    stage bench_overwrite python3 benchmarks/bench_overwrite.py $(size "--batches 10000 --nodes 1000 1000000 100000000" "") --out "$out"
fi
if want kernel; then
    stage bench_scatter_add python3 benchmarks/bench_scatter_add.py $(size --quick "") --out "$out"
    stage bench_aot_cells python3 benchmarks/bench_aot_cells.py $(size --quick "") --floor --tactics --out "$out"
    stage bench_breakdown python3 benchmarks/bench_breakdown.py $(size "--sizes 1e3:1e6:64" "--dtypes float32,float16") --out "$out"
fi
printf '%srun_gpu.sh: all stages %s s\n' "$stages" "$SECONDS"
if [ "$tests" -ne 0 ]; then
    echo "run_gpu.sh: GPU TESTS FAILED (exit $tests): see $out/gpu_tests.log"
    exit 1
fi
exit $status
