"""The command line of aliased_io_plugin.py: its options (cli.options and cli.onnx_shapes, standard library only,
so that --help and every option check work before numpy loads), the inputs they describe (cli.inputs: the graph,
the seeded weights, the float64 reference), the --onnx runs over the onnx_path library (cli.onnx_model,
cli.onnx_sample; a model of one's own: cli.own_model, cli.own_run) and the text it prints (cli.report,
cli.engine_report, cli.console)."""
