"""The sample's error types. The CLI turns each into one line on stderr and an exit status."""


class InputError(ValueError):
    """A bad command-line value or input file: the CLI prints the message and exits with status 2."""


class MissingDependencyError(RuntimeError):
    """A package or a GPU that this step needs is absent: the message says what to install or where to run."""


class EngineError(RuntimeError):
    """TensorRT could not add a layer, build, load or execute the engine: one line (TensorRT's own log, shown
    with -v, says more) and exit status 4."""
