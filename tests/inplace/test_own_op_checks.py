"""Misuse of an in-place op of one's own, refused in ONE line at registration (inplace.checks.check_op), at a call
(check_call) or where an implementation's result comes back (check_new_values); no torch, triton or TensorRT."""

import dataclasses

import numpy as np
import pytest

from inplace.checks import InplaceOpError, check_call, check_new_values, check_op, step_size_sources
from inplace.registry import register
from inplace.spec import Chain, InplaceOp, Kernel, Launch, Step, TensorInput, TensorOutput, expr, size


class NoSource:
    def ptx(self, kernel, dtypes):
        raise AssertionError("no PTX is compiled by a registration check")


def launch(*extra, grid=None):
    return Launch(grid=(grid or size("B"), expr(1), expr(1)), block=(128, 1, 1), extra_args=extra)


def op(**changes):
    """A sound op (state [N, F] mutated, idx [B], rows [B, F]; returns total [B]) with `changes` applied."""
    kernel = changes.pop("kernel", Kernel("k", NoSource(), launch(size("N"), size("B"))))
    step = changes.pop("step", Step("update", ("state", "idx", "rows"), ("state", "total"), lambda dtypes: kernel))
    base = InplaceOp(namespace="mine", name="update_",
                     inputs=(TensorInput("state", ("float32",), 2), TensorInput("idx", ("int64",), 1),
                             TensorInput("rows", ("float32",), 2)),
                     mutates=("state",), sizes={"N": ("state", 0), "F": ("state", 1), "B": ("idx", 0)},
                     chains=(Chain(steps=(step,)),), returns=(TensorOutput("total", "float32", (size("B"),)),))
    return dataclasses.replace(base, **changes)


def refused(description, match):
    with pytest.raises(InplaceOpError, match=match) as error:
        check_op(description)
    message = str(error.value)
    assert "\n" not in message and message.startswith("mine::update_: ")
    return message


def test_a_sound_description_passes():
    check_op(op())


MISUSES = [
    ({"mutates": ("weights",)}, "mutates 'weights', which is not an input"),
    ({"mutates": ()}, "mutates no input"),
    ({"returns": (TensorOutput("state", "float32", (size("B"),)),)}, "returns 'state', which it mutates: torch forbids"),
    ({"returns": (TensorOutput("idx", "int64", (size("B"),)),)}, "returns 'idx', an input: torch forbids"),
    ({"sizes": {"N": ("states", 0), "B": ("idx", 0)}}, "size N is axis 0 of 'states', which is not an input"),
    ({"sizes": {"N": ("state", 2), "B": ("idx", 0)}}, "size N is axis 2 of state, which has rank 2"),
    ({"kernel": Kernel("k", NoSource(), launch(size("M")))}, "reads size 'M', which no input has"),
    ({"returns": (TensorOutput("total", "float32", (size("E"),)),)}, "returned total reads size 'E', which no input has"),
    ({"step": Step("update", ("state", "idx", "rows"), ("state",), lambda d: Kernel("k", NoSource(), launch()))},
     "never writes 'total'"),
    ({"step": Step("update", ("state", "index"), ("state", "total"), lambda d: Kernel("k", NoSource(), launch()))},
     "reads 'index', which is neither an input"),
    ({"step": Step("update", ("state", "idx"), ("state", "rows", "total"), lambda d: Kernel("k", NoSource(), launch()))},
     "writes 'rows', which is neither one of its inputs"),
    ({"inputs": (TensorInput("state", ("float64",), 2), TensorInput("idx", ("int64",), 1),
                 TensorInput("rows", ("float32",), 2))}, "each must be one of"),
]


@pytest.mark.parametrize("changes, match", MISUSES, ids=[match.split(",")[0][:40] for _, match in MISUSES])
def test_each_misuse_is_one_line_naming_it(changes, match):
    refused(op(**changes), match)


def test_a_launch_size_the_steps_own_inputs_do_not_carry_is_refused():
    """F is an op size, but a step that reads only idx cannot know it when TensorRT builds."""
    kernel = Kernel("k", NoSource(), launch(size("F")))
    first = Step("first", ("idx",), ("total",), lambda dtypes: kernel)
    second = Step("second", ("state", "rows"), ("state",), lambda dtypes: Kernel("k2", NoSource(), launch()))
    message = refused(op(chains=(Chain(steps=(first, second)),)), "which none of its inputs")
    assert "kernel k" in message and "(idx)" in message


def test_a_step_finds_its_sizes_among_its_own_inputs_and_scratch_shapes():
    from inplace.spec import Scratch

    description = op()
    chain = Chain(steps=description.chains[0].steps, scratch=(Scratch("table", "float32", (size("B") * 2, size("F"))),))
    step = Step("apply", ("state", "table"), ("state",), lambda d: None)
    assert step_size_sources(description, chain, step) == {"N": ("state", 0), "F": ("state", 1)}
    step = Step("fill", ("idx", "table"), ("table",), lambda d: None)
    assert step_size_sources(description, chain, step) == {"B": ("idx", 0), "F": ("table", 1)}


def test_a_call_with_a_dtype_the_kernel_does_not_take_is_refused():
    values = {"state": np.zeros((4, 2), np.float64), "idx": np.zeros(1, np.int64), "rows": np.zeros((1, 2), np.float32)}
    with pytest.raises(InplaceOpError, match=r"state is float64; the kernel takes float32$"):
        check_call(op(), values)


def test_a_mutated_argument_that_is_a_strided_view_is_refused():
    state = np.zeros((8, 2), np.float32)[::2]
    values = {"state": state, "idx": np.zeros(1, np.int64), "rows": np.zeros((1, 2), np.float32)}
    with pytest.raises(InplaceOpError, match="mutates state, which is a view of another tensor"):
        check_call(op(), values)


def test_an_aliased_output_of_another_shape_is_refused():
    inputs = {"state": np.zeros((4, 2), np.float32)}
    with pytest.raises(InplaceOpError, match=r"state's new value of shape \[4, 3\]; an aliased output has its input's"):
        check_new_values(op(), inputs, [np.zeros((4, 3))], "the reference")


def test_registering_another_op_under_a_registered_name_is_refused():
    import inplace.examples.ring as ring

    assert register(ring.OP) is ring.OP  # the same op again: nothing happens
    with pytest.raises(InplaceOpError, match="registered already by inplace.examples.ring"):
        register(dataclasses.replace(ring.OP, reference=None))


def test_a_returned_tensor_may_be_a_scratch_tensor_of_its_dtype_and_shape():
    from inplace.spec import Scratch

    kernel = Kernel("k", NoSource(), launch())
    step = Step("update", ("state", "idx", "rows", "total"), ("state", "total"), lambda dtypes: kernel)
    total = Scratch("total", "float32", (size("B"),))
    check_op(op(chains=(Chain(steps=(step,), scratch=(total,)),)))
    other = Scratch("total", "int64", (size("B"),))
    refused(op(chains=(Chain(steps=(step,), scratch=(other,)),)), "scratch tensor total is returned")


def test_a_step_may_name_its_plugin_by_id_in_the_ops_namespace_only():
    from inplace.checks import plugin_id, plugin_name

    kernel = Kernel("k", NoSource(), launch(size("N"), size("B")))
    step = Step("mine::update", ("state", "idx", "rows"), ("state", "total"), lambda dtypes: kernel)
    description = op(step=step)
    check_op(description)
    assert (plugin_name(step), plugin_id(description, step)) == ("update", "mine::update")
    other = Step("theirs::update", ("state", "idx", "rows"), ("state", "total"), lambda dtypes: kernel)
    refused(op(step=other), "step plugin 'theirs::update' is in namespace 'theirs'")


def unfilled_chain(first_inputs, first_outputs, second_outputs=("state",), fill=None, second_inputs=None):
    """Two steps over a scratch table [B, F]: `first` (its inputs and outputs given) then `second`, which reads the
    table and writes `second_outputs`; the table filled with `fill` (None: the first step creates it)."""
    from inplace.spec import Scratch

    kernel = Kernel("k", NoSource(), launch())
    first = Step("first", first_inputs, first_outputs, lambda dtypes: kernel)
    second = Step("second", second_inputs or ("state", "idx", "table"), second_outputs, lambda dtypes: kernel)
    return op(chains=(Chain(steps=(first, second), scratch=(Scratch("table", "float32", (size("B"), size("F")),
                                                                    fill),)),))


def test_an_unfilled_scratch_tensor_is_an_output_of_the_first_step():
    check_op(unfilled_chain(("state", "idx", "rows"), ("total", "table")))


UNFILLED_MISUSES = [
    ((("state", "idx", "rows", "table"), ("total", "table")), {},
     "chain 0: unfilled scratch tensor table (fill None) is created by the first step first: list it in that "
     "step's outputs, not in its inputs"),
    ((("state", "idx", "rows"), ("total",)), {},
     "unfilled scratch tensor table (fill None) is created by the first step first: list it in that step's outputs"),
    ((("state", "idx", "rows"), ("total", "table")),
     {"second_inputs": ("state", "idx"), "second_outputs": ("state", "table")},
     "chain 0, step second creates unfilled scratch tensor 'table'; only the first step (first) creates one"),
    ((("state", "idx", "rows"), ("total", "table")), {"fill": 0},
     "chain 0, step first creates scratch tensor 'table', which has a fill: the network makes it, so a step takes "
     "it as an input; give it fill None"),
    ((("state", "idx", "rows"), ("total", "table", "extra")), {},
     "chain 0, step first writes 'extra', which is neither one of its inputs (written in place), a returned tensor "
     "(total) nor an unfilled scratch tensor of the first step"),
]


@pytest.mark.parametrize("steps, changes, message", UNFILLED_MISUSES,
                         ids=["an input", "not an output", "a later step", "filled", "another"])
def test_each_misuse_of_an_unfilled_scratch_tensor_is_one_line_naming_it(steps, changes, message):
    text = refused(unfilled_chain(*steps, **changes), "scratch|writes")
    assert message in text


def test_an_unfilled_scratch_tensors_shape_must_be_carried_by_the_first_steps_inputs():
    """The table is [B, F]: a first step that reads idx alone knows B, not F, when TensorRT builds it."""
    text = refused(unfilled_chain(("idx",), ("table",), second_outputs=("state", "total"),
                                  second_inputs=("state", "idx", "rows", "table")), "none of its inputs")
    assert text.endswith("chain 0, step first writes table, whose shape reads size 'F', which none of its inputs "
                         "carries")
