"""In-place operations described once (spec.py) and taken to every stage: the torch op and its export
(torch_op.py), the ONNX rewrite into AOT plugin nodes (onnx.py), TensorRT's AOT plugins (aot.py), the kernels'
PTX (ptx.py), the misuse checks (checks.py) and the registry that ties an exported model to its ops
(registry.py). docs/own_inplace_op.md walks through it; examples/ holds three ops of a user's own."""
