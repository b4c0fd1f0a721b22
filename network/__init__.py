"""The strongly typed TensorRT network around the scatter-add plugin and its engine, one module per stage of a run:

    definition  the network through TensorRT's network API (the Python plugin or the AOT plugins and their fill layers)
    engine      the optimization profile, the checks before any engine work, build, save, load (prepare_engine)
    run         the input arrays, one inference with polygraphy's TrtRunner, its report (run_graph)
    steps       --steps: K executions on one state buffer, the float64 reference and its rounding bound (run_steps)
    benchmark   --benchmark: the engine's executions and the kernel alone, timed
    execution   what steps and benchmark share: the bound execution context, CUDA-event timing, CUDA-graph capture

TensorRT, polygraphy and CUDA are imported inside functions, so importing this package needs none of them.
"""
