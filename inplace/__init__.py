"""In-place operations described once (spec.py) and taken to every stage: the torch op and its export
(torch_op.py), TensorRT's AOT plugins (aot.py), the kernels' PTX (ptx.py), the misuse checks (checks.py) and
the registry that ties an exported model to its ops (registry.py, entries.py); the ONNX rewrite of an op's node
into its AOT plugin nodes is onnx_path/own_ops.py's (onnx_path reads inplace, never the other way).
docs/own_inplace_op.md walks through it; examples/ holds three ops of a user's own."""
