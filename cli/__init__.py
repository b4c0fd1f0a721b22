"""The command line of aliased_io_plugin.py: its options (cli.options, standard library only, so that --help
and every option check work before numpy loads), the inputs they describe (cli.inputs: the graph, the seeded
weights, the float64 reference) and the text it prints (cli.report)."""
