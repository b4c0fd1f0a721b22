"""The layers of the code, read from its import statements (every one, inside functions and TYPE_CHECKING blocks
too, and import_module of a constant name): onnx_path/ is a library that the command line (cli/, the entry
script) calls and never imports back, and no module or package imports itself in a circle."""

import ast
import functools
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENTRY = "aliased_io_plugin"


def project_modules() -> dict[str, Path]:
    """Every module of the project's packages (the folders at the root with an __init__.py, tests/ aside) and the
    entry script, by dotted name."""
    modules = {ENTRY: ROOT / f"{ENTRY}.py"}
    for package in sorted(path.parent for path in ROOT.glob("*/__init__.py")):
        if package.name == "tests":
            continue
        for file in package.rglob("*.py"):
            parts = file.relative_to(ROOT).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = file
    return modules


def imported_names(file: Path) -> set[str]:
    """The dotted names a file imports anywhere in it: `import a.b`, `from a.b import c` (both a.b and a.b.c:
    c may be a module) and import_module("a.b") of a constant."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(file.read_text(), str(file))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == \
                "import_module" and node.args and isinstance(node.args[0], ast.Constant):
            names.add(str(node.args[0].value))
    return names


@functools.cache
def import_graph() -> dict[str, set[str]]:
    """{module: the project modules it imports} (a package's __init__ named by the package); read once."""
    modules = project_modules()
    graph: dict[str, set[str]] = {}
    for name, file in modules.items():
        imported = set()
        for target in imported_names(file):
            while target and target not in modules:  # `from a.b import c` where c is a name, not a module
                target = target.rpartition(".")[0]
            if target and target != name:
                imported.add(target)
        graph[name] = imported
    return graph


def package_of(module: str) -> str:
    return module.split(".")[0]


def circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of `graph` (its nodes in order, the first repeated last), or None where it has none."""
    done: set[str] = set()
    path: list[str] = []
    on_path: set[str] = set()

    def visit(node: str) -> list[str] | None:
        path.append(node)
        on_path.add(node)
        for target in sorted(graph.get(node, ())):
            if target in on_path:
                return path[path.index(target):] + [target]
            if target not in done:
                found = visit(target)
                if found:
                    return found
        path.pop()
        on_path.discard(node)
        done.add(node)
        return None

    for start in sorted(graph):
        if start not in done:
            found = visit(start)
            if found:
                return found
    return None


def test_the_import_reader_sees_imports_inside_functions():
    """cli.own_model imports onnx_path.rewrite inside a function only (model_io): the graph must hold it, or the
    tests below would pass on imports they cannot see."""
    graph = import_graph()
    assert "onnx_path.rewrite" in graph["cli.own_model"]
    assert "cli.options" in graph[ENTRY] and "onnx_path.read" in graph["cli.onnx_model"]


def test_onnx_path_imports_nothing_of_the_command_line():
    graph = import_graph()
    back = sorted(f"{module} imports {target}" for module, targets in graph.items() if package_of(module) == "onnx_path"
                  for target in targets if package_of(target) in ("cli", ENTRY))
    assert not back, "onnx_path/ is a library the command line calls: " + "; ".join(back)


def test_no_module_imports_itself_in_a_circle():
    found = circle(import_graph())
    assert found is None, " -> ".join(found or [])


def test_no_package_imports_itself_in_a_circle():
    packages: dict[str, set[str]] = defaultdict(set)
    for module, targets in import_graph().items():
        packages[package_of(module)].update(package_of(target) for target in targets
                                            if package_of(target) != package_of(module))
    found = circle(packages)
    assert found is None, " -> ".join(found or [])


def test_a_circle_is_found_and_named():
    """The search itself, on a graph with a circle behind a branch and on one without."""
    assert circle({"a": {"b"}, "b": {"c", "d"}, "c": set(), "d": {"b"}}) == ["b", "d", "b"]
    assert circle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None
