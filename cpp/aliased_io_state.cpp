/*
 * aliased_io_state: runs a state-update engine of aliased_io_plugin.py in place, from C++, with no Python and no
 * plugin library.
 *
 * The engine (saved by `aliased_io_plugin.py --plugin aot --steps K --batch_edges B --save_engine FILE`) has the
 * inputs X [N, F] (float32 or float16), src [E, F] (X's type) and idx [E] int64, and the output X_out: the AOT
 * scatter-add's result, which the plugin writes into X's memory. The kernels' PTX is in the engine. TensorRT's
 * getAliasedInputTensor("X_out") answers null for plugin aliasing, so this program binds X_out at X's own address
 * itself: every enqueueV3 then adds one batch of edges into X, and nothing is copied back.
 *
 * Batches and node features come from the seed through SplitMix64, exactly as graph/portable_random.py draws them,
 * so `python3 aliased_io_plugin.py --random_graph N N --steps K --batch_edges B --seed S --dry-run` prints the
 * final state this program computes (docs/aot_plugin.md, "The same run from C++").
 */

#include "aliased_io_bindings.h"
#include "npy.h"

#include <NvInferRuntime.h>
#include <NvInferVersion.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <type_traits>
#include <vector>

// ICudaEngine::getAliasedInputTensor exists from TensorRT 10.15 on.
#define ALIASED_IO_HAS_ALIASED_INPUT_TENSOR                                                                         \
    (NV_TENSORRT_MAJOR > 10 || (NV_TENSORRT_MAJOR == 10 && NV_TENSORRT_MINOR >= 15))

namespace
{

// Exit statuses, as aliased_io_plugin.py's (README "Running the sample").
constexpr int kEXIT_OK = 0;
constexpr int kEXIT_VALIDATION_FAILED = 1;
constexpr int kEXIT_BAD_INPUT = 2;
constexpr int kEXIT_MISSING_DEPENDENCY = 3;
constexpr int kEXIT_ENGINE_FAILED = 4;

// Limits of the Python --steps run (common/limits.py), so that every run here can be repeated there.
constexpr int64_t kMAX_STEPS = 1000000;
constexpr int64_t kMAX_RANDOM_EDGES = 100000000; // nodes, and steps * batch_edges
constexpr int64_t kMAX_VALUES = 100000000;       // nodes * features of --reference-only
constexpr int64_t kMAX_FEATURES = 65536;
constexpr int kWARMUP_EXECUTIONS = 2;    // network/steps.py WARMUP_EXECUTIONS, adding zeros
constexpr int64_t kPRINTED_VALUES = 200; // beyond this the state is summarized, as numpy prints it

// The engine's tensors, as the --steps network names them (populate_state_network).
char const* const kSTATE = "X";
char const* const kSOURCE = "src";
char const* const kINDEX = "idx";
char const* const kSTATE_OUT = "X_out";

//! What ends the program: one line on stderr and an exit status (caught in main).
struct Failure
{
    int status;
    std::string message;
};

void check(bool ok, int status, std::string const& message)
{
    if (!ok)
    {
        throw Failure{status, message};
    }
}

std::string withCommas(int64_t value)
{
    std::string digits = std::to_string(value); // the values here are never negative
    for (int64_t i = static_cast<int64_t>(digits.size()) - 3; i > 0; i -= 3)
    {
        digits.insert(static_cast<size_t>(i), ",");
    }
    return digits;
}

std::string versionString(int64_t version)
{
    return std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "."
        + std::to_string(version % 100);
}

// ---- SplitMix64 as a counter-based generator: the rule of graph/portable_random.py ------------------------------

constexpr uint64_t kGAMMA = 0x9E3779B97F4A7C15ULL;
constexpr uint64_t kBATCH_STREAM = 2;
constexpr uint64_t kFEATURE_STREAM = 3;
constexpr uint64_t kFEATURE_LEVELS = 40; // features 0, 0.25, ..., 9.75: exact in float16 and float32
constexpr double kFEATURE_STEP = 0.25;

//! Output number i (0-based) of SplitMix64 seeded with key; unsigned arithmetic wraps mod 2^64.
uint64_t splitmix64(uint64_t key, uint64_t i)
{
    uint64_t z = key + (i + 1) * kGAMMA;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

//! The sizes of a run and its seed.
struct Problem
{
    int64_t nodes;
    int64_t features;
    int64_t steps;
    int64_t batchEdges;
    uint64_t seed;
};

//! [N, F] row-major: feature (n, f) = (word(n F + f) mod 40) / 4 of stream 3.
std::vector<double> nodeFeatures(Problem const& p)
{
    uint64_t const key = splitmix64(p.seed, kFEATURE_STREAM);
    std::vector<double> features(static_cast<size_t>(p.nodes * p.features));
    for (size_t i = 0; i < features.size(); ++i)
    {
        features[i] = static_cast<double>(splitmix64(key, i) % kFEATURE_LEVELS) * kFEATURE_STEP;
    }
    return features;
}

//! Batch k: edge j goes from word(2 (k B + j)) mod N to word(2 (k B + j) + 1) mod N of stream 2.
void edgeBatch(Problem const& p, int64_t k, std::vector<int64_t>& sources, std::vector<int64_t>& targets)
{
    uint64_t const key = splitmix64(p.seed, kBATCH_STREAM);
    uint64_t const nodes = static_cast<uint64_t>(p.nodes);
    uint64_t const first = 2 * static_cast<uint64_t>(k) * static_cast<uint64_t>(p.batchEdges);
    sources.resize(static_cast<size_t>(p.batchEdges));
    targets.resize(static_cast<size_t>(p.batchEdges));
    for (size_t j = 0; j < sources.size(); ++j)
    {
        sources[j] = static_cast<int64_t>(splitmix64(key, first + 2 * j) % nodes);
        targets[j] = static_cast<int64_t>(splitmix64(key, first + 2 * j + 1) % nodes);
    }
}

// ---- The float64 reference and its tolerance (network/steps.py) --------------------------------------------------

//! The final state in float64 (the state starts at zeros) and how many rows each node received.
struct Reference
{
    std::vector<double> state;
    std::vector<int64_t> additions;
};

Reference computeReference(Problem const& p, std::vector<double> const& features)
{
    Reference ref{std::vector<double>(features.size(), 0.0), std::vector<int64_t>(static_cast<size_t>(p.nodes), 0)};
    std::vector<int64_t> sources;
    std::vector<int64_t> targets;
    for (int64_t k = 0; k < p.steps; ++k)
    {
        edgeBatch(p, k, sources, targets);
        for (size_t j = 0; j < sources.size(); ++j)
        {
            for (int64_t f = 0; f < p.features; ++f)
            {
                ref.state[static_cast<size_t>(targets[j] * p.features + f)]
                    += features[static_cast<size_t>(sources[j] * p.features + f)];
            }
            ++ref.additions[static_cast<size_t>(targets[j])];
        }
    }
    return ref;
}

//! network/steps.py rounding_bound: gamma(k + 1) S + (k + 1) tiny, k the node's additions. S, the sum of the
//! magnitudes added, is the reference itself: the features are >= 0 and the state starts at zero.
double roundingBound(double magnitude, int64_t additions, bool half)
{
    double const unit = std::ldexp(1.0, half ? -11 : -24);
    double const tiny = std::ldexp(1.0, half ? -24 : -149);
    double const roundings = static_cast<double>(additions + 1);
    double const gamma = roundings * unit < 1.0 ? roundings * unit / (1.0 - roundings * unit) : INFINITY;
    return gamma * magnitude + roundings * tiny;
}

//! Prints network/steps.py validation_lines; false when an element is beyond its bound (NaN included).
bool validate(std::vector<double> const& actual, Reference const& ref, Problem const& p, bool half)
{
    auto bound = [&](size_t i) {
        return roundingBound(ref.state[i], ref.additions[i / static_cast<size_t>(p.features)], half);
    };
    size_t worst = 0;
    double worstError = -1.0;
    int64_t beyond = 0;
    for (size_t i = 0; i < actual.size(); ++i)
    {
        double const error = std::fabs(actual[i] - ref.state[i]);
        beyond += !(error <= bound(i));
        if ((std::isnan(error) ? INFINITY : error) > worstError)
        {
            worstError = std::isnan(error) ? INFINITY : error;
            worst = i;
        }
    }
    std::printf("Validation against reference %s!\n", beyond == 0 ? "successful" : "failed");
    std::printf("Final state against the float64 reference of all %lld batches: largest absolute error %.3g "
                "(worst-case rounding bound there %.3g); %lld of %zu elements beyond their bound\n",
        static_cast<long long>(p.steps), std::fabs(actual[worst] - ref.state[worst]), bound(worst),
        static_cast<long long>(beyond), actual.size());
    return beyond == 0;
}

//! network/steps.py check_state_range for float16: no partial sum may pass 65504 (sums of features >= 0 grow).
void checkHalfRange(Reference const& ref, Problem const& p)
{
    auto const largest = std::max_element(ref.state.begin(), ref.state.end());
    char value[32];
    std::snprintf(value, sizeof(value), "%.6g", *largest);
    check(*largest <= 65504.0, kEXIT_BAD_INPUT,
        "with this float16 engine the state of node " + std::to_string((largest - ref.state.begin()) / p.features)
            + " would reach " + value + " after " + withCommas(p.steps)
            + " batches, beyond the largest float16 value 65504; use fewer --steps");
}

//! Every row (up to 200 values, else the first and last three), then the sum.
void printRows(std::vector<double> const& values, int64_t rows, int64_t columns, char const* what)
{
    bool const all = rows * columns <= kPRINTED_VALUES;
    for (int64_t n = 0; n < rows; ++n)
    {
        if (!all && n == 3 && rows > 6)
        {
            std::printf("...\n");
            n = rows - 3;
        }
        for (int64_t f = 0; f < columns; ++f)
        {
            std::printf(f == 0 ? "[%.10g" : " %.10g", values[static_cast<size_t>(n * columns + f)]);
        }
        std::printf("]\n");
    }
    double sum = 0.0;
    for (double value : values)
    {
        sum += value;
    }
    std::printf("Sum over the %s: %.17g\n", what, sum);
}

void printState(std::vector<double> const& state, Problem const& p)
{
    printRows(state, p.nodes, p.features, "state");
}

// ---- Timing, in the words of the Python runs (describe_summary, format_duration) ------------------------------

std::string formatDuration(double ms)
{
    char text[32];
    if (ms < 1.0)
    {
        std::snprintf(text, sizeof(text), "%.1f us", ms * 1e3);
    }
    else
    {
        std::snprintf(text, sizeof(text), ms < 100 ? "%.3g ms" : ms < 1e3 ? "%.0f ms" : "%.2f s",
            ms < 1e3 ? ms : ms / 1e3);
    }
    return text;
}

double median(std::vector<double> const& sorted)
{
    size_t const n = sorted.size();
    return n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

//! "median 12.3 us, p90 13.0 us, min 11.9 us, max 20.1 us over 100 runs" (p90: nearest rank); times non-empty.
std::string describeTimes(std::vector<double> times)
{
    std::sort(times.begin(), times.end());
    double const ninety = std::ceil(0.9 * static_cast<double>(times.size()) - 1e-9); // 1-based nearest rank
    size_t const rank = std::max<size_t>(1, static_cast<size_t>(ninety));
    return "median " + formatDuration(median(times)) + ", p90 " + formatDuration(times[rank - 1]) + ", min "
        + formatDuration(times.front()) + ", max " + formatDuration(times.back()) + " over "
        + std::to_string(times.size()) + (times.size() == 1 ? " run" : " runs");
}

// ---- Options: every check the arguments alone decide, before any file, library or device is touched ------------

struct Options
{
    std::string engine;
    int64_t steps{10};
    int64_t batchEdges{0}; // 0: the engine profile's opt E
    int64_t nodes{0};      // 0: the engine profile's opt N
    int64_t features{0};   // --reference-only only; an engine has its own
    int64_t seed{1};
    bool validate{false};
    bool referenceOnly{false};
    bool verbose{false};
    bool help{false};
    // A model's engine (--inputs): its description, the .npy inputs, the reference outputs, where to save outputs
    std::string inputs;
    std::string description; // default: --engine's file + ".desc"
    std::string expected;
    std::string saveOutputs;
    bool plan{false};
    bool stepsGiven{false};
};

void printHelp()
{
    std::printf(
        "Usage: aliased_io_state --engine=FILE [--steps=K] [--batch_edges=B] [--nodes=N] [--seed=S] [--validate]\n"
        "       aliased_io_state --reference-only --nodes=N --batch_edges=B [--features=F] [--steps=K] [--seed=S]\n"
        "       aliased_io_state --engine=FILE --inputs=DIR [--description=FILE] [--steps=K] [--expected=DIR]\n"
        "                        [--save_outputs=DIR] [--plan]\n"
        "\n"
        "Runs K executions of a state-update engine saved by\n"
        "  python3 aliased_io_plugin.py --plugin aot --steps K --batch_edges B --save_engine FILE\n"
        "on one device buffer X, each adding a new batch of B random edges in place (X_out bound at X's address).\n"
        "\n"
        "  --engine=FILE     the engine (inputs X [N, F] float32 or float16, src [E, F], idx [E] int64; output X_out)\n"
        "  --steps=K         executions, each with a new batch (1..%s; default 10)\n"
        "  --batch_edges=B   edges per batch (K * B <= %s; default: the engine profile's opt E)\n"
        "  --nodes=N         rows of X (default: the engine profile's opt N, the graph it was built for)\n"
        "  --seed=S          seed of the batches and node features (0..2^63-1; default 1); the same seed gives the\n"
        "                    same final state as aliased_io_plugin.py --random_graph N N --steps K --batch_edges B\n"
        "  --validate        compare the final state with the float64 reference (exit 1 beyond the rounding bound)\n"
        "  --reference-only  print the float64 reference of the final state; no TensorRT runtime, no GPU\n"
        "  --features=F      features per node with --reference-only (default 1; an engine has its own F)\n"
        "\n"
        "Any engine of a model of your own (aliased_io_plugin.py --onnx M --plugin aot --save_engine FILE), run in\n"
        "place: each output its description names as an input's memory is bound at that input's address.\n"
        "  --inputs=DIR      NAME.npy for every input (the same set for every step), or DIR/step_0/ (every input)\n"
        "                    and DIR/step_1/... (the inputs other than the states): one set per step\n"
        "  --description=F   the engine's description (default: FILE.desc, which --save_engine writes)\n"
        "  --steps=K         executions (default: one per step_ folder, else 1)\n"
        "  --expected=DIR    compare the final outputs with DIR/NAME.npy (--dry-run --onnx M --save_outputs D\n"
        "                    writes D/outputs); exit 1 beyond the tolerance\n"
        "  --save_outputs=DIR  write the final outputs as DIR/NAME.npy (DIR new or empty)\n"
        "  --plan            check the description and the files and print which buffer each tensor is bound to;\n"
        "                    no TensorRT runtime, no GPU, no execution (the states stay their inputs)\n"
        "\n"
        "  --verbose, -v     print TensorRT's log\n"
        "  --help, -h        this text\n"
        "\n"
        "Exit status: 0 success; 1 validation failed; 2 bad argument, missing or invalid engine; 3 no TensorRT\n"
        "runtime, GPU or driver; 4 TensorRT or CUDA failed while running. Failures print one line on stderr.\n",
        withCommas(kMAX_STEPS).c_str(), withCommas(kMAX_RANDOM_EDGES).c_str());
}

int64_t parseInteger(std::string const& name, std::string const& text, int64_t low, int64_t high)
{
    std::string const problem
        = name + " must be an integer from " + withCommas(low) + " to " + withCommas(high) + ", got '" + text + "'";
    check(!text.empty() && text.find_first_not_of("0123456789") == std::string::npos, kEXIT_BAD_INPUT, problem);
    errno = 0;
    long long const value = std::strtoll(text.c_str(), nullptr, 10);
    check(errno != ERANGE && value >= low && value <= high, kEXIT_BAD_INPUT, problem);
    return value;
}

Options parseOptions(int argc, char** argv)
{
    Options o;
    struct Integer
    {
        char const* name;
        int64_t* target;
        int64_t low;
        int64_t high;
        bool given;
    };
    Integer integers[] = {{"--steps", &o.steps, 1, kMAX_STEPS, false},
        {"--batch_edges", &o.batchEdges, 1, kMAX_RANDOM_EDGES, false},
        {"--nodes", &o.nodes, 1, kMAX_RANDOM_EDGES, false}, {"--features", &o.features, 1, kMAX_FEATURES, false},
        {"--seed", &o.seed, 0, INT64_MAX, false}};
    struct Flag
    {
        char const* name;
        char const* alias;
        bool* target;
    };
    Flag const flags[] = {{"--validate", "--validate", &o.validate}, {"--plan", "--plan", &o.plan},
        {"--reference-only", "--reference_only", &o.referenceOnly}, {"--verbose", "-v", &o.verbose},
        {"--help", "-h", &o.help}};
    for (int i = 1; i < argc; ++i)
    {
        std::string name = argv[i];
        size_t const equals = name.find('=');
        bool const inlineValue = name.rfind("--", 0) == 0 && equals != std::string::npos;
        std::string const value = inlineValue ? name.substr(equals + 1) : "";
        name = inlineValue ? name.substr(0, equals) : name;
        name = name == "--batch-edges" ? "--batch_edges" : name;
        auto next = [&]() -> std::string {
            check(inlineValue || i + 1 < argc, kEXIT_BAD_INPUT, name + " needs a value (" + name + "=VALUE)");
            return inlineValue ? value : argv[++i];
        };
        auto const flag = std::find_if(std::begin(flags), std::end(flags),
            [&](Flag const& f) { return name == f.name || name == f.alias; });
        auto const integer = std::find_if(std::begin(integers), std::end(integers),
            [&](Integer const& option) { return name == option.name; });
        if (flag != std::end(flags))
        {
            check(!inlineValue, kEXIT_BAD_INPUT, name + " takes no value, got '" + value + "'");
            *flag->target = true;
        }
        else if (integer != std::end(integers))
        {
            *integer->target = parseInteger(name, next(), integer->low, integer->high);
            integer->given = true;
        }
        else if (name == "--engine" || name == "--inputs" || name == "--description" || name == "--expected"
            || name == "--save_outputs" || name == "--save-outputs")
        {
            std::string& target = name == "--engine" ? o.engine
                : name == "--inputs"                 ? o.inputs
                : name == "--description"            ? o.description
                : name == "--expected"               ? o.expected
                                                     : o.saveOutputs;
            target = next();
            check(!target.empty(), kEXIT_BAD_INPUT, name + " needs a file or folder name, got ''");
        }
        else
        {
            check(false, kEXIT_BAD_INPUT, "unknown argument '" + std::string(argv[i]) + "' (--help lists the options)");
        }
    }
    bool const batchEdgesGiven = integers[1].given;
    bool const nodesGiven = integers[2].given;
    bool const featuresGiven = integers[3].given;
    o.stepsGiven = integers[0].given;
    if (o.help)
    {
        return o;
    }
    if (!o.inputs.empty() || o.plan || !o.description.empty() || !o.expected.empty() || !o.saveOutputs.empty())
    {
        check(!o.inputs.empty(), kEXIT_BAD_INPUT,
            "--plan, --description, --expected and --save_outputs go with a model's engine: give --inputs=DIR");
        char const* sample = o.referenceOnly ? "--reference-only"
            : o.validate                     ? "--validate"
            : batchEdgesGiven                ? "--batch_edges"
            : nodesGiven                     ? "--nodes"
            : featuresGiven                  ? "--features"
            : integers[4].given              ? "--seed"
                                             : nullptr;
        check(sample == nullptr, kEXIT_BAD_INPUT,
            std::string(sample ? sample : "") + " serves the sample's state run; --inputs runs a model's engine "
                "on the .npy inputs in DIR (--expected=DIR compares its outputs)");
        check(o.plan || !o.engine.empty(), kEXIT_BAD_INPUT, "--inputs=DIR needs --engine=FILE (or --plan)");
        check(!o.engine.empty() || !o.description.empty(), kEXIT_BAD_INPUT,
            "--plan needs --engine=FILE or --description=FILE");
        o.description = o.description.empty() ? o.engine + ".desc" : o.description;
        return o;
    }
    if (o.referenceOnly)
    {
        check(o.engine.empty() && !o.validate, kEXIT_BAD_INPUT,
            std::string("--reference-only runs no engine: drop ") + (o.engine.empty() ? "--validate" : "--engine"));
        check(nodesGiven && batchEdgesGiven, kEXIT_BAD_INPUT,
            "--reference-only needs --nodes=N and --batch_edges=B (an engine would give them)");
        o.features = featuresGiven ? o.features : 1;
        check(o.nodes * o.features <= kMAX_VALUES, kEXIT_BAD_INPUT,
            "--nodes " + withCommas(o.nodes) + " with --features " + withCommas(o.features) + " gives "
                + withCommas(o.nodes * o.features) + " values, more than the limit of " + withCommas(kMAX_VALUES));
    }
    else
    {
        check(!o.engine.empty(), kEXIT_BAD_INPUT,
            "--engine=FILE is required (an engine of aliased_io_plugin.py --plugin aot --steps ... --save_engine "
            "FILE), or --reference-only");
        check(!featuresGiven, kEXIT_BAD_INPUT, "--features goes with --reference-only: an engine has its own F");
    }
    check(!batchEdgesGiven || o.steps * o.batchEdges <= kMAX_RANDOM_EDGES, kEXIT_BAD_INPUT,
        "--steps " + withCommas(o.steps) + " with --batch_edges " + withCommas(o.batchEdges) + " adds "
            + withCommas(o.steps * o.batchEdges) + " edges in all, more than the limit of "
            + withCommas(kMAX_RANDOM_EDGES));
    return o;
}

//! The --engine file's bytes, checked as aliased_io_plugin.py checks a path: a regular file (not a folder, FIFO or
//! device), not empty, its size (from stat, not from seeking) one that host memory can hold.
std::vector<char> readEngineFile(std::string const& path)
{
    struct stat status{};
    bool const found = ::stat(path.c_str(), &status) == 0; // apart from check(): its message reads errno
    check(found, kEXIT_BAD_INPUT, "cannot read --engine " + path + ": " + std::strerror(errno));
    check(!S_ISDIR(status.st_mode), kEXIT_BAD_INPUT, "--engine " + path + " is a folder, not an engine file");
    check(S_ISREG(status.st_mode), kEXIT_BAD_INPUT,
        "--engine " + path + " is not a regular file (a FIFO, socket or device), not an engine file");
    check(status.st_size > 0, kEXIT_BAD_INPUT, "--engine " + path + " is empty, not a TensorRT engine");
    std::ifstream file(path, std::ios::binary);
    check(file.good(), kEXIT_BAD_INPUT, "cannot read --engine " + path + ": " + std::strerror(errno));
    std::vector<char> blob;
    try
    {
        blob.resize(static_cast<size_t>(status.st_size));
    }
    catch (std::bad_alloc const&)
    {
        throw Failure{kEXIT_BAD_INPUT, "--engine " + path + " has " + withCommas(status.st_size)
                + " bytes, more than this machine can hold in memory"};
    }
    bool const read = file.read(blob.data(), static_cast<std::streamsize>(blob.size())).good();
    check(read, kEXIT_BAD_INPUT, "cannot read --engine " + path + ": " + std::strerror(errno));
    return blob;
}

// ---- TensorRT and CUDA, every call checked -------------------------------------------------------------------

//! Prints warnings (everything with --verbose); keeps the last error for the failing call's one line.
class Logger : public nvinfer1::ILogger
{
public:
    explicit Logger(bool verbose)
        : mVerbose(verbose)
    {
    }

    void log(Severity severity, nvinfer1::AsciiChar const* msg) noexcept override
    {
        if (severity <= Severity::kERROR)
        {
            mLastError = msg;
        }
        if (mVerbose || severity == Severity::kWARNING)
        {
            std::fprintf(stderr, "[TensorRT] %s\n", msg);
        }
    }

    //! "; TensorRT: <its last error>", or "" when it logged none.
    std::string lastError() const
    {
        return mLastError.empty() ? "" : "; TensorRT: " + mLastError;
    }

private:
    bool mVerbose;
    std::string mLastError;
};

void checkCuda(cudaError_t status, std::string const& what, int exitStatus = kEXIT_ENGINE_FAILED)
{
    check(status == cudaSuccess, exitStatus,
        what + " failed: " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
}

// CUDA objects released by unique_ptr (their release status is ignored: nothing to do about it while unwinding).
using DeviceMemory = std::unique_ptr<void, decltype(&cudaFree)>;
using Stream = std::unique_ptr<std::remove_pointer_t<cudaStream_t>, decltype(&cudaStreamDestroy)>;
using Event = std::unique_ptr<std::remove_pointer_t<cudaEvent_t>, decltype(&cudaEventDestroy)>;

DeviceMemory deviceMemory(size_t bytes, char const* what)
{
    void* data = nullptr;
    checkCuda(cudaMalloc(&data, bytes),
        std::string("cudaMalloc of ") + what + " (" + withCommas(static_cast<int64_t>(bytes)) + " bytes)");
    return DeviceMemory(data, cudaFree);
}

Event event()
{
    cudaEvent_t created = nullptr;
    checkCuda(cudaEventCreate(&created), "cudaEventCreate");
    return Event(created, cudaEventDestroy);
}

//! One enqueueV3 between two CUDA events on `stream`: appends its device time and the host time of the call alone.
void timedStep(nvinfer1::IExecutionContext& context, cudaStream_t stream, Event const& start, Event const& stop,
    std::string const& step, Logger const& logger, std::vector<double>& deviceMs, std::vector<double>& hostMs)
{
    checkCuda(cudaEventRecord(start.get(), stream), "cudaEventRecord before " + step);
    auto const issued = std::chrono::steady_clock::now();
    bool const enqueued = context.enqueueV3(stream);
    auto const returned = std::chrono::steady_clock::now();
    check(enqueued, kEXIT_ENGINE_FAILED, "enqueueV3 of " + step + " failed" + logger.lastError());
    checkCuda(cudaEventRecord(stop.get(), stream), "cudaEventRecord after " + step);
    checkCuda(cudaEventSynchronize(stop.get()), step + " (cudaEventSynchronize)");
    float ms = 0.0F;
    checkCuda(cudaEventElapsedTime(&ms, start.get(), stop.get()), "cudaEventElapsedTime of " + step);
    deviceMs.push_back(ms);
    hostMs.push_back(std::chrono::duration<double, std::milli>(returned - issued).count());
}

nvinfer1::Dims dims(std::vector<int64_t> const& sizes)
{
    nvinfer1::Dims d{};
    d.nbDims = static_cast<int32_t>(sizes.size());
    std::copy(sizes.begin(), sizes.end(), d.d);
    return d;
}

char const* typeName(nvinfer1::DataType type)
{
    switch (type)
    {
    case nvinfer1::DataType::kFLOAT: return "float32";
    case nvinfer1::DataType::kHALF: return "float16";
    case nvinfer1::DataType::kINT64: return "int64";
    case nvinfer1::DataType::kINT32: return "int32";
    case nvinfer1::DataType::kINT8: return "int8";
    case nvinfer1::DataType::kUINT8: return "uint8";
    case nvinfer1::DataType::kBOOL: return "bool";
    case nvinfer1::DataType::kBF16: return "bfloat16";
    default: return "another type";
    }
}

//! What the program needs of the engine: X's type and F, and optimization profile 0's bounds for N and E.
struct EngineLayout
{
    bool half;
    int64_t features;
    nvinfer1::Dims nodes[3]; // X's min, opt, max
    nvinfer1::Dims edges[3]; // idx's
};

EngineLayout inspectEngine(nvinfer1::ICudaEngine const& engine, std::string const& path)
{
    using nvinfer1::DataType;
    std::string found;
    bool expected = engine.getNbIOTensors() == 4;
    for (int32_t i = 0; i < engine.getNbIOTensors(); ++i)
    {
        std::string const name = engine.getIOTensorName(i);
        bool const input = engine.getTensorIOMode(name.c_str()) == nvinfer1::TensorIOMode::kINPUT;
        found += (found.empty() ? "" : ", ") + std::string(input ? "input " : "output ") + name;
        expected = expected && (input ? name == kSTATE || name == kSOURCE || name == kINDEX : name == kSTATE_OUT);
    }
    std::string const notState = "--engine " + path + " is not a --steps state engine of aliased_io_plugin.py: ";
    check(expected, kEXIT_BAD_INPUT, notState + "it has " + found + " (expected inputs X, src, idx and output X_out)");
    DataType const type = engine.getTensorDataType(kSTATE);
    check((type == DataType::kFLOAT || type == DataType::kHALF) && engine.getTensorDataType(kSOURCE) == type
            && engine.getTensorDataType(kSTATE_OUT) == type && engine.getTensorDataType(kINDEX) == DataType::kINT64,
        kEXIT_BAD_INPUT,
        notState + "X is " + typeName(type) + ", src " + typeName(engine.getTensorDataType(kSOURCE)) + ", idx "
            + typeName(engine.getTensorDataType(kINDEX)) + " (expected float32 or float16 X and src, int64 idx)");
    nvinfer1::Dims const x = engine.getTensorShape(kSTATE);
    nvinfer1::Dims const src = engine.getTensorShape(kSOURCE);
    check(x.nbDims == 2 && src.nbDims == 2 && engine.getTensorShape(kINDEX).nbDims == 1 && x.d[1] > 0
            && src.d[1] == x.d[1],
        kEXIT_BAD_INPUT, notState + "expected X [N, F], src [E, F] and idx [E] with a fixed F");
    check(engine.getNbOptimizationProfiles() >= 1, kEXIT_BAD_INPUT, notState + "it has no optimization profile");
    EngineLayout layout{type == DataType::kHALF, x.d[1], {}, {}};
    nvinfer1::OptProfileSelector const selectors[]
        = {nvinfer1::OptProfileSelector::kMIN, nvinfer1::OptProfileSelector::kOPT, nvinfer1::OptProfileSelector::kMAX};
    for (int i = 0; i < 3; ++i)
    {
        layout.nodes[i] = engine.getProfileShape(kSTATE, 0, selectors[i]);
        layout.edges[i] = engine.getProfileShape(kINDEX, 0, selectors[i]);
    }
    return layout;
}

//! The requested size, or the profile's opt when none was given; in [min, max] of the profile.
int64_t sizeInProfile(int64_t requested, char const* option, char const* what, nvinfer1::Dims const (&profile)[3])
{
    int64_t const size = requested > 0 ? requested : profile[1].d[0];
    check(size >= profile[0].d[0] && size <= profile[2].d[0], kEXIT_BAD_INPUT,
        std::string(option) + " " + withCommas(size) + " is outside the engine's profile: " + what + " from "
            + withCommas(profile[0].d[0]) + " to " + withCommas(profile[2].d[0]));
    return size;
}

std::string aliasingLine(nvinfer1::ICudaEngine const& engine)
{
#if ALIASED_IO_HAS_ALIASED_INPUT_TENSOR
    char const* aliased = engine.getAliasedInputTensor(kSTATE_OUT);
    std::string const reported = aliased ? "getAliasedInputTensor -> \"" + std::string(aliased) + "\""
                                         : "getAliasedInputTensor -> null (TensorRT's answer for plugin aliasing)";
#else
    static_cast<void>(engine);
    std::string const reported = "getAliasedInputTensor is not available in the TensorRT "
        + versionString(NV_TENSORRT_VERSION) + " headers this program was built with (it exists from 10.15)";
#endif
    return "Engine output \"X_out\": " + reported
        + "; X_out is bound at X's address, so every execution leaves the state in X and nothing is copied back";
}

//! Host rows in the engine's type: float32, or float16 (the values are exact in both).
struct HostValues
{
    bool half;
    std::vector<float> f32;
    std::vector<__half> f16;

    void resize(size_t size)
    {
        f16.resize(half ? size : 0);
        f32.resize(half ? 0 : size);
    }
    void assign(std::vector<double> const& values)
    {
        resize(values.size());
        for (size_t i = 0; i < values.size(); ++i)
        {
            if (half)
            {
                f16[i] = __float2half(static_cast<float>(values[i]));
            }
            else
            {
                f32[i] = static_cast<float>(values[i]);
            }
        }
    }
    void* data()
    {
        return half ? static_cast<void*>(f16.data()) : static_cast<void*>(f32.data());
    }
    double at(size_t i) const
    {
        return half ? static_cast<double>(__half2float(f16[i])) : static_cast<double>(f32[i]);
    }
};

//! The runtime and the deserialized --engine, checked in this order: the file, libnvinfer's version, the runtime,
//! a CUDA GPU, deserialization (`expected` says what engine was expected).
struct LoadedEngine
{
    int32_t library;
    std::unique_ptr<nvinfer1::IRuntime> runtime;
    std::unique_ptr<nvinfer1::ICudaEngine> engine;
};

LoadedEngine loadEngine(std::string const& path, Logger& logger, std::string const& expected)
{
    std::vector<char> const blob = readEngineFile(path);
    int32_t const library = getInferLibVersion();
    check(library >= NV_TENSORRT_VERSION, kEXIT_MISSING_DEPENDENCY, "libnvinfer is TensorRT " + versionString(library)
            + ", older than the headers " + versionString(NV_TENSORRT_VERSION) + " this program was built with");
    std::unique_ptr<nvinfer1::IRuntime> runtime{nvinfer1::createInferRuntime(logger)};
    check(runtime != nullptr, kEXIT_MISSING_DEPENDENCY,
        "no TensorRT runtime: createInferRuntime returned null (libnvinfer " + versionString(library)
            + logger.lastError()
            + "); install TensorRT, the release that saved the engine, on a machine with an NVIDIA GPU");
    int devices = 0;
    checkCuda(cudaGetDeviceCount(&devices), "no CUDA GPU or driver: cudaGetDeviceCount", kEXIT_MISSING_DEPENDENCY);
    check(devices > 0, kEXIT_MISSING_DEPENDENCY, "no CUDA GPU: cudaGetDeviceCount found none");
    std::unique_ptr<nvinfer1::ICudaEngine> engine{runtime->deserializeCudaEngine(blob.data(), blob.size())};
    check(engine != nullptr, kEXIT_BAD_INPUT, "--engine " + path + " could not be deserialized by TensorRT "
            + versionString(library) + logger.lastError() + " (expected " + expected
            + " saved by the same TensorRT release)");
    return LoadedEngine{library, std::move(runtime), std::move(engine)};
}

int runEngine(Options const& o)
{
    Logger logger(o.verbose);
    LoadedEngine loaded = loadEngine(o.engine, logger, "a --plugin aot --steps engine");
    int32_t const library = loaded.library;
    std::unique_ptr<nvinfer1::ICudaEngine> const& engine = loaded.engine;

    EngineLayout const layout = inspectEngine(*engine, o.engine);
    Problem const p{sizeInProfile(o.nodes, "--nodes", "N", layout.nodes), layout.features, o.steps,
        sizeInProfile(o.batchEdges, "--batch_edges", "E", layout.edges), static_cast<uint64_t>(o.seed)};
    check(p.steps * p.batchEdges <= kMAX_RANDOM_EDGES, kEXIT_BAD_INPUT, "--steps " + withCommas(p.steps) + " with "
            + withCommas(p.batchEdges) + " edges per batch adds more than the limit of " + withCommas(kMAX_RANDOM_EDGES)
            + " edges");
    std::vector<double> const features = nodeFeatures(p);
    Reference reference;
    if (o.validate || layout.half) // the float16 range check needs the sums too
    {
        reference = computeReference(p, features);
    }
    if (layout.half)
    {
        checkHalfRange(reference, p);
    }

    std::printf("Setting seed to: %lld\n", static_cast<long long>(o.seed));
    std::printf("Engine: %s (TensorRT %s runtime): X [N, %lld] %s, profile N %s..%s, E %s..%s\n", o.engine.c_str(),
        versionString(library).c_str(), static_cast<long long>(p.features), layout.half ? "float16" : "float32",
        withCommas(layout.nodes[0].d[0]).c_str(), withCommas(layout.nodes[2].d[0]).c_str(),
        withCommas(layout.edges[0].d[0]).c_str(), withCommas(layout.edges[2].d[0]).c_str());
    std::printf("%s\n", aliasingLine(*engine).c_str());

    auto trtCheck = [&](bool ok, std::string const& what) {
        check(ok, kEXIT_ENGINE_FAILED, what + " failed" + logger.lastError());
    };
    std::unique_ptr<nvinfer1::IExecutionContext> context{engine->createExecutionContext()};
    trtCheck(context != nullptr, "createExecutionContext");
    size_t const element = layout.half ? sizeof(__half) : sizeof(float);
    size_t const stateBytes = static_cast<size_t>(p.nodes * p.features) * element;
    size_t const srcBytes = static_cast<size_t>(p.batchEdges * p.features) * element;
    size_t const idxBytes = static_cast<size_t>(p.batchEdges) * sizeof(int64_t);
    DeviceMemory const state = deviceMemory(stateBytes, "X");
    DeviceMemory const src = deviceMemory(srcBytes, "src");
    DeviceMemory const idx = deviceMemory(idxBytes, "idx");
    cudaStream_t created = nullptr;
    checkCuda(cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    Stream const stream(created, cudaStreamDestroy);
    Event const start = event();
    Event const stop = event();

    trtCheck(context->setInputShape(kSTATE, dims({p.nodes, p.features})), "setInputShape(X)");
    trtCheck(context->setInputShape(kSOURCE, dims({p.batchEdges, p.features})), "setInputShape(src)");
    trtCheck(context->setInputShape(kINDEX, dims({p.batchEdges})), "setInputShape(idx)");
    nvinfer1::Dims const out = context->getTensorShape(kSTATE_OUT);
    trtCheck(out.nbDims == 2 && out.d[0] == p.nodes && out.d[1] == p.features, "X_out's shape [N, F]");
    trtCheck(context->setTensorAddress(kSTATE, state.get()), "setTensorAddress(X)");
    trtCheck(context->setTensorAddress(kSOURCE, src.get()), "setTensorAddress(src)");
    trtCheck(context->setTensorAddress(kINDEX, idx.get()), "setTensorAddress(idx)");
    trtCheck(context->setTensorAddress(kSTATE_OUT, state.get()), "setTensorAddress(X_out) at X's address");

    std::vector<int64_t> sources;
    std::vector<int64_t> targets;
    std::vector<double> rows(static_cast<size_t>(p.batchEdges * p.features), 0.0);
    HostValues hostSrc{layout.half, {}, {}};
    auto upload = [&](int64_t step) {
        hostSrc.assign(rows);
        checkCuda(cudaMemcpyAsync(src.get(), hostSrc.data(), srcBytes, cudaMemcpyHostToDevice, stream.get()),
            "upload of src for step " + std::to_string(step));
        checkCuda(cudaMemcpyAsync(idx.get(), targets.data(), idxBytes, cudaMemcpyHostToDevice, stream.get()),
            "upload of idx for step " + std::to_string(step));
    };
    checkCuda(cudaMemsetAsync(state.get(), 0, stateBytes, stream.get()), "cudaMemsetAsync of X"); // 0.0 in both types
    edgeBatch(p, 0, sources, targets);
    upload(0);
    for (int i = 0; i < kWARMUP_EXECUTIONS; ++i) // untimed, adding zeros: the kernels' loading stays out of the steps
    {
        trtCheck(context->enqueueV3(stream.get()), "enqueueV3 (warm-up)");
    }
    checkCuda(cudaStreamSynchronize(stream.get()), "the warm-up (cudaStreamSynchronize)");

    std::vector<double> deviceMs;
    std::vector<double> hostMs;
    for (int64_t k = 0; k < p.steps; ++k)
    {
        std::string const step = "step " + std::to_string(k + 1);
        edgeBatch(p, k, sources, targets);
        for (size_t j = 0; j < sources.size(); ++j)
        {
            size_t const width = static_cast<size_t>(p.features);
            std::copy_n(&features[static_cast<size_t>(sources[j]) * width], width, &rows[j * width]);
        }
        upload(k + 1);
        timedStep(*context, stream.get(), start, stop, step, logger, deviceMs, hostMs);
    }
    HostValues hostState{layout.half, {}, {}};
    hostState.resize(static_cast<size_t>(p.nodes * p.features));
    checkCuda(cudaMemcpyAsync(hostState.data(), state.get(), stateBytes, cudaMemcpyDeviceToHost, stream.get()),
        "download of X");
    checkCuda(cudaStreamSynchronize(stream.get()), "download of X (cudaStreamSynchronize)");
    std::vector<double> finalState(static_cast<size_t>(p.nodes * p.features));
    for (size_t i = 0; i < finalState.size(); ++i)
    {
        finalState[i] = hostState.at(i);
    }

    std::printf("Steps: %lld executions on one state buffer X [%lld, %lld], each adding a new batch of %s random edges "
                "(after %d warm-up executions that add zeros)\n",
        static_cast<long long>(p.steps), static_cast<long long>(p.nodes), static_cast<long long>(p.features),
        withCommas(p.batchEdges).c_str(), kWARMUP_EXECUTIONS);
    std::printf("Per-step engine time (CUDA events around enqueueV3): %s\n", describeTimes(deviceMs).c_str());
    std::sort(hostMs.begin(), hostMs.end());
    std::printf("Host time to issue one step: median %s (enqueueV3; the AOT plugin runs no Python)\n",
        formatDuration(median(hostMs)).c_str());
    std::printf("\nFinal state X after %lld steps:\n", static_cast<long long>(p.steps));
    printState(finalState, p);
    if (!o.validate)
    {
        return kEXIT_OK;
    }
    std::printf("\n");
    return validate(finalState, reference, p, layout.half) ? kEXIT_OK : kEXIT_VALIDATION_FAILED;
}

// ---- Any engine of a model of one's own, run in place (--inputs): aliased_io_bindings.h and npy.h ----------------

namespace fs = std::filesystem;
using Arrays = std::map<std::string, npy::Array>; // by tensor name
using Sizes = std::map<std::string, int64_t>;     // a named dynamic dimension's size, as the inputs give it

std::string shapeText(std::vector<int64_t> const& shape)
{
    std::string text;
    for (size_t i = 0; i < shape.size(); ++i)
    {
        text += (i ? ", " : "") + std::to_string(shape[i]);
    }
    return "[" + text + "]";
}

std::string dimsText(std::vector<std::string> const& dims)
{
    std::string text;
    for (size_t i = 0; i < dims.size(); ++i)
    {
        text += (i ? "," : "") + dims[i];
    }
    return "[" + text + "]";
}

std::string described(aliased_io::TensorDescription const& t)
{
    return t.name + " " + t.dtype + " " + dimsText(t.dims);
}

bool isState(aliased_io::EngineDescription const& d, std::string const& input)
{
    return std::any_of(d.aliases.begin(), d.aliases.end(), [&](auto const& alias) { return alias.second == input; });
}

npy::Array readArray(std::string const& path)
{
    try
    {
        return npy::read(path);
    }
    catch (npy::Error const& error)
    {
        throw Failure{kEXIT_BAD_INPUT, error.what()};
    }
}

//! `array` (read from `path`) against the description of its tensor: dtype, rank, each static dimension, and each
//! named dynamic dimension one size wherever it appears (`sizes`).
void checkArray(aliased_io::TensorDescription const& t, npy::Array const& array, std::string const& path, Sizes& sizes,
    char const* kind = "input")
{
    std::string const problem
        = path + ": " + array.dtype + " " + shapeText(array.shape) + ", the engine's " + kind + " " + described(t);
    check(array.dtype == t.dtype && array.shape.size() == t.dims.size(), kEXIT_BAD_INPUT, problem);
    for (size_t axis = 0; axis < t.dims.size(); ++axis)
    {
        std::string const& dim = t.dims[axis];
        bool const fixed = dim.find_first_not_of("0123456789") == std::string::npos;
        check(!fixed || std::to_string(array.shape[axis]) == dim, kEXIT_BAD_INPUT, problem);
        if (!fixed && dim != "?")
        {
            auto const known = sizes.emplace(dim, array.shape[axis]).first;
            check(known->second == array.shape[axis], kEXIT_BAD_INPUT,
                problem + ": dimension " + dim + " is " + std::to_string(known->second) + " elsewhere");
        }
    }
}

//! A .npy file of `folder` that is not in `known` is refused (`why`), so that a misnamed file is not left unused.
void refuseOthers(std::string const& folder, Arrays const& known, std::string const& why)
{
    std::error_code error;
    for (fs::directory_iterator entry(folder, error), end; !error && entry != end; entry.increment(error))
    {
        fs::path const& file = entry->path();
        check(file.extension() != ".npy" || known.count(file.stem().string()), kEXIT_BAD_INPUT, file.string() + why);
    }
    check(!error, kEXIT_BAD_INPUT, "cannot list " + folder + ": " + error.message());
}

//! A step_ folder of `folder` other than step_0 to step_<count - 1> is refused: the steps are numbered from 0 without
//! a gap, and a step after a gap (or a misnamed one) is not left unread.
void refuseStepGaps(std::string const& folder, int64_t count)
{
    std::error_code error;
    for (fs::directory_iterator entry(folder, error), end; !error && entry != end; entry.increment(error))
    {
        std::string const name = entry->path().filename().string();
        if (name.rfind("step_", 0) != 0 || !fs::is_directory(entry->path()))
        {
            continue;
        }
        std::string const number = name.substr(5);
        bool const counted = !number.empty() && number.size() < 8
            && number.find_first_not_of("0123456789") == std::string::npos && (number == "0" || number[0] != '0')
            && std::stoll(number) < count;
        check(counted, kEXIT_BAD_INPUT, "--inputs " + folder + ": " + name + " is not one of step_0 to step_"
                + std::to_string(count - 1) + ": the step_ folders are numbered from 0 without a gap");
    }
    check(!error, kEXIT_BAD_INPUT, "cannot list " + folder + ": " + error.message());
}

//! The inputs of one step from `folder`: every input (`states`), or the inputs that are no state.
Arrays readSet(aliased_io::EngineDescription const& d, std::string const& folder, bool states, Sizes& sizes)
{
    Arrays set;
    for (aliased_io::TensorDescription const& input : d.inputs)
    {
        std::string const path = folder + "/" + input.name + ".npy";
        if (!states && isState(d, input.name))
        {
            check(!fs::exists(path), kEXIT_BAD_INPUT, path + ": " + input.name + " is a state (an output is written "
                    "into its memory): it is read once, from step_0, and stays in place");
            continue;
        }
        check(fs::is_regular_file(path), kEXIT_BAD_INPUT, "--inputs: no file " + path + " for input " + described(input));
        npy::Array array = readArray(path);
        checkArray(input, array, path, sizes);
        set.emplace(input.name, std::move(array));
    }
    refuseOthers(folder, set, " is not an input of the engine (see its description)");
    return set;
}

//! The inputs of each step, where they were read, and the number of executions.
struct ModelInputs
{
    std::vector<Arrays> sets; // [0]: every input; one set per step, or the same set for every step
    std::vector<std::string> folders;
    int64_t steps;
    Sizes sizes;
};

double valueAt(npy::Array const& a, size_t i)
{
    char const* at = a.data.data() + i * npy::itemSize(a.dtype);
    if (a.dtype == "float32" || a.dtype == "int32")
    {
        int32_t word;
        std::memcpy(&word, at, 4);
        float value;
        std::memcpy(&value, at, 4);
        return a.dtype == "int32" ? static_cast<double>(word) : static_cast<double>(value);
    }
    if (a.dtype == "float16")
    {
        __half value;
        std::memcpy(&value, at, 2);
        return static_cast<double>(__half2float(value));
    }
    int64_t value;
    std::memcpy(&value, at, 8);
    return static_cast<double>(value);
}

//! The bounds of row `row` (axis 0) of index `index` (-1: all of it): the row's own records and the whole index's,
//! or every record of the index where none is the row's own (onnx_path IndexBound.of_row).
std::vector<aliased_io::IndexRows> boundsOf(aliased_io::EngineDescription const& d, std::string const& index, int64_t row)
{
    std::vector<aliased_io::IndexRows> all;
    std::vector<aliased_io::IndexRows> chosen;
    bool own = false;
    for (aliased_io::IndexRows const& rows : d.indexRows)
    {
        if (rows.index == index)
        {
            all.push_back(rows);
            own = own || (row >= 0 && rows.row == row);
            if (row < 0 || rows.row < 0 || rows.row == row)
            {
                chosen.push_back(rows);
            }
        }
    }
    return own || row < 0 ? chosen : all;
}

//! Whether any record of index `index` bounds one row of it only.
bool boundsRows(aliased_io::EngineDescription const& d, std::string const& index)
{
    return std::any_of(d.indexRows.begin(), d.indexRows.end(),
        [&](aliased_io::IndexRows const& rows) { return rows.index == index && rows.row >= 0; });
}

//! The values `bounds` allow, [low, limit), and what they are: the fewest rows of any, from -rows where every one
//! wraps negative values itself; an own_max index: [0, INT64_MAX).
struct Range
{
    int64_t low;
    int64_t limit;
    std::string what;
};

Range rangeOf(std::vector<aliased_io::IndexRows> const& bounds, ModelInputs const& in)
{
    Range range{0, INT64_MAX, ""};
    bool wraps = true;
    for (aliased_io::IndexRows const& rows : bounds)
    {
        if (rows.ownMax)
        {
            return {0, INT64_MAX, "its rows are its own largest value + 1"};
        }
        int64_t const size = rows.input.empty() ? rows.rows : in.sets[0].at(rows.input).shape.at(rows.axis);
        if (size < range.limit)
        {
            range.limit = size;
            range.what = rows.input.empty() ? "the " + std::to_string(size) + " rows it indexes"
                                            : "dimension " + std::to_string(rows.axis) + " of input " + rows.input
                    + " that it indexes";
        }
        wraps = wraps && rows.wraps;
    }
    range.low = wraps ? -range.limit : 0;
    range.what += wraps ? " (the model wraps a negative value into them)" : "";
    return range;
}

//! Every index input's values within its bounds (the plugin writes row idx[e]): each row of an index whose
//! records bound rows of it (edge_index [2, E] of two node types) in its own.
void checkIndices(aliased_io::EngineDescription const& d, ModelInputs const& in)
{
    std::vector<std::string> checked;
    for (aliased_io::IndexRows const& record : d.indexRows)
    {
        if (std::find(checked.begin(), checked.end(), record.index) != checked.end())
        {
            continue;
        }
        checked.push_back(record.index);
        bool const byRow = boundsRows(d, record.index);
        for (size_t k = 0; k < in.sets.size(); ++k)
        {
            auto const found = in.sets[k].find(record.index);
            if (found == in.sets[k].end())
            {
                continue;
            }
            npy::Array const& index = found->second;
            size_t const elements = static_cast<size_t>(index.elements());
            size_t const rows = byRow && !index.shape.empty() ? static_cast<size_t>(index.shape[0]) : 1;
            size_t const perRow = rows == 0 ? 0 : elements / rows;
            for (size_t r = 0; r < rows; ++r)
            {
                Range const range = rangeOf(boundsOf(d, record.index, byRow ? static_cast<int64_t>(r) : -1), in);
                for (size_t i = r * perRow; i < (r + 1) * perRow; ++i)
                {
                    double const value = valueAt(index, i);
                    check(value >= static_cast<double>(range.low) && value < static_cast<double>(range.limit),
                        kEXIT_BAD_INPUT,
                        in.folders[k] + "/" + record.index + ".npy: element " + std::to_string(i)
                            + (byRow ? " (row " + std::to_string(r) + ")" : "") + " is "
                            + std::to_string(static_cast<long long>(value)) + ", "
                            + (range.limit == INT64_MAX ? "negative (" + range.what + ")"
                                                        : "outside [" + std::to_string(range.low) + ", "
                                    + std::to_string(range.limit) + "), " + range.what));
                }
            }
        }
    }
}

ModelInputs readInputs(Options const& o, aliased_io::EngineDescription const& d)
{
    check(fs::is_directory(o.inputs), kEXIT_BAD_INPUT, "--inputs " + o.inputs + ": not a folder of .npy files");
    ModelInputs in{{}, {}, o.stepsGiven ? o.steps : 1, {}};
    if (fs::is_directory(o.inputs + "/step_0"))
    {
        refuseOthers(o.inputs, {}, " lies beside the step_ folders: put each step's inputs in its step_K folder");
        int64_t count = 0;
        while (count < kMAX_STEPS && fs::is_directory(o.inputs + "/step_" + std::to_string(count)))
        {
            ++count;
        }
        refuseStepGaps(o.inputs, count);
        in.steps = o.stepsGiven ? o.steps : count;
        check(in.steps <= count, kEXIT_BAD_INPUT, "--steps " + std::to_string(in.steps) + ", but --inputs " + o.inputs
                + " holds the inputs of " + std::to_string(count) + " step(s) (step_0 to step_"
                + std::to_string(count - 1) + ")");
        for (int64_t k = 0; k < in.steps; ++k)
        {
            in.folders.push_back(o.inputs + "/step_" + std::to_string(k));
            in.sets.push_back(readSet(d, in.folders.back(), k == 0, in.sizes));
            for (auto const& [name, array] : in.sets.back())
            {
                check(array.shape == in.sets[0].at(name).shape, kEXIT_BAD_INPUT,
                    in.folders.back() + "/" + name + ".npy: " + shapeText(array.shape) + ", but "
                        + shapeText(in.sets[0].at(name).shape) + " in step_0; every step keeps the first one's shapes");
            }
        }
    }
    else
    {
        in.folders.push_back(o.inputs);
        in.sets.push_back(readSet(d, o.inputs, true, in.sizes));
    }
    checkIndices(d, in);
    for (aliased_io::ProfileShapes const& p : d.profile)
    {
        std::vector<int64_t> const& shape = in.sets[0].at(p.input).shape;
        bool inside = shape.size() == p.shapes[0].size();
        for (size_t axis = 0; inside && axis < shape.size(); ++axis)
        {
            inside = p.shapes[0][axis] <= shape[axis] && shape[axis] <= p.shapes[2][axis];
        }
        check(inside, kEXIT_BAD_INPUT, "--inputs: input " + p.input + " " + shapeText(shape)
                + " is outside the engine's profile " + shapeText(p.shapes[0]) + ".." + shapeText(p.shapes[2])
                + " (its description); build the engine for these shapes");
    }
    return in;
}

//! --expected: DIR/NAME.npy for every output, each of its dtype and shape (dimensions named as the inputs').
Arrays readExpected(Options const& o, aliased_io::EngineDescription const& d, Sizes sizes)
{
    check(fs::is_directory(o.expected), kEXIT_BAD_INPUT, "--expected " + o.expected + ": not a folder of .npy files");
    Arrays expected;
    for (aliased_io::TensorDescription const& output : d.outputs)
    {
        std::string const path = o.expected + "/" + output.name + ".npy";
        check(fs::is_regular_file(path), kEXIT_BAD_INPUT, "--expected: no file " + path + " for output "
                + described(output));
        npy::Array array = readArray(path);
        checkArray(output, array, path, sizes, "output");
        expected.emplace(output.name, std::move(array));
    }
    refuseOthers(o.expected, expected, " is not an output of the engine (see its description)");
    return expected;
}

//! --save_outputs: a new folder in an existing one, or an empty folder (checked before any work).
void checkOutputFolder(std::string const& path)
{
    std::error_code error;
    if (fs::exists(path, error))
    {
        check(fs::is_directory(path, error) && fs::is_empty(path, error), kEXIT_BAD_INPUT,
            "--save_outputs " + path + ": not an empty folder; give a new or an empty folder");
        return;
    }
    fs::path const parent = fs::absolute(fs::path(path), error).parent_path();
    check(fs::is_directory(parent, error), kEXIT_BAD_INPUT,
        "--save_outputs " + path + ": the folder " + parent.string() + " does not exist");
}

//! One output against its expected array: integers exactly, floats within 1e-4 (float32) or 1e-2 (float16) of the
//! expected output's largest magnitude (onnx_path/run.py compare_output, the rule of --validate --onnx); NaN fails.
//! Appends its line to `lines`.
bool compareOutput(std::string const& name, npy::Array const& actual, npy::Array const& expected,
    std::string const& path, std::vector<std::string>& lines)
{
    std::string const head = "Output " + name + " against " + path + ": ";
    if (actual.shape != expected.shape)
    {
        lines.push_back(head + "shape " + shapeText(actual.shape) + ", the expected " + shapeText(expected.shape));
        return false;
    }
    bool const exact = actual.dtype != "float32" && actual.dtype != "float16";
    double largest = 0.0;
    double magnitude = 0.0;
    std::vector<double> errors(static_cast<size_t>(actual.elements()));
    for (size_t i = 0; i < errors.size(); ++i)
    {
        double const want = valueAt(expected, i);
        errors[i] = std::fabs(valueAt(actual, i) - want);
        largest = std::max(largest, std::isnan(errors[i]) ? INFINITY : errors[i]);
        magnitude = std::max(magnitude, std::fabs(want));
    }
    double const relative = actual.dtype == "float32" ? 1e-4 : 1e-2;
    double const tolerance = exact ? 0.0 : relative * magnitude;
    bool const ok = std::all_of(errors.begin(), errors.end(), [&](double e) { return e <= tolerance; });
    char line[160];
    std::snprintf(line, sizeof(line), "largest absolute error %.3g, tolerance %.3g (", largest, tolerance);
    char how[96];
    if (exact)
    {
        std::snprintf(how, sizeof(how), "exact: integers)");
    }
    else
    {
        std::snprintf(how, sizeof(how), "%g of its largest magnitude %.3g)", relative, magnitude);
    }
    lines.push_back(head + line + how);
    return ok;
}

void printOutput(std::string const& name, npy::Array const& a, std::string const& when)
{
    std::printf("Output %s %s %s%s:\n", name.c_str(), a.dtype.c_str(), shapeText(a.shape).c_str(), when.c_str());
    std::vector<double> values(static_cast<size_t>(a.elements()));
    for (size_t i = 0; i < values.size(); ++i)
    {
        values[i] = valueAt(a, i);
    }
    int64_t const rows = a.shape.empty() ? 1 : a.shape[0];
    printRows(values, rows, rows == 0 ? 0 : a.elements() / rows, "output");
}

//! The end of a model run: --expected (the verdict first, as the Python runs print it), then --save_outputs,
//! written only when the run passed.
int finishModel(Options const& o, Arrays const& finals, Arrays const& expected)
{
    int status = kEXIT_OK;
    if (!o.expected.empty())
    {
        std::vector<std::string> lines;
        bool ok = true;
        for (auto const& [name, want] : expected)
        {
            auto const found = finals.find(name);
            if (found == finals.end())
            {
                lines.push_back("Output " + name + ": not computed by --plan (no execution), not compared");
                continue;
            }
            ok = compareOutput(name, found->second, want, o.expected + "/" + name + ".npy", lines) && ok;
        }
        std::printf("\nValidation against reference %s!\n", ok ? "successful" : "failed");
        for (std::string const& line : lines)
        {
            std::printf("%s\n", line.c_str());
        }
        status = ok ? kEXIT_OK : kEXIT_VALIDATION_FAILED;
    }
    if (!o.saveOutputs.empty() && status == kEXIT_OK)
    {
        std::error_code error;
        fs::create_directory(o.saveOutputs, error);
        check(!error, kEXIT_BAD_INPUT, "--save_outputs " + o.saveOutputs + ": " + error.message());
        for (auto const& [name, array] : finals)
        {
            try
            {
                npy::write(o.saveOutputs + "/" + name + ".npy", array);
            }
            catch (npy::Error const& failure)
            {
                throw Failure{kEXIT_BAD_INPUT, failure.what()};
            }
        }
        std::printf("Outputs saved to %s (%zu .npy file(s))\n", o.saveOutputs.c_str(), finals.size());
    }
    return status;
}

//! The engine's I/O tensors against its description: the same names as inputs and as outputs, dtypes, ranks and
//! static dimensions (a dynamic one, -1 in the engine, is named in the description).
void checkEngineTensors(nvinfer1::ICudaEngine const& engine, aliased_io::EngineDescription const& d, Options const& o)
{
    std::string const mismatch = "the engine description " + o.description + " does not match --engine " + o.engine
        + ": ";
    int32_t const count = engine.getNbIOTensors();
    check(static_cast<size_t>(count) == d.inputs.size() + d.outputs.size(), kEXIT_BAD_INPUT,
        mismatch + "the engine has " + std::to_string(count) + " I/O tensors, the description "
            + std::to_string(d.inputs.size() + d.outputs.size()));
    for (int32_t i = 0; i < count; ++i)
    {
        char const* name = engine.getIOTensorName(i);
        bool const input = engine.getTensorIOMode(name) == nvinfer1::TensorIOMode::kINPUT;
        aliased_io::TensorDescription const* t = input ? d.input(name) : d.output(name);
        check(t != nullptr, kEXIT_BAD_INPUT,
            mismatch + "engine " + (input ? "input " : "output ") + name + " is not described as one");
        nvinfer1::Dims const dims = engine.getTensorShape(name);
        bool same = typeName(engine.getTensorDataType(name)) == t->dtype
            && static_cast<size_t>(dims.nbDims) == t->dims.size();
        for (int32_t axis = 0; same && axis < dims.nbDims; ++axis)
        {
            std::string const& dim = t->dims[static_cast<size_t>(axis)];
            same = dim.find_first_not_of("0123456789") != std::string::npos || std::to_string(dims.d[axis]) == dim;
        }
        std::vector<int64_t> const shape(dims.d, dims.d + std::max(dims.nbDims, 0));
        check(same, kEXIT_BAD_INPUT, mismatch + name + " is " + typeName(engine.getTensorDataType(name)) + " "
                + shapeText(shape) + " in the engine, " + t->dtype + " " + dimsText(t->dims) + " in the description");
    }
}

//! Which buffer each tensor is bound to, as runModel binds them (aliased_io::bindAliasedOutputs).
void printBindings(aliased_io::EngineDescription const& d, ModelInputs const& in)
{
    std::printf("Bindings (aliased_io_bindings.h):\n");
    for (aliased_io::TensorDescription const& input : d.inputs)
    {
        npy::Array const& a = in.sets[0].at(input.name);
        std::printf("  input %s %s %s from %s/%s.npy: a buffer of its own (%s bytes)%s\n", input.name.c_str(),
            a.dtype.c_str(), shapeText(a.shape).c_str(), in.folders[0].c_str(), input.name.c_str(),
            withCommas(static_cast<int64_t>(a.data.size())).c_str(),
            isState(d, input.name) ? ", uploaded once: a state" : in.sets.size() > 1 ? ", uploaded each step" : "");
    }
    for (aliased_io::TensorDescription const& output : d.outputs)
    {
        std::string const source = d.aliasedInput(output.name);
        std::printf("  output %s %s %s: %s\n", output.name.c_str(), output.dtype.c_str(), dimsText(output.dims).c_str(),
            source.empty() ? "a buffer of its own"
                           : ("bound at input " + source + "'s address (written into its memory, in place)").c_str());
    }
}

int runModel(Options const& o)
{
    aliased_io::EngineDescription description;
    try
    {
        description = aliased_io::readEngineDescription(o.description);
    }
    catch (aliased_io::DescriptionError const& error)
    {
        throw Failure{kEXIT_BAD_INPUT, error.what()};
    }
    for (auto const* tensors : {&description.inputs, &description.outputs})
    {
        for (aliased_io::TensorDescription const& t : *tensors)
        {
            check(npy::itemSize(t.dtype) > 0, kEXIT_BAD_INPUT, "the engine description " + o.description + ": "
                    + described(t) + ": this program reads and writes float32, float16, int64 and int32 .npy only");
        }
    }
    ModelInputs const in = readInputs(o, description);
    Arrays const expected = o.expected.empty() ? Arrays{} : readExpected(o, description, in.sizes);
    if (!o.saveOutputs.empty())
    {
        checkOutputFolder(o.saveOutputs);
    }
    std::printf("Engine description: %s (%s plugin): %zu input(s), %zu output(s), %zu written into an input's memory\n",
        o.description.c_str(), description.plugin.c_str(), description.inputs.size(), description.outputs.size(),
        description.aliases.size());
    std::printf("Inputs: %s, %s\n", o.inputs.c_str(),
        in.sets.size() > 1 ? ("one set per step (" + std::to_string(in.steps) + " steps)").c_str()
                           : "the same set for every step");
    printBindings(description, in);
    if (o.plan)
    {
        std::printf("--plan: no TensorRT runtime, no GPU, no execution: after 0 executions the states are their "
                    "inputs\n");
        Arrays finals;
        for (auto const& [output, input] : description.aliases)
        {
            finals.emplace(output, in.sets[0].at(input));
        }
        return finishModel(o, finals, expected);
    }

    Logger logger(o.verbose);
    LoadedEngine const loaded = loadEngine(o.engine, logger, "an engine of aliased_io_plugin.py --onnx ... --save_engine");
    nvinfer1::ICudaEngine& engine = *loaded.engine;
    checkEngineTensors(engine, description, o);
    auto trtCheck = [&](bool ok, std::string const& what) {
        check(ok, kEXIT_ENGINE_FAILED, what + " failed" + logger.lastError());
    };
    std::unique_ptr<nvinfer1::IExecutionContext> context{engine.createExecutionContext()};
    trtCheck(context != nullptr, "createExecutionContext");
    cudaStream_t created = nullptr;
    checkCuda(cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    Stream const stream(created, cudaStreamDestroy);
    Event const start = event();
    Event const stop = event();

    std::map<std::string, DeviceMemory> buffers;
    auto upload = [&](Arrays const& set, int64_t step) {
        for (auto const& [name, array] : set)
        {
            checkCuda(cudaMemcpyAsync(buffers.at(name).get(), array.data.data(), array.data.size(),
                          cudaMemcpyHostToDevice, stream.get()),
                "upload of " + name + " for step " + std::to_string(step + 1));
        }
    };
    for (auto const& [name, array] : in.sets[0])
    {
        buffers.emplace(name, deviceMemory(std::max<size_t>(array.data.size(), 1), name.c_str()));
        trtCheck(context->setInputShape(name.c_str(), dims(array.shape)), "setInputShape(" + name + ")");
        trtCheck(context->setTensorAddress(name.c_str(), buffers.at(name).get()), "setTensorAddress(" + name + ")");
    }
    std::string failed;
    trtCheck(aliased_io::bindAliasedOutputs(*context, description, &failed),
        "setTensorAddress(" + failed + ") at its input's address");
    std::map<std::string, std::vector<int64_t>> shapes;
    for (aliased_io::TensorDescription const& output : description.outputs)
    {
        nvinfer1::Dims const d = context->getTensorShape(output.name.c_str());
        std::vector<int64_t> const shape(d.d, d.d + std::max(d.nbDims, 0));
        check(d.nbDims >= 0 && std::all_of(shape.begin(), shape.end(), [](int64_t n) { return n >= 0; }),
            kEXIT_ENGINE_FAILED, "output " + output.name + " has the shape " + shapeText(shape)
                + " (data-dependent); this program binds outputs whose shape the input shapes decide");
        std::string const source = description.aliasedInput(output.name);
        check(source.empty() || shape == in.sets[0].at(source).shape, kEXIT_BAD_INPUT,
            "output " + output.name + " " + shapeText(shape) + " cannot be written into input " + source + " "
                + shapeText(source.empty() ? shape : in.sets[0].at(source).shape) + "'s memory: not the same shape");
        shapes[output.name] = shape;
        if (source.empty())
        {
            int64_t elements = 1;
            for (int64_t n : shape)
            {
                elements *= n;
            }
            size_t const bytes = static_cast<size_t>(elements) * npy::itemSize(output.dtype);
            buffers.emplace(output.name, deviceMemory(std::max<size_t>(bytes, 1), output.name.c_str()));
            trtCheck(context->setTensorAddress(output.name.c_str(), buffers.at(output.name).get()),
                "setTensorAddress(" + output.name + ")");
        }
    }

    upload(in.sets[0], 0);
    std::vector<double> deviceMs;
    std::vector<double> hostMs;
    for (int64_t k = 0; k < in.steps; ++k)
    {
        std::string const step = "step " + std::to_string(k + 1);
        if (k > 0 && in.sets.size() > 1)
        {
            upload(in.sets[static_cast<size_t>(k)], k);
        }
        timedStep(*context, stream.get(), start, stop, step, logger, deviceMs, hostMs);
    }
    Arrays finals;
    for (aliased_io::TensorDescription const& output : description.outputs)
    {
        std::string const source = description.aliasedInput(output.name);
        npy::Array array{output.dtype, shapes.at(output.name), {}};
        array.data.resize(static_cast<size_t>(array.elements()) * npy::itemSize(output.dtype));
        checkCuda(cudaMemcpyAsync(array.data.data(), buffers.at(source.empty() ? output.name : source).get(),
                      array.data.size(), cudaMemcpyDeviceToHost, stream.get()),
            "download of " + output.name);
        finals.emplace(output.name, std::move(array));
    }
    checkCuda(cudaStreamSynchronize(stream.get()), "download of the outputs (cudaStreamSynchronize)");

    std::printf("Engine: %s (TensorRT %s runtime)\n", o.engine.c_str(), versionString(loaded.library).c_str());
    std::printf("Steps: %lld execution(s), the states kept in their input buffers (no warm-up: it would change "
                "them)\n",
        static_cast<long long>(in.steps));
    std::vector<double> const later(deviceMs.begin() + (deviceMs.size() > 1 ? 1 : 0), deviceMs.end());
    std::printf("Per-step engine time (CUDA events around enqueueV3%s): %s\n",
        deviceMs.size() > 1 ? ", steps 2 on: the first also loads the kernels" : "", describeTimes(later).c_str());
    std::sort(hostMs.begin(), hostMs.end());
    std::printf("Host time to issue one step: median %s (enqueueV3)\n", formatDuration(median(hostMs)).c_str());
    for (auto const& [name, array] : finals)
    {
        std::printf("\n");
        printOutput(name, array, " after " + std::to_string(in.steps) + " step(s)");
    }
    return finishModel(o, finals, expected);
}

int runReference(Options const& o)
{
    Problem const p{o.nodes, o.features, o.steps, o.batchEdges, static_cast<uint64_t>(o.seed)};
    Reference const reference = computeReference(p, nodeFeatures(p));
    std::printf("Setting seed to: %lld\n", static_cast<long long>(o.seed));
    std::printf("Reference only (no TensorRT runtime, no GPU): %s nodes with %lld feature(s) each drawn from the seed "
                "(multiples of 0.25 in [0, 10)), the state starting at zeros, %s batches of %s random edges\n",
        withCommas(p.nodes).c_str(), static_cast<long long>(p.features), withCommas(p.steps).c_str(),
        withCommas(p.batchEdges).c_str());
    std::printf("\nFinal state X after %lld batches (float64 reference):\n", static_cast<long long>(p.steps));
    printState(reference.state, p);
    return kEXIT_OK;
}

} // namespace

int main(int argc, char** argv)
{
    try
    {
        Options const options = parseOptions(argc, argv);
        if (options.help)
        {
            printHelp();
            return kEXIT_OK;
        }
        return options.referenceOnly ? runReference(options)
            : !options.inputs.empty() ? runModel(options)
                                      : runEngine(options);
    }
    catch (Failure const& failure)
    {
        std::fflush(stdout);
        std::fprintf(stderr, "aliased_io_state: error: %s\n", failure.message.c_str());
        return failure.status;
    }
    catch (std::exception const& error) // std::bad_alloc of a state too large for host memory
    {
        std::fflush(stdout);
        std::fprintf(stderr, "aliased_io_state: error: %s\n", error.what());
        return kEXIT_ENGINE_FAILED;
    }
}
