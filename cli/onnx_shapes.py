"""--onnx_shapes NAME:D0xD1,...: the shapes of a model's inputs, parsed before any work (standard library
only, as cli.options). polygraphy's --input-shapes NAME:[D0,D1] form is taken too. A dynamic dimension that no
shape fixes is common.limits.DEFAULT_DYNAMIC_DIM (onnx_path.inputs)."""

import re

from common.errors import InputError
from common.text import excerpt

MAX_DIM = 2**31 - 1

# NAME:D0xD1x... or NAME:[D0,D1,...]; items separated by commas or spaces (a name may hold ':', as in "x:0")
_ITEM = re.compile(r"\s*(?P<name>[^\s,]+?):(?:\[(?P<list>[^\]]*)\]|(?P<dims>[0-9]+(?:x[0-9]+)*))\s*(?:,|\s|$)")


def parse_onnx_shapes(text: str) -> dict[str, tuple[int, ...]]:
    """{input name: shape} from --onnx_shapes; InputError (one line, the item and the value) for an item that
    is not NAME:D0xD1..., a dimension outside 1..2**31-1, or a name given twice."""
    shapes: dict[str, tuple[int, ...]] = {}
    position = 0
    text = text.strip()
    while position < len(text):
        match = _ITEM.match(text, position)
        if match is None or match.end() == position:
            raise InputError(f"--onnx_shapes: {excerpt(text[position:], 0)} is not NAME:D0xD1... "
                             "(e.g. X:1000x4,idx:5000)")
        position = match.end()
        name = match["name"]
        parts = match["dims"].split("x") if match["dims"] is not None else \
            [part.strip() for part in match["list"].split(",")]
        if parts == [""]:
            raise InputError(f"--onnx_shapes {name}:[]: no dimension given (a scalar input takes no --onnx_shapes)")
        dims = []
        for part in parts:
            if not part.isdigit() or not 1 <= int(part) <= MAX_DIM:
                raise InputError(f"--onnx_shapes {name}: dimension {excerpt(part, 0)} is not an integer from 1 to "
                                 f"{MAX_DIM:,}")
            dims.append(int(part))
        if name in shapes:
            raise InputError(f"--onnx_shapes: {name} is given twice")
        shapes[name] = tuple(dims)
    if not shapes:
        raise InputError("--onnx_shapes: no shape given (NAME:D0xD1,..., e.g. X:1000x4,idx:5000)")
    return shapes
