"""The strongly typed TensorRT network around the scatter-add plugin and its engine, one module per stage of a run:

    definition  the network through TensorRT's network API (the Python plugin or the AOT plugins)
    aot_layers  --plugin aot: the AOT plugins and the fill layers that make their zeroed inputs
    onnx_parse  --onnx: the network parsed by TensorRT's ONNX parser from a rewritten model
    engine      the optimization profile, the checks before any engine work, build, save, load (prepare_engine)
    run         the input arrays, one inference, its report (run_graph)
    steps       --steps: K executions on one state buffer, the float64 reference and its rounding bound (run_steps)
    benchmark   --benchmark: the engine's executions and the kernel alone, timed
    execution   the execution context bound to the caller's buffers (every run; X_out at X for --steps)
    timing      CUDA-event timing and --cuda_graph's capture

TensorRT, polygraphy and CUDA are imported inside functions, so importing this package needs none of them.
"""
