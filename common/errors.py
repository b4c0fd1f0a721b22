"""The sample's error types. The CLI turns each into one line on stderr and an exit status."""


class InputError(ValueError):
    """A bad command-line value or input file: the CLI prints the message and exits with status 2."""


class ModelError(InputError):
    """An InputError about a model file that ONNX Runtime refuses (the model or its feeds): the message names the
    file first ("PATH: ..."); the CLI prints the option that gave the file before it (exit status 2)."""


class MissingDependencyError(RuntimeError):
    """A package or a GPU that this step needs is absent: the message says what to install or where to run."""


class EngineError(RuntimeError):
    """TensorRT could not add a layer, build, load or execute the engine: one line (TensorRT's own log, shown
    with -v, says more) and exit status 4."""


class CudaError(RuntimeError):
    """A CUDA driver, runtime or NVRTC call failed; `name` is the error's enum name (e.g. CUDA_ERROR_OUT_OF_MEMORY).
    Raised by common.cuda_check.check; the CLI prints it as one line and exits with status 4."""

    def __init__(self, message: str, name: str = "") -> None:
        super().__init__(message)
        self.name = name


class OutputError(RuntimeError):
    """stdout could not be written (a full disk, a closed terminal): one line on stderr and exit status 74."""
