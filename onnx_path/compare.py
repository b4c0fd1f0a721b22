"""Compare: the outputs of an engine (or of a dry run) against ONNX Runtime's run of the original model. A model of
one's own: each output within RELATIVE_TOLERANCE of ONNX Runtime's largest magnitude (OutputCheck); the sample's
network: within twice the float64 reference's tolerance of ONNX Runtime's (AGAINST_ONNXRUNTIME) and within the
tolerance of the reference itself. numpy only; the command line words the verdict and sets the exit status."""

from dataclasses import dataclass
from typing import Any

import numpy as np

RELATIVE_TOLERANCE = {"float32": 1e-4, "float16": 1e-2}
"""An output element passes when |actual - ONNX Runtime's| <= this times the output's largest magnitude (other
float types: float16's). Summation order (atomics, the plugin's float32 table) moves a sum by far less."""


@dataclass(frozen=True)
class OutputCheck:
    """One output against ONNX Runtime's: ok, the largest absolute error, the tolerance and how it was set."""

    ok: bool
    max_abs_error: float
    tolerance: float
    how: str

    def summary(self) -> str:
        return f"largest absolute error {self.max_abs_error:.3g}, tolerance {self.tolerance:.3g} ({self.how})"


def compare_output(actual: np.ndarray, expected: np.ndarray, dtype: Any) -> OutputCheck:
    """`actual` against ONNX Runtime's `expected` for an output of the model's `dtype`: integers and booleans
    exactly, floats within RELATIVE_TOLERANCE of the EXPECTED output's largest finite magnitude (never the
    actual's: an output blown up must not widen its own tolerance); NaN or an infinity where ONNX Runtime has
    none (or the other way round) fails, naming the element."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    if actual.shape != expected.shape:
        return OutputCheck(False, float("inf"), 0.0, f"shape {list(actual.shape)}, ONNX Runtime's "
                                                     f"{list(expected.shape)}")
    if actual.size == 0:
        return OutputCheck(True, 0.0, 0.0, "no elements")
    kind = np.dtype(dtype).kind if dtype is not None else "f"
    if kind != "f" and dtype is not None:
        error = np.abs(actual.astype(np.float64) - expected.astype(np.float64))
        return OutputCheck(bool(np.all(actual == expected)), float(np.max(error)), 0.0, "exact: integers")
    actual64, expected64 = actual.astype(np.float64), expected.astype(np.float64)
    finite = np.isfinite(expected64)
    unmatched = (np.isfinite(actual64) != finite) | (~finite & (actual64 != expected64) & ~(
        np.isnan(actual64) & np.isnan(expected64)))
    relative = RELATIVE_TOLERANCE.get(np.dtype(dtype).name if dtype is not None else "", RELATIVE_TOLERANCE["float16"])
    magnitude = float(np.max(np.abs(expected64[finite]))) if finite.any() else 0.0
    tolerance = relative * magnitude
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf where both are infinite: masked out
        error = np.where(finite & np.isfinite(actual64), np.abs(actual64 - expected64), 0.0)
    largest = float(np.max(error))
    how = f"{relative:g} of ONNX Runtime's largest magnitude {magnitude:.3g}"
    if unmatched.any():
        position = tuple(int(i) for i in np.argwhere(unmatched)[0])
        return OutputCheck(False, largest, tolerance, f"{how}; element {list(position)} is {actual64[position]:g}, "
                                                      f"ONNX Runtime's {expected64[position]:g}")
    if not finite.all():
        how += f"; {int(np.count_nonzero(~finite)):,} non-finite elements equal in both"
    return OutputCheck(bool(np.all(error <= tolerance)), largest, tolerance, how)


# An engine and ONNX Runtime each lie within the float64 reference's tolerance (bound) of the exact result, so
# within twice of each other.
AGAINST_ONNXRUNTIME = 2.0


def classifier_comparisons(actual: np.ndarray, onnxruntime: np.ndarray, reference: np.ndarray,
                           precision: str) -> tuple[Any, Any]:
    """The sample classifier's softmax against ONNX Runtime's (twice the tolerance: both lie within it of the
    exact result) and against the float64 reference: two reference.Comparison."""
    from reference import compare

    return compare(actual, onnxruntime, precision, scale=AGAINST_ONNXRUNTIME), compare(actual, reference, precision)


def state_comparisons(actual: np.ndarray, onnxruntime: np.ndarray, reference: np.ndarray,
                      bound: np.ndarray) -> tuple[Any, Any]:
    """The final state of --steps against ONNX Runtime's (twice the rounding bound) and against the float64
    reference of all batches (the bound): two reference.state comparisons."""
    from reference.state import compare_state

    return compare_state(actual, onnxruntime, AGAINST_ONNXRUNTIME * bound), compare_state(actual, reference, bound)
