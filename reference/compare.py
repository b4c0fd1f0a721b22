"""Comparing the engine's softmax with the float64 reference, with tolerances derived from the numerics.

An element passes when |actual - expected| <= atol + rtol * |expected|; `expected` is the float64 reference
of the inputs as given (not rounded to the engine's precision).

Why absolute tolerances. The softmax values lie in [0, 1]. If the logits z (one per class) carry errors dz,
the softmax p moves by dp_i = p_i * (dz_i - sum_j p_j dz_j), so |dp_i| <= p_i (1 - p_i) (max dz - min dz)
<= max|dz| / 2: a bound in absolute terms, largest near p = 1/2, tiny near 0 and 1. ReLU does not increase
errors. The logit of class c at node n is z = sum_f W[c, f] mean[n, f]; write S = sum_f |W[c, f]| |mean[n, f]|
and eps for the relative error that the engine's arithmetic puts on each term; then |dz| <= eps * S and
|dp| <= eps * S / 2.

fp16 (unit roundoff u = 2^-11 = 4.9e-4): the features (or the state) and the weights are rounded to half
once each, the aggregated sum and the mean are stored in half, and the matmul result is rounded to half
(summing in fp32 inside the kernel keeps the accumulation error far below u): eps ~ 4u, so |dp| <= 2u S
~ 1e-3 S. atol = 2e-2 holds for S <= 20, which covers the sample's graphs: the default graph's means are at
most 7 and the weights are standard normal (S ~ 7 max|W|, about 10). rtol = 2^-10 (two half-precision ulps,
relative) covers rounding the softmax output itself to half.
fp32 (u = 2^-24 = 6e-8): the input rounding is negligible; the float atomics add a node's d incoming rows in
any order, with an error that grows like sqrt(d) u in practice (d u at worst): |dp| ~ sqrt(d) u S / 2, about
6e-5 for S = 20 and d = 10^4. atol = 1e-4 covers that, and still catches real mistakes: flooring a mean of
2.5 to 2 (the seed's FLOOR_DIV) moves p by about 0.1. rtol = 2^-23 covers rounding the output to fp32.

Checked by tests/reference/test_reference_tolerances.py, which emulates both pipelines in numpy (fp16 summing in fp32,
as the kernel does) on graphs with S <= 20 and in-degrees up to a few thousand: fp32 errors stay below 1e-6,
fp16 errors within 2u S + u (the bound plus the output's rounding), and FLOOR_DIV means, a missing state or
swapped classes all fail.

Outside this regime (large features or states, many features, large weights) the bound grows with
S; the CLI prints the largest errors so that a failure can be judged against it.
"""

from dataclasses import dataclass

import numpy as np

TOLERANCES = {
    "fp32": {"atol": 1e-4, "rtol": 2.0**-23},
    "fp16": {"atol": 2e-2, "rtol": 2.0**-10},
}


@dataclass(frozen=True)
class Comparison:
    """The outcome of compare(): ok, the largest absolute and relative errors, and the tolerances used."""

    ok: bool
    max_abs_error: float
    max_rel_error: float
    atol: float
    rtol: float

    def summary(self) -> str:
        return (
            f"largest absolute error {self.max_abs_error:.3g}, largest relative error {self.max_rel_error:.3g} "
            f"(tolerance: atol {self.atol:.3g} + rtol {self.rtol:.3g} * |reference|)"
        )


def compare(actual, expected, precision: str, scale: float = 1.0) -> Comparison:
    """Compares `actual` with the float64 reference `expected` (same shape) at the tolerances of `precision`,
    times `scale` (2 for two results that each lie within the tolerances of the exact one, e.g. an engine's
    and ONNX Runtime's)."""
    if precision not in TOLERANCES:
        raise ValueError(f"precision must be one of {sorted(TOLERANCES)}, got {precision!r}")
    atol, rtol = scale * TOLERANCES[precision]["atol"], scale * TOLERANCES[precision]["rtol"]
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    if actual.shape != expected.shape:
        raise ValueError(f"shapes differ: actual {actual.shape}, expected {expected.shape}")
    if actual.size == 0:
        return Comparison(True, 0.0, 0.0, atol, rtol)
    error = np.abs(actual - expected)
    magnitude = np.abs(expected)
    relative = error / np.maximum(magnitude, np.finfo(np.float64).tiny)
    ok = bool(np.all(error <= atol + rtol * magnitude))  # False where either side is NaN
    return Comparison(ok, float(np.max(error)), float(np.max(relative)), atol, rtol)
