"""The sample's networks in PyTorch and their ONNX export (optional: torch is imported only in this package).

    sample_modules.py   SampleClassifier, SampleStateUpdate: the TensorRT network of network/definition.py as
                        torch.nn.Modules, with example inputs and the dynamic shapes of the export
    export_onnx.py      python3 -m export.export_onnx --network {classifier,state} ... --out M.onnx
    ops.py              torch.ops.aliased_io.scatter_add_ (in place, mutates_args) and custom_translation_table,
                        which exports it as the plugin node itself (docs/onnx.md, the custom-op convention)

onnx_path/rewrite.py turns the exported scatter-adds into the sample's in-place plugin nodes; docs/onnx.md
lists what the exporter writes and what the rewrite makes of it.
"""
