"""The scatter-add plugin: its CUDA kernel (plugin.kernels) and its TensorRT classes (plugin.scatter_add_plugin).

Nothing is imported here, so that `import plugin.kernels` needs neither TensorRT nor a GPU.
"""
