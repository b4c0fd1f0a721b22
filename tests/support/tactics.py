"""An AOT chain pinned to one tactic of its scatter step, for engines that must run that tactic whatever TensorRT's
timing would keep (TensorRT times every tactic a plugin offers and keeps the fastest: an engine of the op itself runs
one of them, an engine of the pinned op the pinned one).

    pinned_tactic(op, chain, tactic) -> (op, chain)   the scatter step's kernel replaced by tactic `tactic` (1, 2,
                                                       ...: step.tactics()[tactic - 1]) and offering no other, under
                                                       the namespace <op's>_tactic<k>; made once per (op, chain, k)
"""

import dataclasses
import functools
from typing import Any

from plugin.scatter_add_op import SCATTER_ADD, SCATTER_ADD_COUNTS

OPS = {op.name: op for op in (SCATTER_ADD, SCATTER_ADD_COUNTS)}
_STEPS: dict[str, Any] = {}  # one Step per plugin id, as plugin/scatter_add_op.py keeps (round_table: both ops')


def pinned_tactic(op: Any, chain: Any, tactic: int) -> tuple[Any, Any]:
    return _pinned(op.name, op.chains.index(chain), tactic)


@functools.cache
def _pinned(op_name: str, chain_number: int, tactic: int) -> tuple[Any, Any]:
    from inplace.spec import Chain

    op = OPS[op_name]
    chain = op.chains[chain_number]
    namespace = f"{op.namespace}_tactic{tactic}"

    def pin(step: Any) -> Any:
        plugin = f"{namespace}::{step.plugin.partition('::')[2]}"
        if plugin not in _STEPS:
            if not step.tactics({}):
                _STEPS[plugin] = dataclasses.replace(step, plugin=plugin)
            else:
                assert 1 <= tactic <= len(step.tactics({})), f"{step.plugin} offers tactics 1-{len(step.tactics({}))}"
                _STEPS[plugin] = dataclasses.replace(step, plugin=plugin, tactics=lambda dtypes: (),
                                                     kernel=lambda dtypes: step.tactics(dtypes)[tactic - 1])
        return _STEPS[plugin]

    pinned = Chain(tuple(pin(step) for step in chain.steps), chain.scratch)
    assert any(step.tactics({}) for step in chain.steps), "the chain has no step that offers tactics"
    return dataclasses.replace(op, namespace=namespace, chains=(pinned,), choose=None), pinned
