"""The Triton kernels of the examples (imported only when a kernel is compiled: triton is optional).

Each kernel's parameters are what TensorRT passes an AOT plugin: input pointers, int32 extra arguments, output
pointers (an aliased output's pointer is its input's). Each stays inside its buffers whatever the indices hold
(an index outside the state's rows is skipped): TensorRT may time a plugin on made-up inputs.
"""

import triton
import triton.language as tl


@triton.jit
def ema_rows(state, idx, rows, alpha, num_rows, batch, features, state_out, BLOCK: tl.constexpr):
    """state[idx[b]] = alpha * state[idx[b]] + (1 - alpha) * rows[b], element by element, in float32."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offsets < batch * features
    b = offsets // features
    f = offsets % features
    row = tl.load(idx + b, mask=inside, other=-1)
    inside = inside & (row >= 0) & (row < num_rows)
    a = tl.load(alpha).to(tl.float32)
    target = row * features + f
    old = tl.load(state + target, mask=inside, other=0.0).to(tl.float32)
    new = tl.load(rows + offsets, mask=inside, other=0.0).to(tl.float32)
    tl.store(state_out + target, a * old + (1.0 - a) * new, mask=inside)


@triton.jit
def accumulate_rows(state, idx, delta, num_rows, batch, features, state_out, norms_out, BLOCK: tl.constexpr):
    """One program per batch row b: state[idx[b]] += delta[b], then norms_out[b] = the L2 norm of the new row."""
    b = tl.program_id(0)
    if b < batch:
        row = tl.load(idx + b)
        valid = (row >= 0) & (row < num_rows)
        total = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, features, BLOCK):
            f = start + tl.arange(0, BLOCK)
            inside = (f < features) & valid
            value = tl.load(state + row * features + f, mask=inside, other=0.0)
            value = value + tl.load(delta + b * features + f, mask=inside, other=0.0)
            tl.store(state_out + row * features + f, value, mask=inside)
            total += value * value
        tl.store(norms_out + b, tl.sqrt(tl.sum(total, axis=0)))
