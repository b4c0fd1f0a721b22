"""Options of aliased_io_plugin.py: the parser, its --help text and the checks of every value that needs no
input file (integers in range, readable and writable paths, combinations of the engine options).

Standard library only: --help and these checks work before numpy, TensorRT or CUDA is imported. A bad value
raises InputError, which the command line prints as one line with exit status 2.
"""

import argparse
import re
import secrets
import shutil
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

from cli.onnx_args import DEFAULT_DYNAMIC_DIM, parse_onnx_shapes
from common.errors import InputError, OutputError
from common.limits import (
    MAX_AOT_HALF_EDGES,
    MAX_BENCHMARK_ITERATIONS,
    MAX_INPUT_CHARS,
    MAX_PROFILE_SIZE,
    MAX_RANDOM_EDGES,
    MAX_STEPS,
)
from common.paths import readable_file, same_file, writable_file
from common.text import excerpt, shown_path
from common.versions import CUDA12_REQUIREMENTS, POLYGRAPHY_FLOOR, TENSORRT_FLOOR

PROG = "aliased_io_plugin.py"
SCRIPT_PATH = Path(__file__).resolve().parent.parent / PROG
HELP_COLUMNS = 100  # --help fits this width whatever the terminal's
DEFAULT_NODE_FEATURES = "[1.0,3.0,5.0,7.0]"
DEFAULT_EDGES = "[[0,1],[1,2],[2,3],[3,0],[0,2],[1,3]]"
DEFAULT_NUM_CLASSES = "3"

DESCRIPTION = (
    "In-place (aliased I/O) TensorRT plugin sample: classify the nodes of a graph by the mean of their\n"
    "neighbours' features, where the first layer, a scatter-add plugin, adds those features into its\n"
    "input in place."
)

EXIT_OK = 0
EXIT_VALIDATION_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_MISSING_DEPENDENCY = 3
EXIT_ENGINE_FAILED = 4
EXIT_OUTPUT_FAILED = 74  # sysexits.h's EX_IOERR: stdout could not be written (a full disk)
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report Ctrl-C

MAX_CLASSES = 4096
MAX_OUTPUT_ELEMENTS = 2**27  # num_classes * num_nodes: the [C, N] output (1 GiB as float64)
MAX_SEED = 2**63 - 1

GRAPH_OPTIONS = ("node_features", "node_features_file", "edges", "graph", "random_graph")
PYTHON_PLUGIN, AOT_PLUGIN = PLUGINS = ("python", "aot")  # network.definition's (a dry run imports no network/)

_DECIMAL = re.compile(r"[+-]?[0-9]{1,19}")

def _section(title: str, *paragraphs: str) -> str:
    """A --help section: the title, then each paragraph wrapped to HELP_COLUMNS - 2, indented by two spaces."""
    lines = [f"{title}:"]
    for paragraph in paragraphs:
        lines += textwrap.wrap(paragraph, HELP_COLUMNS - 2, initial_indent="  ", subsequent_indent="  ",
                               break_on_hyphens=False, break_long_words=False)
    return "\n".join(lines)


def _statuses(*entries: tuple[int, str]) -> str:
    """The exit status section: each status and its meaning, wrapped under the meaning's first word."""
    lines = ["exit status:"]
    for status, meaning in entries:
        head = f"  {status:<3} "
        lines += textwrap.wrap(meaning, HELP_COLUMNS - 2, initial_indent=head, subsequent_indent=" " * len(head),
                               break_on_hyphens=False, break_long_words=False)
    return "\n".join(lines)


EPILOG = "\n\n".join((
    _section(
        "inputs",
        f"--node_features and --edges take the seed sample's list syntax, parsed without eval: at most "
        f"{MAX_INPUT_CHARS:,} characters; larger graphs go in a file (--graph). --graph FILE reads an .npz (arrays "
        "edges [E,2] integer, optional node_features [N] or [N,F], state [N,F]) or an edge-list text file (one "
        "\"source target\" pair per line, separated by spaces or a comma, '#' starts a comment, a UTF-8 byte order "
        f"mark is ignored; at most 1 GiB). --random_graph NODES EDGES (NODES <= EDGES <= {MAX_RANDOM_EDGES:,}) "
        "draws a graph with skewed in-degrees from the seed. Node features: --node_features or "
        "--node_features_file, else the .npz's node_features; a --graph or --random_graph without any gets them "
        "drawn from the seed, uniform in [0, 10) (with --steps: multiples of 0.25, as cpp/aliased_io_state.cpp draws "
        "them), one per node (as many as the state's columns when the .npz holds "
        "a state), and the run says so. Every node needs an incoming edge (N = the largest node id + 1 when no "
        f"features give N). --num_classes is 1..{MAX_CLASSES} with num_classes * nodes <= {MAX_OUTPUT_ELEMENTS:,}; "
        "--seed is 0..2**63-1. Messages count edges from 0 and lines of a file from 1.",
    ),
    _section(
        "engine reuse, state across runs, benchmark",
        "--save_engine PATH writes the built engine (never over an input file or this script); --load_engine PATH "
        "runs a saved one instead of building (the plugin creator is registered first). One engine serves every "
        "graph with its precision, F and C (and its network: --steps engines hold the state-update network) whose "
        "N and E lie in its optimization profile: N from 1 to --max_nodes, E from 1 to --max_edges (defaults: "
        "max(N, 65,536) and max(E, 1,048,576)); a graph outside it stops with exit 2 naming the value and the "
        "bound. --max_nodes/--max_edges are 1..2**31-1.",
        f"--steps K --batch_edges B (K <= {MAX_STEPS:,}, K * B <= {MAX_RANDOM_EDGES:,}): K executions on one state "
        "buffer X (the graph's nodes, features and initial state; its edges are not used), each adding a new batch "
        "of B random edges drawn from the seed; X_out is bound at X's address, so nothing is copied back; prints "
        "the per-step time and what TensorRT says about X_out; --validate compares the final state with the "
        "float64 reference.",
        f"--benchmark ITERS (1..{MAX_BENCHMARK_ITERATIONS:,}) times ITERS executions after warm-up with CUDA "
        "events, then the scatter-add kernel alone on the same buffers, and prints median, p90, min and the "
        "kernel's share. --cuda_graph (with --steps or --benchmark) captures one execution (and the kernel alone) "
        "into a CUDA graph after the warm-up and replays it with cuGraphLaunch, as trtexec's --useCudaGraph does: "
        "no TensorRT or Python code on the host per execution; the buffers keep their addresses, new inputs go "
        "into them.",
        "--plugin python (default) builds the scatter-add as the Python IPluginV3 plugin (Python at run time); "
        "--plugin aot as tensorrt.plugin AOT plugins (TensorRT >= 10.16): the engine holds PTX and runs without "
        "Python, e.g. in trtexec or C++ (docs/aot_plugin.md). A loaded engine holds the plugin it was built with.",
    ),
    _section(
        "from PyTorch through ONNX (docs/onnx.md)",
        "--onnx MODEL.onnx builds the engine from a model torch.onnx.export(dynamo=True) wrote (python3 -m "
        "export.export_onnx) instead of TensorRT's network API: each scatter-add the rewrite accepts (index_add_, "
        "scatter_add) becomes the --plugin node(s), then TensorRT's ONNX parser reads it. The sample's "
        "own network (recognised by its graph) runs on the graph and must match --steps, --precision, F and "
        "--num_classes; any other model runs on --onnx_inputs FILE.npz (an array per input name) or on inputs "
        "made from the seed (floats standard normal, indices in range of the rows they index; dynamic dimensions "
        f"from --onnx_shapes NAME:D0xD1,..., else {DEFAULT_DYNAMIC_DIM}), each output that aliases an input bound at "
        "that input's address; --steps K runs it K times, the states kept in place. --save_onnx OUT.onnx writes "
        "the rewritten model. --validate compares with ONNX Runtime running the original model on the same inputs "
        "(and the sample's network with the float64 reference); --dry-run --onnx runs the rewritten model in ONNX "
        "Runtime, the plugin by its CPU reference, instead of an engine (no TensorRT or GPU). Needs onnx, "
        "onnx-graphsurgeon (and onnxruntime for --validate and --dry-run): pip install -r requirements-onnx.txt.",
    ),
    _statuses(
        (EXIT_OK, "success"),
        (EXIT_VALIDATION_FAILED, "--validate: the engine's output differs from the float64 reference beyond the "
                                 "tolerance (with --onnx: or from ONNX Runtime's beyond twice that)"),
        (EXIT_BAD_INPUT, "bad input: one line on stderr names the problem and the value"),
        (EXIT_MISSING_DEPENDENCY, f"a dependency is missing or too old (numpy; TensorRT >= {TENSORRT_FLOOR}, "
                                  f"polygraphy >= {POLYGRAPHY_FLOOR}, cuda-python, a CUDA GPU; a driver for the CUDA "
                                  f"they were built for, {CUDA12_REQUIREMENTS} for CUDA 12 drivers): one line on "
                                  "stderr says what to install; --dry-run needs numpy only"),
        (EXIT_ENGINE_FAILED, "TensorRT could not add the plugin, build, load or execute the engine: one line on "
                             "stderr (-v shows TensorRT's log)"),
        (EXIT_OUTPUT_FAILED, "the output could not be written (e.g. a full disk): one line on stderr"),
        (EXIT_INTERRUPTED, "interrupted (Ctrl-C): one line on stderr"),
    ),
)) + "\n"


class _ArgumentParser(argparse.ArgumentParser):
    """argparse with its usage errors turned into InputError, so that they print as one line with exit 2."""

    def error(self, message: str):
        raise InputError(f"{message} (see --help)")

    def print_help(self, file=None) -> None:
        """The help text, with a failed write raised as OutputError (argparse itself ignores it)."""
        try:
            (file or sys.stdout).write(self.format_help())
        except OSError as error:
            raise OutputError(error.strerror or str(error)) from None


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """The description and epilog as written (each line under HELP_COLUMNS), the options wrapped to the
    terminal's width but never beyond HELP_COLUMNS."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=min(HELP_COLUMNS, shutil.get_terminal_size().columns) - 2)


def build_parser() -> argparse.ArgumentParser:
    parser = _ArgumentParser(
        prog=PROG,
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=_HelpFormatter,
        allow_abbrev=False,  # full option names only: --val or --preci are not guessed at
    )
    parser.add_argument("--precision", default="fp32", choices=["fp32", "fp16"], help="Precision for node features")
    features = parser.add_mutually_exclusive_group()
    features.add_argument(
        "--node_features", "--node-features",
        help=f"List of node features: one number per node, or equal-length lists of F numbers per node "
        f"(default: {DEFAULT_NODE_FEATURES}, with the default edges)",
    )
    features.add_argument(
        "--node_features_file", "--node-features-file", metavar="FILE.npy",
        help="Node features from a .npy file of shape [N] or [N, F] (without either option, --graph and "
        "--random_graph draw them from the seed)",
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--edges",
        help=f"Pairs of source->target directed edges. Every node must have at least one incoming edge "
        f"(default: {DEFAULT_EDGES})",
    )
    source.add_argument("--graph", metavar="FILE", help="Read the graph from an .npz archive or an edge-list text file")
    source.add_argument(
        "--random_graph", "--random-graph", nargs=2, metavar=("NODES", "EDGES"),
        help="Generate a seeded random graph with power-law-like in-degrees",
    )
    parser.add_argument(
        "--num_classes", "--num-classes", default=DEFAULT_NUM_CLASSES,
        help=f"Number of classes in the classifier (default: {DEFAULT_NUM_CLASSES})",
    )
    parser.add_argument("--validate", action="store_true", help="Validate result with reference")
    parser.add_argument("--seed", help="Seed to use for weights generation (default: drawn at random and printed)")
    parser.add_argument(
        "--dry-run", "--dry_run", dest="dry_run", action="store_true",
        help="Validate the input, print the graph and the float64 reference output, and exit without TensorRT or CUDA",
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true",
        help="Report every step with its time on stderr (without -v: only on a terminal, and only steps "
        "that take over a second) and print the engine build log",
    )
    engine = parser.add_argument_group("engine reuse, state across runs, benchmark")
    engine.add_argument("--save_engine", "--save-engine", metavar="PATH", help="Save the engine to PATH")
    engine.add_argument(
        "--load_engine", "--load-engine", metavar="PATH",
        help="Load the engine from PATH instead of building one (the graph must fit its profile)",
    )
    engine.add_argument(
        "--max_nodes", "--max-nodes", metavar="N", help="Largest N the new engine's profile accepts (default: max(N, 65536))"
    )
    engine.add_argument(
        "--max_edges", "--max-edges", metavar="E",
        help="Largest E (with --steps: B) the new engine's profile accepts (default: max(E, 1048576))",
    )
    engine.add_argument(
        "--steps", metavar="K", help="Run K executions on one state buffer X, each adding --batch_edges random edges"
    )
    engine.add_argument("--batch_edges", "--batch-edges", metavar="B", help="Edges added per --steps execution")
    engine.add_argument(
        "--benchmark", metavar="ITERS",
        help="Time ITERS engine executions (CUDA events, after warm-up) and the kernel alone on the same buffers",
    )
    engine.add_argument(
        "--cuda_graph", "--cuda-graph", action="store_true",
        help="With --steps or --benchmark: capture one execution into a CUDA graph after the warm-up and replay it "
        "(cuGraphLaunch) instead of calling execute_async_v3 each time (trtexec's --useCudaGraph)",
    )
    engine.add_argument(
        "--plugin", choices=PLUGINS,
        help="Scatter-add of a new engine: python (IPluginV3 in Python, the default) or aot (PTX in the engine, "
        "no Python at run time; TensorRT >= 10.16)",
    )
    onnx = parser.add_argument_group("from PyTorch through ONNX")
    onnx.add_argument(
        "--onnx", metavar="MODEL.onnx",
        help="Build the engine from this exported ONNX model, its scatter-adds rewritten into the in-place plugin",
    )
    onnx.add_argument("--save_onnx", "--save-onnx", metavar="OUT.onnx", help="Write the rewritten --onnx model to OUT.onnx")
    onnx.add_argument("--onnx_inputs", "--onnx-inputs", metavar="FILE.npz",
                      help="A model of your own: its inputs, one array per input name")
    onnx.add_argument("--onnx_shapes", "--onnx-shapes", metavar="NAME:D0xD1,...",
                      help=f"A model of your own: input shapes for inputs made from the seed (a dynamic dimension "
                      f"not given: {DEFAULT_DYNAMIC_DIM})")
    return parser


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line parsed (sys.argv when argv is None); InputError on a usage error."""
    return build_parser().parse_args(argv)


def integer(text: str, option: str, low: int, high: int) -> int:
    if not isinstance(text, str) or not _DECIMAL.fullmatch(text.strip()) or not low <= int(text) <= high:
        shown = excerpt(text, 0) if isinstance(text, str) else repr(text)
        raise InputError(f"{option} must be an integer from {low:,} to {high:,}, got {shown}")
    return int(text)


@dataclass(frozen=True)
class Settings:
    """The options checked before any input is read: the seed (drawn when not given), the class count, the
    engine options and --random_graph's NODES and EDGES (None without it)."""

    seed: int
    num_classes: int
    engine: "EngineOptions"
    random_graph: tuple[int, int] | None = None


def check_options(options: argparse.Namespace) -> Settings:
    """Checks --seed, --num_classes, the input paths, the engine options and whatever the arguments alone
    decide about the graph (InputError if bad), before any file is read; draws the seed if none was given.
    The graph itself is checked when it is read (cli.inputs)."""
    seed = secrets.randbelow(2**32) if options.seed is None else integer(options.seed, "--seed", 0, MAX_SEED)
    num_classes = integer(options.num_classes, "--num_classes", 1, MAX_CLASSES)
    for option in ("graph", "node_features_file"):
        if getattr(options, option, None) is not None:
            readable_file(getattr(options, option), f"--{option}")
    engine = parse_engine_options(options)
    return Settings(seed, num_classes, engine, check_random_graph(options, engine, num_classes))


def check_output_size(num_classes: int, num_nodes: int) -> None:
    """InputError when the [C, N] classifier output would exceed MAX_OUTPUT_ELEMENTS."""
    if num_classes * num_nodes > MAX_OUTPUT_ELEMENTS:
        raise InputError(
            f"--num_classes {num_classes} with {num_nodes:,} nodes gives a [{num_classes}, {num_nodes}] "
            f"output, more than the limit of {MAX_OUTPUT_ELEMENTS:,} values"
        )


def check_random_graph(options: argparse.Namespace, engine: "EngineOptions", num_classes: int) -> tuple[int, int] | None:
    """--random_graph's (NODES, EDGES), checked against everything else the arguments give (the output size,
    --max_nodes, --max_edges) before the graph is drawn; None without --random_graph."""
    if getattr(options, "random_graph", None) is None:
        return None
    num_nodes = integer(options.random_graph[0], "--random_graph NODES", 1, MAX_RANDOM_EDGES)
    num_edges = integer(options.random_graph[1], "--random_graph EDGES", 1, MAX_RANDOM_EDGES)
    if num_edges < num_nodes:
        raise InputError(f"--random_graph: EDGES ({num_edges:,}) must be at least NODES ({num_nodes:,}), since every "
                         "node needs an incoming edge")
    if engine.max_nodes is not None and num_nodes > engine.max_nodes:
        raise InputError(f"the graph has {num_nodes:,} nodes, more than --max_nodes {engine.max_nodes:,}")
    if engine.steps is None:
        check_output_size(num_classes, num_nodes)
        if engine.max_edges is not None and num_edges > engine.max_edges:
            raise InputError(f"the graph has {num_edges:,} edges, more than --max_edges {engine.max_edges:,}")
    return num_nodes, num_edges


@dataclass(frozen=True)
class EngineOptions:
    """--save_engine, --load_engine, --max_nodes, --max_edges, --steps, --batch_edges, --benchmark, --cuda_graph,
    --plugin, --onnx, --save_onnx, checked."""

    save_engine: str | None = None
    load_engine: str | None = None
    max_nodes: int | None = None
    max_edges: int | None = None
    steps: int | None = None
    batch_edges: int | None = None
    benchmark: int | None = None
    plugin: str = PYTHON_PLUGIN
    cuda_graph: bool = False
    onnx: str | None = None
    save_onnx: str | None = None
    onnx_inputs: str | None = None
    onnx_shapes: dict[str, tuple[int, ...]] | None = None

    @property
    def sets_profile(self) -> bool:
        return self.max_nodes is not None or self.max_edges is not None


def parse_engine_options(options: argparse.Namespace) -> EngineOptions:
    """Checks the engine options on their own (the graph is checked against them later); InputError if bad."""

    def optional(name: str, option: str, high: int) -> int | None:
        text = getattr(options, name)
        return None if text is None else integer(text, option, 1, high)

    parsed = EngineOptions(
        save_engine=None if options.save_engine is None else writable_file(options.save_engine, "--save_engine"),
        load_engine=None if options.load_engine is None else readable_file(options.load_engine, "--load_engine"),
        max_nodes=optional("max_nodes", "--max_nodes", MAX_PROFILE_SIZE),
        max_edges=optional("max_edges", "--max_edges", MAX_PROFILE_SIZE),
        steps=optional("steps", "--steps", MAX_STEPS),
        batch_edges=optional("batch_edges", "--batch_edges", MAX_RANDOM_EDGES),
        benchmark=optional("benchmark", "--benchmark", MAX_BENCHMARK_ITERATIONS),
        plugin=getattr(options, "plugin", None) or PYTHON_PLUGIN,
        cuda_graph=bool(getattr(options, "cuda_graph", False)),
        onnx=None if getattr(options, "onnx", None) is None else readable_file(options.onnx, "--onnx"),
        save_onnx=None if getattr(options, "save_onnx", None) is None else writable_file(options.save_onnx,
                                                                                          "--save_onnx"),
        onnx_inputs=None if getattr(options, "onnx_inputs", None) is None else readable_file(options.onnx_inputs,
                                                                                              "--onnx_inputs"),
        onnx_shapes=None if getattr(options, "onnx_shapes", None) is None else parse_onnx_shapes(options.onnx_shapes),
    )
    if parsed.load_engine is not None and parsed.save_engine is not None:
        raise InputError("--load_engine and --save_engine: give one of them (a loaded engine is already saved)")
    for option, target in (("--save_engine", parsed.save_engine), ("--save_onnx", parsed.save_onnx)):
        if target is not None:
            check_save_target(target, options, option)
    if parsed.load_engine is not None and parsed.sets_profile:
        raise InputError(
            "--max_nodes/--max_edges set the profile of a new engine; an engine from --load_engine keeps the profile "
            "it was built with"
        )
    if parsed.steps is not None and parsed.batch_edges is None and parsed.onnx is None:  # a model's own: its shapes
        raise InputError(f"--steps {parsed.steps} needs --batch_edges B, the number of edges each step adds")
    if parsed.batch_edges is not None and parsed.steps is None:
        raise InputError("--batch_edges needs --steps K")
    if parsed.steps is not None and parsed.batch_edges is not None and parsed.steps * parsed.batch_edges > MAX_RANDOM_EDGES:
        raise InputError(
            f"--steps {parsed.steps:,} with --batch_edges {parsed.batch_edges:,} adds "
            f"{parsed.steps * parsed.batch_edges:,} edges in all, more than the limit of {MAX_RANDOM_EDGES:,}"
        )
    if parsed.batch_edges is not None and parsed.max_edges is not None and parsed.batch_edges > parsed.max_edges:
        raise InputError(f"each --steps batch has {parsed.batch_edges:,} edges, more than --max_edges {parsed.max_edges:,}")
    if parsed.steps is not None and parsed.benchmark is not None:
        raise InputError("--benchmark times the classifier engine and --steps prints its own per-step times: use one")
    if parsed.cuda_graph and parsed.steps is None and parsed.benchmark is None:
        raise InputError("--cuda_graph replays the executions of --steps K or --benchmark ITERS from a CUDA graph; "
                         "give one of them (a single run has nothing to replay)")
    check_plugin_options(parsed, getattr(options, "plugin", None) is not None, getattr(options, "precision", "fp32"))
    check_onnx_options(parsed, options)
    return parsed


def check_save_target(path: str, options: argparse.Namespace, option: str) -> None:
    """InputError when `option` (--save_engine, --save_onnx) would overwrite an input of the run or this script."""
    for named, other in (("the --graph file", getattr(options, "graph", None)),
                         ("the --onnx_inputs file", getattr(options, "onnx_inputs", None)),
                         ("the --node_features_file file", getattr(options, "node_features_file", None)),
                         ("the --onnx file", getattr(options, "onnx", None)),
                         ("this script", str(SCRIPT_PATH))):
        if other is not None and same_file(path, other):
            raise InputError(f"{option} {shown_path(path)} is {named}; writing there would overwrite it: give "
                             "another file name")


def check_onnx_options(parsed: EngineOptions, options: argparse.Namespace) -> None:
    """--save_onnx, --onnx_inputs and --onnx_shapes need --onnx (check_save_target keeps --save_onnx off the
    model); --onnx_inputs or --onnx_shapes, and not with the graph's options; --onnx builds a new engine, so no
    --load_engine. InputError."""
    if parsed.save_onnx is not None and parsed.onnx is None:
        raise InputError("--save_onnx writes the rewritten --onnx model; give --onnx MODEL.onnx")
    if parsed.onnx is not None and parsed.load_engine is not None:
        raise InputError("--onnx builds a new engine from the model and --load_engine runs a saved one: give one of them")
    for option, value in (("--onnx_inputs", parsed.onnx_inputs), ("--onnx_shapes", parsed.onnx_shapes)):
        if value is not None and parsed.onnx is None:
            raise InputError(f"{option} describes the inputs of an --onnx model; give --onnx MODEL.onnx")
    if parsed.onnx_inputs is not None and parsed.onnx_shapes is not None:
        raise InputError("--onnx_inputs gives the inputs with their shapes; --onnx_shapes shapes inputs made from the "
                         "seed: give one of them")
    own = "--onnx_inputs" if parsed.onnx_inputs is not None else "--onnx_shapes" if parsed.onnx_shapes else None
    graph = [f"--{name}" for name in GRAPH_OPTIONS if getattr(options, name, None) is not None]
    if own is not None and graph:
        raise InputError(f"{graph[0]} gives the sample network's graph and {own} the inputs of an --onnx model of "
                         "your own: give one of them")


def check_plugin_options(parsed: EngineOptions, plugin_given: bool, precision: str) -> None:
    """--plugin applies to a new engine; --benchmark times the Python plugin's kernel; the AOT float16 table
    (2 E + 1 slots) takes an int32 size. InputError naming the clash."""
    if plugin_given and parsed.load_engine is not None:
        raise InputError(f"--plugin {parsed.plugin} chooses the scatter-add of a new engine; an engine from "
                         "--load_engine holds the plugin it was built with")
    if parsed.plugin == AOT_PLUGIN and parsed.benchmark is not None:
        raise InputError("--benchmark times the Python plugin's kernel beside the engine; for --plugin aot run "
                         "benchmarks/bench_aot.py")
    if parsed.plugin == AOT_PLUGIN and precision == "fp16" and (parsed.max_edges or 0) > MAX_AOT_HALF_EDGES:
        raise InputError(f"--max_edges {parsed.max_edges:,} is more than --plugin aot --precision fp16 takes "
                         f"({MAX_AOT_HALF_EDGES:,}: its float32 table has 2 E + 1 slots, an int32 size)")
