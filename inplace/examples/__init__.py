"""Three in-place ops of a user's own, each registered once with the facility (docs/own_inplace_op.md):
ema (Triton), ring (CUDA C) and accumulate (Triton, with a returned tensor)."""
