"""The strongly typed TensorRT network around the scatter-add plugin, and the engine: build, save, load, run.

TensorRT, polygraphy and CUDA are imported inside functions, so importing this package needs none of them.
"""
