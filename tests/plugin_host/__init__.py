"""A test host for TensorRT plugins: a stand-in libnvinfer with a plugin registry that drives a plugin through
TensorRT's C++ plugin interface in TensorRT's order, under TensorRT's real Python bindings (docs/testing.md)."""
