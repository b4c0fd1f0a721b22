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
#include <fstream>
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
void printState(std::vector<double> const& state, Problem const& p)
{
    bool const all = p.nodes * p.features <= kPRINTED_VALUES;
    for (int64_t n = 0; n < p.nodes; ++n)
    {
        if (!all && n == 3)
        {
            std::printf("...\n");
            n = p.nodes - 3;
        }
        for (int64_t f = 0; f < p.features; ++f)
        {
            std::printf(f == 0 ? "[%.10g" : " %.10g", state[static_cast<size_t>(n * p.features + f)]);
        }
        std::printf("]\n");
    }
    double sum = 0.0;
    for (double value : state)
    {
        sum += value;
    }
    std::printf("Sum over the state: %.17g\n", sum);
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
};

void printHelp()
{
    std::printf(
        "Usage: aliased_io_state --engine=FILE [--steps=K] [--batch_edges=B] [--nodes=N] [--seed=S] [--validate]\n"
        "       aliased_io_state --reference-only --nodes=N --batch_edges=B [--features=F] [--steps=K] [--seed=S]\n"
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
    Flag const flags[] = {{"--validate", "--validate", &o.validate},
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
        else if (name == "--engine")
        {
            o.engine = next();
            check(!o.engine.empty(), kEXIT_BAD_INPUT, "--engine needs a file name, got ''");
        }
        else
        {
            check(false, kEXIT_BAD_INPUT, "unknown argument '" + std::string(argv[i]) + "' (--help lists the options)");
        }
    }
    bool const batchEdgesGiven = integers[1].given;
    bool const nodesGiven = integers[2].given;
    bool const featuresGiven = integers[3].given;
    if (o.help)
    {
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

int runEngine(Options const& o)
{
    std::vector<char> const blob = readEngineFile(o.engine);

    Logger logger(o.verbose);
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
    check(engine != nullptr, kEXIT_BAD_INPUT, "--engine " + o.engine + " could not be deserialized by TensorRT "
            + versionString(library) + logger.lastError()
            + " (expected a --plugin aot --steps engine saved by the same TensorRT release)");

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
        checkCuda(cudaEventRecord(start.get(), stream.get()), "cudaEventRecord before " + step);
        auto const issued = std::chrono::steady_clock::now();
        bool const enqueued = context->enqueueV3(stream.get());
        auto const returned = std::chrono::steady_clock::now();
        trtCheck(enqueued, "enqueueV3 of " + step);
        checkCuda(cudaEventRecord(stop.get(), stream.get()), "cudaEventRecord after " + step);
        checkCuda(cudaEventSynchronize(stop.get()), step + " (cudaEventSynchronize)");
        float ms = 0.0F;
        checkCuda(cudaEventElapsedTime(&ms, start.get(), stop.get()), "cudaEventElapsedTime of " + step);
        deviceMs.push_back(ms);
        hostMs.push_back(std::chrono::duration<double, std::milli>(returned - issued).count());
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
        return options.referenceOnly ? runReference(options) : runEngine(options);
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
