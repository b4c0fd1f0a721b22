"""The ONNX path as a library, stage by stage: read (onnx_path.read: an exported model loaded, rewritten,
recognised), check (onnx_path.check, onnx_path.inputs: a model's inputs and its float16 states), rewrite
(onnx_path.rewrite over patterns, nodes and overwrite: scatters into the in-place plugin's nodes), run
(onnx_path.run over onnx_path.runtime: ONNX Runtime on the CPU), compare (onnx_path.compare) and describe
(onnx_path.describe: what the rewrite did, an engine's description, the .npy files of a run). Results are
returned and bad input raised as InputError; the command line (cli/) words and prints them, and nothing here
imports it. TensorRT stays in network/."""
