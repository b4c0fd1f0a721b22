"""Options of aliased_io_plugin.py: the parser, its --help text and the checks of every value that needs no
input file (integers in range, readable and writable paths, combinations of the engine options).

Standard library only: --help and these checks work before numpy, TensorRT or CUDA is imported. A bad value
raises InputError, which the command line prints as one line with exit status 2.
"""

import argparse
import copy
import os
import re
import secrets
import shutil
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from cli.onnx_shapes import parse_onnx_shapes
from common.errors import InputError, OutputError
from common.limits import (
    DEFAULT_DYNAMIC_DIM,
    MAX_BENCHMARK_ITERATIONS,
    MAX_INPUT_CHARS,
    MAX_PROFILE_SIZE,
    MAX_RANDOM_EDGES,
    MAX_STEPS,
)
from common.paths import OutputFiles, check_outputs, readable_file
from common.text import shown_path
from common.text import excerpt
from common.engine_description import description_path
from common.plugin_kind import PLUGIN_NAMES, PluginKind
from common.versions import CUDA12_REQUIREMENTS, POLYGRAPHY_FLOOR, TENSORRT_FLOOR

PROG = "aliased_io_plugin.py"
SCRIPT_PATH = Path(__file__).resolve().parent.parent / PROG
HELP_COLUMNS = 100  # --help fits this width whatever the terminal's
DEFAULT_NODE_FEATURES = "[1.0,3.0,5.0,7.0]"
DEFAULT_EDGES = "[[0,1],[1,2],[2,3],[3,0],[0,2],[1,3]]"
DEFAULT_NUM_CLASSES = "3"

# --help's usage line, in the pieces it may be wrapped between
USAGE = ("[--edges PAIRS |", "--graph FILE |", "--random_graph NODES EDGES]", "[--dry-run]", "[--validate]",
         "[--steps K --batch_edges B]", "[--onnx MODEL.onnx]", "[options]")
DESCRIPTION = (
    "In-place (aliased I/O) TensorRT plugin sample: classify the nodes of a graph by the mean of their "
    "neighbours' features, where the first layer, a scatter-add plugin, adds those features into its input in "
    "place. Each option also takes dashes for underscores (--save-engine); docs/options.md has every rule and "
    "limit."
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

DESCRIPTION_OUTPUT = "--save_engine's description"  # OutputFiles' key of the description beside the engine
GRAPH_OPTIONS = ("node_features", "node_features_file", "edges", "graph", "random_graph")

_DECIMAL = re.compile(r"[+-]?[0-9]{1,19}")
_HANGING = re.compile(r" *([0-9]+ +)?")  # a --help line's indent, and an exit status' number: wrapped under both

def help_width() -> int:
    """The width --help is wrapped to: the terminal's, never beyond HELP_COLUMNS (argparse keeps 2 spare)."""
    return min(HELP_COLUMNS, shutil.get_terminal_size().columns) - 2


def _usage(width: int) -> str:
    """The program's name and USAGE's pieces, wrapped to `width` between pieces under argparse's "usage: "."""
    unbroken = [PROG, *(piece.replace(" ", "\xa0") for piece in USAGE)]
    lines = _wrap(" ".join(unbroken), width, initial_indent="usage: ", subsequent_indent=" " * len(f"usage: {PROG} "))
    return "\n".join(lines)[len("usage: "):]


def _wrap(text: str, width: int, initial_indent: str = "", subsequent_indent: str = "") -> list[str]:
    """textwrap.wrap at spaces only, never inside a bound ("TensorRT >= 10.4", "K <= 1,000,000")."""
    kept = text.replace(" >= ", "\xa0>=\xa0").replace(" <= ", "\xa0<=\xa0")  # textwrap breaks at ASCII spaces only
    return [line.replace("\xa0", " ") for line in textwrap.wrap(
        kept, width, initial_indent=initial_indent, subsequent_indent=subsequent_indent, break_on_hyphens=False,
        break_long_words=False)]


def _statuses(*entries: tuple[int, str]) -> str:
    """The exit status section, one line per status (the formatter wraps each under its meaning)."""
    return "\n".join(["exit status:", *(f"  {status:<3} {meaning}" for status, meaning in entries)])


INPUTS = (
    f"--node_features and --edges take the seed sample's list syntax, parsed without eval (at most "
    f"{MAX_INPUT_CHARS:,} characters: larger graphs go in a file). Features not given are drawn from the seed, "
    "uniform in [0, 10) (with --steps: multiples of 0.25, as cpp/aliased_io_state.cpp draws them), and the run "
    "says so. Every node needs an incoming edge."
)
ENGINE = (
    "One engine serves every graph of its precision, F, C and network (--steps: the state update) whose N and E "
    "lie in its profile (1..--max_nodes, 1..--max_edges). --steps binds X_out at X's address, so nothing is "
    "copied back. --save_engine and --save_onnx are checked before any work (a file that can be written, not an "
    "input, this script or the other output) and written last, only when the run succeeded."
)
ONNX = (
    "--onnx takes a model torch.onnx.export(dynamo=True) wrote (python3 -m export.export_onnx). The sample's "
    "network runs on the graph; any other model on --onnx_inputs or on inputs made from the seed (floats standard "
    "normal, indices in range), each output that aliases an input bound at its address (--steps K: K runs, the "
    "states kept in place). --validate also compares with ONNX Runtime running the original model; --dry-run runs "
    "the rewritten model there (the plugin by its CPU reference) instead of an engine. Needs pip install -r "
    "requirements-onnx.txt."
)
EPILOG = _statuses(
    (EXIT_OK, "success"),
    (EXIT_VALIDATION_FAILED, "--validate: the output differs from the float64 reference (with --onnx: or from "
                             "ONNX Runtime's) beyond the tolerance; nothing is saved"),
    (EXIT_BAD_INPUT, "bad input: one line on stderr names the problem and the value"),
    (EXIT_MISSING_DEPENDENCY, f"a dependency is missing or too old (numpy; TensorRT >= {TENSORRT_FLOOR}, "
                              f"polygraphy >= {POLYGRAPHY_FLOOR}, cuda-python, a CUDA GPU and a driver for their CUDA, "
                              f"{CUDA12_REQUIREMENTS} for CUDA 12): one line says what to install; --dry-run needs "
                              "numpy only"),
    (EXIT_ENGINE_FAILED, "TensorRT could not add the plugin, build, load or execute the engine (-v shows its log)"),
    (EXIT_OUTPUT_FAILED, "the output could not be written to stdout (e.g. a full disk)"),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C)"),
)


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


class _Recorded(argparse._StoreAction):
    """A stored option that also records that it was given (Namespace.given_options): an option with a default,
    such as --precision, that a model of one's own must refuse only where the user typed it."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        super().__call__(parser, namespace, values, option_string)
        namespace.given_options = getattr(namespace, "given_options", frozenset()) | {self.dest}


def given_options(options: argparse.Namespace) -> frozenset[str]:
    """The dests of the _Recorded options given on the command line."""
    return frozenset(getattr(options, "given_options", frozenset()))


class _HelpFormatter(argparse.HelpFormatter):
    """--help wrapped to help_width(): each line of a description or the epilog wrapped on its own (an exit
    status continued under its meaning), each option under one spelling (its dashed twin is said once, in the
    description)."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=32, width=help_width())

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        lines = []
        for line in text.splitlines():
            head = _HANGING.match(line).group(0)  # type: ignore[union-attr]  # it matches every line
            lines += _wrap(line[len(head):], width, initial_indent=indent + head,
                           subsequent_indent=indent + " " * len(head)) or [""]
        return "\n".join(lines)

    def _split_lines(self, text: str, width: int) -> list[str]:
        return _wrap(text, width)

    def _format_action_invocation(self, action: argparse.Action) -> str:
        shown = copy.copy(action)
        shown.option_strings = [name for index, name in enumerate(action.option_strings)
                                if name.replace("-", "_") not in
                                [other.replace("-", "_") for other in action.option_strings[:index]]]
        return super()._format_action_invocation(shown)


def build_parser() -> argparse.ArgumentParser:
    parser = _ArgumentParser(
        prog=PROG,
        usage=_usage(help_width()),
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=_HelpFormatter,
        allow_abbrev=False,  # full option names only: --val or --preci are not guessed at
    )
    parser.add_argument("--precision", default="fp32", choices=["fp32", "fp16"], action=_Recorded,
                        help="float32 or float16 for the state X, the features src, the weights W and the layers' "
                        "outputs (default: fp32)")
    parser.add_argument("--num_classes", "--num-classes", metavar="C", default=DEFAULT_NUM_CLASSES, action=_Recorded,
                        help=f"classes of the classifier: W [C, F], output [C, N] (default: {DEFAULT_NUM_CLASSES})")
    parser.add_argument("--seed", metavar="S", help="seed of the weights and of every graph, feature and batch "
                        "drawn (default: drawn at random and printed)")
    parser.add_argument("--validate", action="store_true",
                        help="compare the output with the float64 numpy reference (exit 1 beyond the tolerance)")
    parser.add_argument("--dry-run", "--dry_run", dest="dry_run", action="store_true",
                        help="check the input and print the float64 reference (with --onnx: ONNX Runtime's output), "
                        "without TensorRT or CUDA")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="report every step and its time on stderr (without -v: steps over 1 s, on a terminal) "
                        "and print TensorRT's build log")
    graph = parser.add_argument_group("input graph", INPUTS)
    features = graph.add_mutually_exclusive_group()
    features.add_argument("--node_features", "--node-features", metavar="LIST",
                          help=f"a number per node, or a list of F numbers per node (default: {DEFAULT_NODE_FEATURES})")
    features.add_argument("--node_features_file", "--node-features-file", metavar="FILE.npy",
                          help="node features from a .npy file, [N] or [N, F]")
    source = graph.add_mutually_exclusive_group()
    source.add_argument("--edges", metavar="PAIRS",
                        help=f"directed [source, target] pairs (default: {DEFAULT_EDGES})")
    source.add_argument("--graph", metavar="FILE", help="the graph from an .npz (edges [E, 2], optional "
                        "node_features, state [N, F]) or an edge-list text file (\"source target\" per line)")
    source.add_argument("--random_graph", "--random-graph", nargs=2, metavar=("NODES", "EDGES"),
                        help=f"a graph with skewed in-degrees drawn from the seed (NODES <= EDGES <= "
                        f"{MAX_RANDOM_EDGES:,})")
    engine = parser.add_argument_group("engine reuse, state across runs, benchmark", ENGINE)
    engine.add_argument("--save_engine", "--save-engine", metavar="PATH",
                        help="write the engine built once the run has succeeded")
    engine.add_argument("--load_engine", "--load-engine", metavar="PATH",
                        help="run the engine saved in PATH instead of building one (a model of your own's: with "
                        "the description PATH.desc that --save_engine writes beside it)")
    engine.add_argument("--max_nodes", "--max-nodes", metavar="N",
                        help="largest N of a new engine's profile (default: max(N, 2**16))")
    engine.add_argument("--max_edges", "--max-edges", metavar="E",
                        help="largest E (--steps: B) of a new engine's profile (default: max(E, 2**20))")
    engine.add_argument("--steps", metavar="K", help=f"execute the state update K times on one state X, each adding "
                        f"--batch_edges random edges in place (K <= {MAX_STEPS:,})")
    engine.add_argument("--batch_edges", "--batch-edges", metavar="B",
                        help=f"edges drawn from the seed per --steps execution (K * B <= {MAX_RANDOM_EDGES:,})")
    engine.add_argument("--benchmark", metavar="ITERS", help="time ITERS executions (CUDA events, after warm-up), "
                        "then the scatter-add kernel alone on the same buffers")
    engine.add_argument("--cuda_graph", "--cuda-graph", action="store_true",
                        help="with --steps or --benchmark: replay one execution captured in a CUDA graph, as "
                        "trtexec's --useCudaGraph")
    engine.add_argument("--plugin", choices=PLUGIN_NAMES,
                        help="the scatter-add of a new engine: python (IPluginV3 in Python, the default) or aot "
                        "(PTX in the engine, no Python at run time; TensorRT >= 10.16)")
    onnx = parser.add_argument_group("from PyTorch through ONNX (docs/onnx.md)", ONNX)
    onnx.add_argument("--onnx", metavar="MODEL.onnx",
                      help="build the engine from this model, its scatter-adds rewritten into the in-place plugin")
    onnx.add_argument("--save_onnx", "--save-onnx", metavar="OUT.onnx",
                      help="write the rewritten --onnx model once the run has succeeded")
    onnx.add_argument("--save_outputs", "--save-outputs", metavar="DIR",
                      help="a model of your own: write the inputs of each run and the last run's outputs as .npy "
                      "(DIR/inputs/step_K/NAME.npy, DIR/outputs/NAME.npy) once the run has succeeded, for "
                      "cpp/aliased_io_state --inputs and --expected (docs/own_model_cpp.md)")
    onnx.add_argument("--onnx_inputs", "--onnx-inputs", metavar="FILE",
                      help="a model of your own: its inputs by name, an .npz (one run) or the JSON polygraphy run "
                      "--save-inputs writes (a feed dict per run)")
    onnx.add_argument("--onnx_shapes", "--onnx-shapes", metavar="NAME:D0xD1,...",
                      help=f"a model of your own: the shapes of the inputs made from the seed (a dynamic dimension "
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
    --plugin, --onnx, --save_onnx, checked; `outputs` holds what --save_engine and --save_onnx are to get, written
    once the run has succeeded."""

    save_engine: str | None = None
    load_engine: str | None = None
    max_nodes: int | None = None
    max_edges: int | None = None
    steps: int | None = None
    batch_edges: int | None = None
    benchmark: int | None = None
    plugin: PluginKind = PluginKind.PYTHON  # --plugin, decided here once
    cuda_graph: bool = False
    onnx: str | None = None
    save_onnx: str | None = None
    onnx_inputs: str | None = None
    save_outputs: str | None = None
    description: str | None = None  # --load_engine E of a model of one's own: its description E.desc
    onnx_shapes: dict[str, tuple[int, ...]] | None = None
    outputs: OutputFiles = field(default_factory=OutputFiles, compare=False, repr=False)

    @property
    def sets_profile(self) -> bool:
        return self.max_nodes is not None or self.max_edges is not None

    @property
    def own_inputs(self) -> str | None:
        """The option that gives an --onnx model inputs of its own (--onnx_inputs, else --onnx_shapes), if any."""
        return "--onnx_inputs" if self.onnx_inputs is not None else "--onnx_shapes" if self.onnx_shapes else None


def parse_engine_options(options: argparse.Namespace) -> EngineOptions:
    """Checks the engine options on their own (the graph is checked against them later); InputError if bad."""

    def optional(name: str, option: str, high: int) -> int | None:
        text = getattr(options, name)
        return None if text is None else integer(text, option, 1, high)

    parsed = EngineOptions(
        save_engine=options.save_engine,
        load_engine=None if options.load_engine is None else readable_file(options.load_engine, "--load_engine"),
        max_nodes=optional("max_nodes", "--max_nodes", MAX_PROFILE_SIZE),
        max_edges=optional("max_edges", "--max_edges", MAX_PROFILE_SIZE),
        steps=optional("steps", "--steps", MAX_STEPS),
        batch_edges=optional("batch_edges", "--batch_edges", MAX_RANDOM_EDGES),
        benchmark=optional("benchmark", "--benchmark", MAX_BENCHMARK_ITERATIONS),
        plugin=PluginKind(getattr(options, "plugin", None) or PluginKind.PYTHON),
        cuda_graph=bool(getattr(options, "cuda_graph", False)),
        onnx=None if getattr(options, "onnx", None) is None else readable_file(options.onnx, "--onnx"),
        save_onnx=getattr(options, "save_onnx", None),
        onnx_inputs=None if getattr(options, "onnx_inputs", None) is None else readable_file(options.onnx_inputs,
                                                                                              "--onnx_inputs"),
        onnx_shapes=None if getattr(options, "onnx_shapes", None) is None else parse_onnx_shapes(options.onnx_shapes),
        save_outputs=getattr(options, "save_outputs", None),
        description=loaded_description(options.load_engine),
        outputs=OutputFiles({"--save_engine": options.save_engine, "--save_onnx": getattr(options, "save_onnx", None),
                             DESCRIPTION_OUTPUT: None if options.save_engine is None else
                             description_path(options.save_engine),
                             "--save_outputs": getattr(options, "save_outputs", None)}, folders=("--save_outputs",)),
    )
    if parsed.load_engine is not None and parsed.save_engine is not None:
        raise InputError("--load_engine and --save_engine: give one of them (a loaded engine is already saved)")
    inputs = ("--graph", "--node_features_file", "--onnx", "--onnx_inputs")
    check_outputs(parsed.outputs.targets, {f"the {option} file": getattr(options, option.lstrip("-"), None)
                                           for option in inputs},
                  script=SCRIPT_PATH, folders=parsed.outputs.folders)
    if parsed.load_engine is not None and parsed.sets_profile:
        raise InputError(
            "--max_nodes/--max_edges set the profile of a new engine; an engine from --load_engine keeps the profile "
            "it was built with"
        )
    own_model = parsed.onnx is not None or parsed.description is not None
    if parsed.steps is not None and parsed.batch_edges is None and not own_model:  # a model's own: its shapes
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


def check_onnx_options(parsed: EngineOptions, options: argparse.Namespace) -> None:
    """--save_onnx, --onnx_inputs and --onnx_shapes need --onnx (check_outputs keeps --save_onnx off the model);
    --onnx_inputs or --onnx_shapes, and not with the graph's options; --onnx builds a new engine, so no
    --load_engine. InputError."""
    if parsed.save_onnx is not None and parsed.onnx is None:
        raise InputError("--save_onnx writes the rewritten --onnx model; give --onnx MODEL.onnx")
    check_loaded_model_options(parsed, options)
    if parsed.onnx is not None and parsed.load_engine is not None:
        raise InputError("--onnx builds a new engine from the model and --load_engine runs a saved one: give one of them")
    for option, value in (("--onnx_inputs", parsed.onnx_inputs), ("--onnx_shapes", parsed.onnx_shapes)):
        if value is not None and parsed.onnx is None and parsed.description is None:
            raise InputError(f"{option} describes the inputs of an --onnx model; give --onnx MODEL.onnx")
    if parsed.onnx_inputs is not None and parsed.onnx_shapes is not None:
        raise InputError("--onnx_inputs gives the inputs with their shapes; --onnx_shapes shapes inputs made from the "
                         "seed: give one of them")
    graph = [f"--{name}" for name in GRAPH_OPTIONS if getattr(options, name, None) is not None]
    if parsed.own_inputs is not None and graph:
        raise InputError(f"{graph[0]} gives the sample network's graph and {parsed.own_inputs} the inputs of an "
                         "--onnx model of your own: give one of them")


def loaded_description(load_engine: str | None) -> str | None:
    """The description beside --load_engine's engine (common.engine_description), when there is one: the engine
    of a model of one's own, run on inputs of its own; None for the sample's engines, which have none."""
    if load_engine is None:
        return None
    path = description_path(load_engine)
    return path if os.path.lexists(path) else None


def check_loaded_model_options(parsed: EngineOptions, options: argparse.Namespace) -> None:
    """What needs a model of one's own, an --onnx model or --load_engine of an engine with a description, and
    what a loaded engine without its model cannot do (--validate: no model to compare with). InputError."""
    if parsed.load_engine is not None and parsed.description is None:
        needs = [option for option, value in (("--onnx_inputs", parsed.onnx_inputs), ("--onnx_shapes",
                 parsed.onnx_shapes), ("--save_outputs", parsed.save_outputs)) if value is not None]
        if needs:
            raise InputError(f"{needs[0]} runs a model of your own, but --load_engine {shown_path(parsed.load_engine)} "
                             f"has no engine description {shown_path(description_path(parsed.load_engine))} beside it "
                             "(--save_engine of an --onnx model writes one)")
        return
    if parsed.save_outputs is not None and parsed.onnx is None and parsed.description is None:
        raise InputError("--save_outputs writes the inputs and outputs of a model of your own: give --onnx MODEL.onnx "
                         "(or --load_engine of its engine)")
    if parsed.description is not None:
        if getattr(options, "validate", False):
            raise InputError(f"--validate compares with ONNX Runtime running the original model, and --load_engine "
                             f"{shown_path(parsed.load_engine or '')} runs the engine without it: compare with the "
                             "outputs that --dry-run --onnx MODEL.onnx --save_outputs DIR writes for the same inputs")
        if getattr(options, "dry_run", False) and parsed.save_outputs is not None:
            raise InputError("--save_outputs with --dry-run --load_engine: a dry run of a loaded engine computes no "
                             "outputs (--dry-run --onnx MODEL.onnx does)")


def check_plugin_options(parsed: EngineOptions, plugin_given: bool, precision: str) -> None:
    """--plugin applies to a new engine; --benchmark times the Python plugin's kernel; --plugin aot's chains must
    launch at the profile's maxima (check_aot_profile). InputError naming the clash."""
    if plugin_given and parsed.load_engine is not None:
        raise InputError(f"--plugin {parsed.plugin} chooses the scatter-add of a new engine; an engine from "
                         "--load_engine holds the plugin it was built with")
    if parsed.plugin.aot and parsed.benchmark is not None:
        raise InputError("--benchmark times the Python plugin's kernel beside the engine; for --plugin aot run "
                         "benchmarks/bench_aot.py")
    if parsed.plugin.aot and parsed.sets_profile:
        check_aot_profile(precision, parsed.max_nodes, parsed.max_edges)


AOT_PROFILE_FEATURES = 1  # F when the options are read (the graph's comes later): rows of one feature, the most chains


def check_aot_profile(precision: str, max_nodes: int | None, max_edges: int | None,
                      num_features: int = AOT_PROFILE_FEATURES) -> None:
    """The chain each scatter-add op (plugin/scatter_add_op.py, with and without counts) chooses for this precision,
    F and the profile's maxima, every step's launch evaluated there (inplace.launch.check_chain_launches): an extra
    argument outside int32 is an InputError naming the option's size and the value. A maximum not given is taken
    at MAX_PROFILE_SIZE (the graph's own is known later)."""
    from inplace.launch import LaunchError, check_chain_launches
    from inplace.spec import BuildFacts
    from plugin.scatter_add_op import SCATTER_ADD, SCATTER_ADD_COUNTS

    dtype = "float16" if precision == "fp16" else "float32"
    dtypes = {"state": dtype, "src": dtype, "index": "int64"}
    nodes = MAX_PROFILE_SIZE if max_nodes is None else max_nodes
    edges = MAX_PROFILE_SIZE if max_edges is None else max_edges
    facts = BuildFacts(dtypes, constants={"F": num_features}, maxima={"E": edges})
    for op in (SCATTER_ADD, SCATTER_ADD_COUNTS):
        try:
            check_chain_launches(op.chain_for(facts), dtypes, {"N": nodes, "E": edges, "F": num_features})
        except LaunchError as error:
            given = ", ".join(f"{option} {value:,}" for option, value in (("--max_nodes", max_nodes),
                                                                          ("--max_edges", max_edges)) if value)
            raise InputError(f"{given} is more than --plugin aot --precision {precision} takes: "
                             f"{error.kernel}: {error.problem} at N = {nodes:,}, E = {edges:,}") from None
