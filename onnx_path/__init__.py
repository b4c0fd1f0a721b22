"""The ONNX path: an exported model read, its scatters rewritten into the in-place plugin nodes, run in ONNX
Runtime (dry runs, --validate), and a model of one's own planned and run. TensorRT stays in network/."""
