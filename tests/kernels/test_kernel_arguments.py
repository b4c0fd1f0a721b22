"""What the launcher refuses before any CUDA call, and how it packs kernel arguments. No GPU."""

import numpy as np
import pytest

from plugin.kernels import scatter_add_launch
from plugin.kernels.host import check_host_arrays
from plugin.kernels.plan import MAX_EDGES, MAX_NODES

def launch_args(**overrides):
    args = dict(state=256, src=512, index=768, counts=0, num_nodes=10, num_edges=5, num_features=2,
                dtype=np.float32, stream=0)
    args.update(overrides)
    return args


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(dtype=np.float64), "float32 or float16"),
        (dict(num_nodes=-1), "num_nodes"),
        (dict(num_edges=2.0), "num_edges"),
        (dict(num_features=0), "num_features"),
        (dict(num_nodes=MAX_NODES + 1), "32-bit node ids"),
        (dict(num_edges=MAX_EDGES + 1), "32-bit counts"),
        (dict(src=0), "src and index"),
        (dict(index=0), "src and index"),
        (dict(state=0), "state"),
        (dict(dtype=np.float16), "workspace"),
        (dict(dtype=np.float16, workspace=1024, workspace_size=8), "workspace of"),
        (dict(dtype=np.float16, num_features=1, counts=1024, workspace=1024, workspace_size=79), "workspace of"),
        (dict(dtype=np.float16, num_features=1, counts=1024), "workspace"),  # also where pairs would replace the table
    ],
)
def test_launch_refuses_bad_arguments_before_touching_cuda(overrides, message):
    with pytest.raises(ValueError, match=message):
        scatter_add_launch(**launch_args(**overrides))


@pytest.mark.parametrize(
    "state, src, index, message",
    [
        (np.zeros((4, 2), np.float32), np.zeros((3, 2), np.float16), np.zeros(3, np.int64), "dtype"),
        (np.zeros((4, 2), np.float32), np.zeros((3, 3), np.float32), np.zeros(3, np.int64), "features"),
        (np.zeros((4, 2), np.float32), np.zeros(3, np.float32), np.zeros(3, np.int64), r"\[N, F\]"),
        (np.zeros((4, 2), np.float32), np.zeros((3, 2), np.float32), np.zeros(4, np.int64), "one entry per src row"),
        (np.zeros((4, 2), np.float32), np.zeros((3, 2), np.float32), np.zeros(3, np.float32), "integers"),
        (np.zeros((4, 0), np.float32), np.zeros((3, 0), np.float32), np.zeros(3, np.int64), "at least one feature"),
        (np.zeros((4, 2), np.int32), np.zeros((3, 2), np.int32), np.zeros(3, np.int64), "float32 or float16"),
    ],
)
def test_host_entry_refuses_mismatched_arrays(state, src, index, message):
    with pytest.raises(ValueError, match=message):
        check_host_arrays(state, src, index)


def test_host_entry_accepts_flat_arrays_and_small_integer_indices():
    state, src, index = check_host_arrays(np.ones(4, np.float16), np.ones(3, np.float16), np.array([0, 1, 3], np.int32))
    assert state.shape == (4,) and index.dtype == np.int64


def test_prepared_kernel_arguments_hold_each_value_and_patch_pointers_with_offsets():
    # cuLaunchKernel reads each argument from the address in the void* array: 8-byte pointers and int64s, and
    # int32s from the low half of their slot (little-endian). Pointers are (position, offset) and follow the
    # pointer tuple; a null base stays null (an absent buffer, not a small address).
    import ctypes

    from plugin.kernels.launch import COUNTS, SRC, WORKSPACE, KernelArguments

    arguments = KernelArguments(((SRC, 0), -5, 2**40 + 3, (WORKSPACE, 256), (COUNTS, 0), 0))
    pointers = [ctypes.c_void_p.from_address(arguments.address + 8 * i).value for i in range(6)]

    def read(ctype, i):
        return ctype.from_address(pointers[i]).value

    assert read(ctypes.c_int32, 1) == -5 and read(ctypes.c_int64, 1) == -5
    assert read(ctypes.c_int64, 2) == 2**40 + 3
    arguments.patch((0x1000, 0x7F0000, 0, 0, 0x90000, 0))
    assert [read(ctypes.c_uint64, i) for i in (0, 3, 4, 5)] == [0x7F0000, 0x90000 + 256, 0, 0]
    arguments.patch((0, 0x7E0000, 0, 0x5000, 0xA0000, 0))
    assert [read(ctypes.c_uint64, i) for i in (0, 3, 4)] == [0x7E0000, 0xA0000 + 256, 0x5000]
    assert read(ctypes.c_int32, 1) == -5  # constants are written once and stay

