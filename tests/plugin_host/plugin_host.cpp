/*
 * A test host for TensorRT plugins: a stand-in libnvinfer.so that the REAL TensorRT Python bindings load in
 * place of TensorRT's (tests/plugin_host/build.py lays it out). It is not TensorRT: it has no builder, runtime or
 * kernels of its own. It has
 *   - a working IPluginRegistry (getPluginRegistry(), getBuilderPluginRegistry()): register, find, list and
 *     deregister creators (V1, V3One and, from TensorRT 10.16 on, the quickly deployable V3Quick creators),
 *     plugin resources;
 *   - an IExprBuilder whose expressions are symbolic (input sizes are named, e.g. N and E) and are evaluated
 *     afterwards for a profile's min/opt/max or for concrete sizes;
 *   - C entry points (host_*, called by the tests through ctypes) that drive a registered creator's plugin
 *     through the calls TensorRT documents in NvInferRuntime.h, in TensorRT's order: the build phase, the
 *     runtime phase (enqueue only when the caller hands it device buffers and a stream) and, for quickly
 *     deployable AOT plugins, the build phase up to getKernel plus the launch TensorRT makes from it.
 * It is as harsh as TensorRT's headers allow, each time quoting the sentence it stands for: configurePlugin
 * called several times, the parser's clone deleted at once, the builder's timing on made-up inputs at kOPT (on a
 * GPU device buffers of random bytes, waited for with a time limit), getWorkspaceSize asked of a runtime plugin
 * that was never configured, onShapeChange again after new shapes or addresses, two execution contexts at once.
 * Every call is checked; each step's result (types, shapes, formats, aliasing, fields, status, and what the
 * bindings' trampolines printed on stderr) goes into a JSON report that host_report() returns.
 * Compiled with g++ against TensorRT's real headers of the bindings' release line (build.py).
 */
#include "NvInfer.h"
#include "NvInferRuntime.h"
#if __has_include("impl/NvInferPythonPlugin.h")
#include "impl/NvInferPythonPlugin.h"
#define PLUGIN_HOST_QUICK 1 // quickly deployable (tensorrt.plugin) creators: TensorRT 10.16 and 11.x headers
#endif

#include <algorithm>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <dlfcn.h>
#include <functional>
#include <iostream>
#include <limits>
#include <locale>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <unistd.h>
#include <vector>

using namespace nvinfer1;

#define HOST_API extern "C" __attribute__((visibility("default")))

namespace
{

//! Reports --------------------------------------------------------------------------------------------------

std::string quoted(std::string const& text)
{
    std::ostringstream out;
    out.imbue(std::locale::classic());
    out << '"';
    for (unsigned char c : text)
    {
        if (c == '"' || c == '\\')
        {
            out << '\\' << c;
        }
        else if (c < 0x20 || c >= 0x7f)
        {
            char buffer[8];
            std::snprintf(buffer, sizeof(buffer), "\\u%04x", c);
            out << buffer;
        }
        else
        {
            out << c;
        }
    }
    out << '"';
    return out.str();
}

std::string quoted(char const* text)
{
    return text == nullptr ? "null" : quoted(std::string{text});
}

template <typename T>
std::string jsonList(std::vector<T> const& values, std::function<std::string(T const&)> const& item)
{
    std::string out = "[";
    for (size_t i = 0; i < values.size(); ++i)
    {
        out += (i ? ", " : "") + item(values[i]);
    }
    return out + "]";
}

std::string intList(std::vector<int64_t> const& values)
{
    return jsonList<int64_t>(values, [](int64_t const& v) { return std::to_string(v); });
}

//! One phase's report: the steps in the order they were made, and the first failure.
class Report
{
public:
    explicit Report(std::string phase)
        : mPhase(std::move(phase))
    {
    }

    //! Adds a step: the TensorRT call, its status ("ok" or "failed") and its details (JSON members).
    void step(std::string const& call, bool ok, std::string const& details = "", std::string const& stderrText = "")
    {
        mSteps.push_back({call, ok, details, stderrText});
        if (!ok && mError.empty())
        {
            mError
                = call + ": " + (details.empty() ? "failed" : details) + (stderrText.empty() ? "" : " | " + stderrText);
        }
    }

    //! Adds another report's steps, each call prefixed (e.g. "context 1: "), in their order.
    void merge(Report const& other, std::string const& prefix)
    {
        for (auto const& s : other.mSteps)
        {
            step(prefix + s.call, s.ok, s.details, s.stderrText);
        }
    }

    //! A failure that belongs to no single call (e.g. a spec the host cannot read).
    void fail(std::string const& message)
    {
        step("host", false, "\"message\": " + quoted(message));
    }

    bool ok() const
    {
        return mError.empty();
    }

    void set(std::string const& key, std::string const& json)
    {
        mExtra.emplace_back(key, json);
    }

    std::string json() const
    {
        std::string out = "{\"phase\": " + quoted(mPhase) + ", \"ok\": " + (ok() ? "true" : "false")
            + ", \"error\": " + (mError.empty() ? "null" : quoted(mError)) + ", \"steps\": [";
        for (size_t i = 0; i < mSteps.size(); ++i)
        {
            Step const& s = mSteps[i];
            std::string entry = "{\"call\": " + quoted(s.call) + ", \"ok\": " + (s.ok ? "true" : "false");
            entry += s.details.empty() ? "" : ", " + s.details;
            entry += s.stderrText.empty() ? "" : ", \"stderr\": " + quoted(s.stderrText);
            out += (i ? ",\n  " : "\n  ") + entry + "}";
        }
        out += "]";
        for (auto const& [key, value] : mExtra)
        {
            out += ", " + quoted(key) + ": " + value;
        }
        return out + "}";
    }

private:
    struct Step
    {
        std::string call;
        bool ok;
        std::string details, stderrText;
    };
    std::string mPhase;
    std::string mError;
    std::vector<Step> mSteps;
    std::vector<std::pair<std::string, std::string>> mExtra;
};

thread_local std::string tLastReport{"{}"};

void publish(Report const& report)
{
    tLastReport = report.json();
}

//! Captures what a call writes to file descriptor 2: the bindings' trampolines report a Python exception, or
//! a return value they cannot convert, with std::cerr and return an error status (or a default value).
class StderrCapture
{
public:
    StderrCapture()
    {
        std::cerr.flush();
        std::fflush(stderr);
        mFile = std::tmpfile();
        mSaved = dup(2);
        if (mFile != nullptr && mSaved >= 0)
        {
            dup2(fileno(mFile), 2);
        }
    }

    //! Restores fd 2 and returns what was written meanwhile (trailing newlines removed).
    std::string finish()
    {
        std::cerr.flush();
        std::fflush(stderr);
        std::string text;
        if (mSaved >= 0)
        {
            dup2(mSaved, 2);
            close(mSaved);
            mSaved = -1;
        }
        if (mFile != nullptr)
        {
            std::rewind(mFile);
            char buffer[4096];
            size_t n = 0;
            while ((n = std::fread(buffer, 1, sizeof(buffer), mFile)) > 0 && text.size() < 65536)
            {
                text.append(buffer, n);
            }
            std::fclose(mFile);
            mFile = nullptr;
        }
        while (!text.empty() && (text.back() == '\n' || text.back() == '\r'))
        {
            text.pop_back();
        }
        return text;
    }

    ~StderrCapture()
    {
        finish();
    }

private:
    std::FILE* mFile{nullptr};
    int mSaved{-1};
};

//! Whether n bytes at p can be read, without touching them (write() to a pipe fails with EFAULT otherwise):
//! what a plugin hands back may already have been freed, and the host must report that, not crash.
bool readable(void const* p, size_t n)
{
    if (p == nullptr)
    {
        return false;
    }
    int fds[2];
    if (pipe(fds) != 0)
    {
        return false;
    }
    bool ok = true;
    auto const* bytes = static_cast<char const*>(p);
    while (n > 0 && ok)
    {
        size_t chunk = std::min<size_t>(n, 4096);
        ok = write(fds[1], bytes, chunk) == static_cast<ssize_t>(chunk);
        char sink[4096];
        ok = ok && read(fds[0], sink, chunk) == static_cast<ssize_t>(chunk);
        bytes += chunk;
        n -= chunk;
    }
    close(fds[0]);
    close(fds[1]);
    return ok;
}

std::optional<std::string> readableString(char const* p, size_t maxLength = 1024)
{
    std::string text;
    for (size_t i = 0; i < maxLength; ++i)
    {
        if (!readable(p + i, 1))
        {
            return std::nullopt;
        }
        if (p[i] == '\0')
        {
            return text;
        }
        text += p[i];
    }
    return std::nullopt; // TensorRT's limit for names: 1024 bytes including the terminator
}

//! A callback of the test's (ctypes), called where TensorRT would go on with other work between a plugin call
//! and its use of what the call returned (e.g. after getFieldsToSerialize returns, before the fields are read).
using Hook = void (*)(char const* point);
Hook gHook = nullptr;

//! How long the host waits for the build's timing enqueue on a GPU before it reports that its kernels never end
//! (host_set_timing_limit changes it).
double gTimingLimitSeconds = 60.0;

void hookPoint(char const* point)
{
    if (gHook != nullptr)
    {
        gHook(point);
    }
}

//! Symbolic dimension expressions -------------------------------------------------------------------------

using Sizes = std::map<std::string, int64_t>;

class HostExpr final : public IDimensionExpr
{
public:
    enum class Kind
    {
        kCONSTANT,
        kSYMBOL,
        kOPERATION
    };

    HostExpr(Kind kind, int64_t value, std::string symbol, DimensionOperation op, HostExpr const* a, HostExpr const* b)
        : mKind(kind)
        , mValue(value)
        , mSymbol(std::move(symbol))
        , mOp(op)
        , mA(a)
        , mB(b)
        , mImplObject(*this)
    {
        mImpl = &mImplObject;
    }

    ~HostExpr() noexcept override = default;

    bool constant() const
    {
        return mKind == Kind::kCONSTANT;
    }

    int64_t value() const
    {
        return mValue;
    }

    //! The value for these sizes, or nothing (an unknown symbol, a division by zero).
    std::optional<int64_t> evaluate(Sizes const& sizes) const
    {
        switch (mKind)
        {
        case Kind::kCONSTANT: return mValue;
        case Kind::kSYMBOL:
        {
            auto found = sizes.find(mSymbol);
            return found == sizes.end() ? std::nullopt : std::optional<int64_t>{found->second};
        }
        case Kind::kOPERATION:
        {
            auto a = mA->evaluate(sizes);
            auto b = mB->evaluate(sizes);
            if (!a || !b)
            {
                return std::nullopt;
            }
            return apply(mOp, *a, *b);
        }
        }
        return std::nullopt;
    }

    static std::optional<int64_t> apply(DimensionOperation op, int64_t a, int64_t b)
    {
        switch (op)
        {
        case DimensionOperation::kSUM: return a + b;
        case DimensionOperation::kPROD: return a * b;
        case DimensionOperation::kMAX: return std::max(a, b);
        case DimensionOperation::kMIN: return std::min(a, b);
        case DimensionOperation::kSUB: return a - b;
        case DimensionOperation::kEQUAL: return a == b ? 1 : 0;
        case DimensionOperation::kLESS: return a < b ? 1 : 0;
        case DimensionOperation::kFLOOR_DIV:
            if (b == 0)
            {
                return std::nullopt;
            }
            return a / b - ((a % b != 0) && ((a < 0) != (b < 0)) ? 1 : 0);
        case DimensionOperation::kCEIL_DIV:
            if (b == 0)
            {
                return std::nullopt;
            }
            return a / b + ((a % b != 0) && ((a < 0) == (b < 0)) ? 1 : 0);
        }
        return std::nullopt;
    }

    std::string text() const
    {
        switch (mKind)
        {
        case Kind::kCONSTANT: return std::to_string(mValue);
        case Kind::kSYMBOL: return mSymbol;
        case Kind::kOPERATION: break;
        }
        static char const* const kNAMES[] = {"+", "*", "max", "min", "-", "==", "<", "//", "ceil_div"};
        auto const index = static_cast<int32_t>(mOp);
        std::string name = index >= 0 && index < 9 ? kNAMES[index] : "?";
        if (name == "max" || name == "min" || name == "ceil_div")
        {
            return name + "(" + mA->text() + ", " + mB->text() + ")";
        }
        return "(" + mA->text() + " " + name + " " + mB->text() + ")";
    }

private:
    class Impl final : public apiv::VDimensionExpr
    {
    public:
        explicit Impl(HostExpr const& owner)
            : mOwner(owner)
        {
        }
        bool isConstant() const override
        {
            return mOwner.constant();
        }
        int64_t getConstantValue() const override
        {
            return mOwner.constant() ? mOwner.value() : std::numeric_limits<int64_t>::min();
        }
        bool isSizeTensor() const override
        {
            return false;
        }

    private:
        HostExpr const& mOwner;
    };

    Kind mKind;
    int64_t mValue;
    std::string mSymbol;
    DimensionOperation mOp;
    HostExpr const* mA;
    HostExpr const* mB;
    Impl mImplObject;
};

//! The host's IExprBuilder: owns every expression it makes (and the inputs' symbols) for as long as the engine
//! that used it lives; folds operations on constants, as TensorRT does; refuses expressions it did not make.
class HostExprBuilder final : public IExprBuilder
{
public:
    HostExprBuilder()
        : mImplObject(*this)
    {
        mImpl = &mImplObject;
    }

    ~HostExprBuilder() noexcept override = default;

    HostExpr const* symbol(std::string const& name)
    {
        return make(HostExpr::Kind::kSYMBOL, 0, name, DimensionOperation::kSUM, nullptr, nullptr);
    }

    HostExpr const* constantExpr(int64_t value)
    {
        return make(HostExpr::Kind::kCONSTANT, value, "", DimensionOperation::kSUM, nullptr, nullptr);
    }

    //! An expression of this builder's, or nullptr for one it did not make.
    HostExpr const* own(IDimensionExpr const* expr) const
    {
        auto const* host = dynamic_cast<HostExpr const*>(expr);
        for (auto const& made : mExprs)
        {
            if (made.get() == host)
            {
                return host;
            }
        }
        return nullptr;
    }

    std::vector<std::string> const& errors() const
    {
        return mErrors;
    }

private:
    HostExpr const* make(HostExpr::Kind kind, int64_t value, std::string const& symbol, DimensionOperation op,
        HostExpr const* a, HostExpr const* b)
    {
        mExprs.push_back(std::make_unique<HostExpr>(kind, value, symbol, op, a, b));
        return mExprs.back().get();
    }

    IDimensionExpr const* operation(DimensionOperation op, IDimensionExpr const& first, IDimensionExpr const& second)
    {
        HostExpr const* a = own(&first);
        HostExpr const* b = own(&second);
        if (a == nullptr || b == nullptr)
        {
            mErrors.push_back("IExprBuilder::operation got an expression this builder did not make");
            return nullptr;
        }
        if (a->constant() && b->constant())
        {
            auto folded = HostExpr::apply(op, a->value(), b->value());
            if (!folded)
            {
                mErrors.push_back("IExprBuilder::operation: division by zero in constants");
                return nullptr;
            }
            return constantExpr(*folded);
        }
        return make(HostExpr::Kind::kOPERATION, 0, "", op, a, b);
    }

    class Impl final : public apiv::VExprBuilder
    {
    public:
        explicit Impl(HostExprBuilder& owner)
            : mOwner(owner)
        {
        }
        IDimensionExpr const* constant(int64_t value) override
        {
            return mOwner.constantExpr(value);
        }
        IDimensionExpr const* operation(
            DimensionOperation op, IDimensionExpr const& first, IDimensionExpr const& second) override
        {
            return mOwner.operation(op, first, second);
        }
        IDimensionExpr const* declareSizeTensor(int32_t, IDimensionExpr const&, IDimensionExpr const&) override
        {
            mOwner.mErrors.push_back("IExprBuilder::declareSizeTensor: size tensors are not supported by the host");
            return nullptr;
        }

    private:
        HostExprBuilder& mOwner;
    };

    std::deque<std::unique_ptr<HostExpr>> mExprs;
    std::vector<std::string> mErrors;
    Impl mImplObject;
};

//! The plugin registry ------------------------------------------------------------------------------------

struct CreatorNames
{
    std::string kind, name, version, ns;
};

//! The kind, name, version and namespace a creator reports (nullptr strings read as "").
CreatorNames creatorNames(IPluginCreatorInterface const& creator)
{
    auto text = [](char const* s) { return std::string{s == nullptr ? "" : s}; };
    CreatorNames names{text(creator.getInterfaceInfo().kind), "", "", ""};
    auto& mutableCreator = const_cast<IPluginCreatorInterface&>(creator);
    if (names.kind == "PLUGIN CREATOR_V3ONE")
    {
        auto& c = static_cast<IPluginCreatorV3One&>(mutableCreator);
        names.name = text(c.getPluginName());
        names.version = text(c.getPluginVersion());
        names.ns = text(c.getPluginNamespace());
    }
#if PLUGIN_HOST_QUICK
    else if (names.kind == "PLUGIN CREATOR_V3QUICK")
    {
        auto& c = static_cast<IPluginCreatorV3Quick&>(mutableCreator);
        names.name = text(c.getPluginName());
        names.version = text(c.getPluginVersion());
        names.ns = text(c.getPluginNamespace());
    }
#endif
    else if (names.kind == "PLUGIN CREATOR_V1")
    {
        auto& c = static_cast<IPluginCreator&>(mutableCreator);
        names.name = text(c.getPluginName());
        names.version = text(c.getPluginVersion());
        names.ns = text(c.getPluginNamespace());
    }
    return names;
}

class HostRegistry final : public IPluginRegistry
{
public:
    // --- what the bindings call (IPluginRegistry) -------------------------------------------------------------
    bool registerCreator(IPluginCreatorInterface& creator, AsciiChar const* const pluginNamespace) noexcept override
    {
        std::lock_guard<std::mutex> lock(mMutex);
        CreatorNames names = creatorNames(creator);
        names.ns = pluginNamespace == nullptr ? "" : pluginNamespace;
        if (names.kind != "PLUGIN CREATOR_V3ONE" && names.kind != "PLUGIN CREATOR_V3QUICK"
            && names.kind != "PLUGIN CREATOR_V1")
        {
            return false;
        }
        for (auto const& entry : mEntries)
        {
            if (entry.names.name == names.name && entry.names.version == names.version && entry.names.ns == names.ns)
            {
                return false; // one creator per (name, version, namespace), as TensorRT's registry
            }
        }
        mEntries.push_back({&creator, names});
        refresh();
        return true;
    }

    IPluginCreatorInterface* const* getAllCreators(int32_t* const numCreators) const noexcept override
    {
        if (numCreators != nullptr)
        {
            *numCreators = static_cast<int32_t>(mAll.size());
        }
        return mAll.empty() ? nullptr : mAll.data();
    }

    IPluginCreatorInterface* getCreator(AsciiChar const* const pluginName, AsciiChar const* const pluginVersion,
        AsciiChar const* const pluginNamespace = "") noexcept override
    {
        std::lock_guard<std::mutex> lock(mMutex);
        Entry const* entry = find(pluginName, pluginVersion, pluginNamespace);
        return entry == nullptr ? nullptr : entry->creator;
    }

    bool deregisterCreator(IPluginCreatorInterface const& creator) noexcept override
    {
        std::lock_guard<std::mutex> lock(mMutex);
        auto found
            = std::find_if(mEntries.begin(), mEntries.end(), [&](Entry const& e) { return e.creator == &creator; });
        if (found == mEntries.end())
        {
            return false;
        }
        mEntries.erase(found);
        refresh();
        return true;
    }

    void setErrorRecorder(IErrorRecorder* const recorder) noexcept override
    {
        if (recorder != nullptr)
        {
            recorder->incRefCount();
        }
        if (mRecorder != nullptr)
        {
            mRecorder->decRefCount();
        }
        mRecorder = recorder;
    }

    IErrorRecorder* getErrorRecorder() const noexcept override
    {
        return mRecorder;
    }

    bool isParentSearchEnabled() const override
    {
        return mParentSearch;
    }

    void setParentSearchEnabled(bool const enabled) override
    {
        mParentSearch = enabled;
    }

    PluginLibraryHandle loadLibrary(AsciiChar const*) noexcept override
    {
        return nullptr; // the host loads no plugin libraries
    }

    void deregisterLibrary(PluginLibraryHandle) noexcept override {}

    IPluginResource* acquirePluginResource(AsciiChar const* key, IPluginResource* resource) noexcept override
    {
        if (key == nullptr || resource == nullptr)
        {
            return nullptr;
        }
        std::lock_guard<std::mutex> lock(mMutex);
        auto& held = mResources[key];
        if (held.resource == nullptr)
        {
            held.resource = resource->clone(); // TensorRT registers a clone; the argument need not outlive the call
            if (held.resource == nullptr)
            {
                mResources.erase(key);
                return nullptr;
            }
        }
        ++held.count;
        return held.resource;
    }

    int32_t releasePluginResource(AsciiChar const* key) noexcept override
    {
        std::lock_guard<std::mutex> lock(mMutex);
        auto found = key == nullptr ? mResources.end() : mResources.find(key);
        if (found == mResources.end())
        {
            return -1;
        }
        if (--found->second.count == 0)
        {
            IPluginResource* resource = found->second.resource;
            mResources.erase(found);
            int32_t const status = resource->release();
            delete resource;
            return status;
        }
        return 0;
    }

#if NV_TENSORRT_MAJOR > 10 || (NV_TENSORRT_MAJOR == 10 && NV_TENSORRT_MINOR >= 16)
    IPluginCreatorInterface* const* getAllCreatorsRecursive(int32_t* const numCreators) noexcept override
    {
        return getAllCreators(numCreators); // no parent registry
    }
#endif

#if NV_TENSORRT_MAJOR == 10
    // --- TensorRT 10's deprecated IPluginCreator (V1) entry points ---------------------------------------------
    bool registerCreator(IPluginCreator& creator, AsciiChar const* const pluginNamespace) noexcept override
    {
        return registerCreator(static_cast<IPluginCreatorInterface&>(creator), pluginNamespace);
    }

    IPluginCreator* const* getPluginCreatorList(int32_t* const numCreators) const noexcept override
    {
        if (numCreators != nullptr)
        {
            *numCreators = static_cast<int32_t>(mV1.size());
        }
        return mV1.empty() ? nullptr : mV1.data();
    }

    IPluginCreator* getPluginCreator(AsciiChar const* const pluginName, AsciiChar const* const pluginVersion,
        AsciiChar const* const pluginNamespace = "") noexcept override
    {
        std::lock_guard<std::mutex> lock(mMutex);
        Entry const* entry = find(pluginName, pluginVersion, pluginNamespace);
        if (entry == nullptr || entry->names.kind != "PLUGIN CREATOR_V1")
        {
            return nullptr;
        }
        return static_cast<IPluginCreator*>(entry->creator);
    }

    bool deregisterCreator(IPluginCreator const& creator) noexcept override
    {
        return deregisterCreator(static_cast<IPluginCreatorInterface const&>(creator));
    }
#endif

    ~HostRegistry() noexcept override = default;

    //! The registered creators as (kind, name, version, namespace), in registration order.
    std::vector<CreatorNames> list()
    {
        std::lock_guard<std::mutex> lock(mMutex);
        std::vector<CreatorNames> names;
        for (auto const& entry : mEntries)
        {
            names.push_back(entry.names);
        }
        return names;
    }

private:
    struct Entry
    {
        IPluginCreatorInterface* creator;
        CreatorNames names;
    };

    struct HeldResource
    {
        IPluginResource* resource{nullptr};
        int32_t count{0};
    };

    Entry const* find(char const* name, char const* version, char const* ns) const
    {
        std::string const n{name == nullptr ? "" : name};
        std::string const v{version == nullptr ? "" : version};
        std::string const s{ns == nullptr ? "" : ns};
        for (auto const& entry : mEntries)
        {
            if (entry.names.name == n && entry.names.version == v && entry.names.ns == s)
            {
                return &entry;
            }
        }
        return nullptr;
    }

    void refresh()
    {
        mAll.clear();
#if NV_TENSORRT_MAJOR == 10
        mV1.clear();
#endif
        for (auto const& entry : mEntries)
        {
            mAll.push_back(entry.creator);
#if NV_TENSORRT_MAJOR == 10
            if (entry.names.kind == "PLUGIN CREATOR_V1")
            {
                mV1.push_back(static_cast<IPluginCreator*>(entry.creator));
            }
#endif
        }
    }

    std::mutex mMutex;
    std::vector<Entry> mEntries;
    std::vector<IPluginCreatorInterface*> mAll;
#if NV_TENSORRT_MAJOR == 10
    std::vector<IPluginCreator*> mV1;
#endif
    std::map<std::string, HeldResource> mResources;
    IErrorRecorder* mRecorder{nullptr};
    bool mParentSearch{true};
};

HostRegistry& registry()
{
    static HostRegistry* instance = new HostRegistry; // never destroyed: creators may outlive static destruction
    return *instance;
}

//! The execution context's resources as a plugin sees them in attachToContext (none: no allocator, no recorder).
class HostResourceContext final : public IPluginResourceContext
{
public:
    IGpuAllocator* getGpuAllocator() const noexcept override
    {
        return nullptr;
    }
    IErrorRecorder* getErrorRecorder() const noexcept override
    {
        return nullptr;
    }
};

//! The engine: what the build phase decided and kept --------------------------------------------------------

struct TensorSpec
{
    DataType type{DataType::kFLOAT};
    std::vector<HostExpr const*> dims;
};

struct Range
{
    int64_t min, opt, max;
};

struct StoredField
{
    std::string name;
    PluginFieldType type;
    int32_t length;
    std::vector<uint8_t> data;
};

size_t fieldElementBytes(PluginFieldType type)
{
    switch (type)
    {
    case PluginFieldType::kFLOAT16:
    case PluginFieldType::kINT16:
    case PluginFieldType::kBF16: return 2;
    case PluginFieldType::kFLOAT32:
    case PluginFieldType::kINT32: return 4;
    case PluginFieldType::kFLOAT64:
    case PluginFieldType::kINT64: return 8;
    case PluginFieldType::kDIMS: return sizeof(Dims);
    default: return 1; // kINT8, kCHAR, kUNKNOWN, kFP8 (byte counts)
    }
}

std::string fieldJson(StoredField const& field)
{
    std::vector<int64_t> values;
    for (size_t i = 0; i < static_cast<size_t>(field.length); ++i)
    {
        uint8_t const* p = field.data.data() + i * fieldElementBytes(field.type);
        switch (field.type)
        {
        case PluginFieldType::kINT8:
        case PluginFieldType::kCHAR:
        case PluginFieldType::kUNKNOWN: values.push_back(*reinterpret_cast<int8_t const*>(p)); break;
        case PluginFieldType::kINT16: values.push_back(*reinterpret_cast<int16_t const*>(p)); break;
        case PluginFieldType::kINT32: values.push_back(*reinterpret_cast<int32_t const*>(p)); break;
        case PluginFieldType::kINT64: values.push_back(*reinterpret_cast<int64_t const*>(p)); break;
        default: break; // float types: the raw bytes below
        }
    }
    std::string hex;
    for (uint8_t byte : field.data)
    {
        char buffer[3];
        std::snprintf(buffer, sizeof(buffer), "%02x", byte);
        hex += buffer;
    }
    return "{\"name\": " + quoted(field.name) + ", \"type\": " + std::to_string(static_cast<int32_t>(field.type))
        + ", \"length\": " + std::to_string(field.length) + ", \"values\": " + intList(values)
        + ", \"bytes\": " + quoted(hex) + "}";
}

//! Copies a PluginFieldCollection the plugin returned, checking that every pointer in it can still be read.
bool copyFields(PluginFieldCollection const* collection, std::vector<StoredField>& out, std::string& problem)
{
    if (collection == nullptr)
    {
        problem = "a null PluginFieldCollection";
        return false;
    }
    if (!readable(collection, sizeof(PluginFieldCollection)))
    {
        problem = "the PluginFieldCollection itself cannot be read (freed?)";
        return false;
    }
    PluginFieldCollection const copy = *collection;
    if (copy.nbFields < 0 || copy.nbFields > 1024)
    {
        problem = "nbFields " + std::to_string(copy.nbFields) + " (freed or garbage collection?)";
        return false;
    }
    if (copy.nbFields > 0 && !readable(copy.fields, sizeof(PluginField) * copy.nbFields))
    {
        problem = "its fields array cannot be read (freed?)";
        return false;
    }
    for (int32_t i = 0; i < copy.nbFields; ++i)
    {
        PluginField const field = copy.fields[i];
        auto name = readableString(field.name);
        if (!name)
        {
            problem = "field " + std::to_string(i) + "'s name cannot be read (freed?)";
            return false;
        }
        if (field.length < 0 || field.length > (1 << 24))
        {
            problem = "field " + *name + " has length " + std::to_string(field.length);
            return false;
        }
        size_t const bytes = static_cast<size_t>(field.length) * fieldElementBytes(field.type);
        if (bytes > 0 && !readable(field.data, bytes))
        {
            problem = "field " + *name + "'s data cannot be read (freed?)";
            return false;
        }
        StoredField stored{*name, field.type, field.length, {}};
        auto const* data = static_cast<uint8_t const*>(field.data);
        stored.data.assign(data, data + bytes);
        out.push_back(std::move(stored));
    }
    return true;
}

struct Engine
{
    std::string name, version, ns;
    std::vector<std::pair<std::string, std::vector<int32_t>>> fieldSpec; // the network's fields (INT32)
    std::vector<PluginField> fieldSpecFields;
    std::vector<TensorSpec> inputs;
    std::map<std::string, Range> profile;
    HostExprBuilder builder;
    int32_t nbOutputs{0};
    std::vector<DataType> outputTypes;
    std::vector<std::vector<HostExpr const*>> outputDims;
    std::vector<TensorFormat> formats; // inputs then outputs
    std::vector<int32_t> aliases;
    size_t workspace{0};
    std::vector<int32_t> tactics;
    std::vector<StoredField> fields; // getFieldsToSerialize, copied
    // AOT: getKernel and getLaunchParams
    std::string kernelName;
    std::string kernel;
    std::vector<HostExpr const*> launch;                        // grid x y z, block x y z, shared memory
    std::vector<std::pair<HostExpr const*, int32_t>> extraArgs; // expression, PluginArgDataType
    void* module{nullptr}; // the CUDA module loaded from the kernel (at the first launch), and its function
    void* function{nullptr};
    // The runtime phase: the engine's plugin, made by createPlugin(kRUNTIME) from the fields when the first
    // execution context is made (deserialization), and the one every context's plugin is attached from; it lives
    // as long as the engine (host_engine_free deletes it).
    IPluginV3* runtimePlugin{nullptr};
    IPluginV3OneRuntime* runtime{nullptr};
    std::vector<PluginField> fieldsView;
};

std::string dimsText(std::vector<HostExpr const*> const& dims)
{
    return jsonList<HostExpr const*>(dims, [](HostExpr const* const& e) { return quoted(e->text()); });
}

std::optional<std::vector<int64_t>> evaluateAll(std::vector<HostExpr const*> const& exprs, Sizes const& sizes)
{
    std::vector<int64_t> values;
    for (auto const* e : exprs)
    {
        auto v = e->evaluate(sizes);
        if (!v)
        {
            return std::nullopt;
        }
        values.push_back(*v);
    }
    return values;
}

Dims toDims(std::vector<int64_t> const& values)
{
    Dims dims{};
    dims.nbDims = static_cast<int32_t>(values.size());
    for (size_t i = 0; i < values.size() && i < static_cast<size_t>(Dims::MAX_DIMS); ++i)
    {
        dims.d[i] = values[i];
    }
    return dims;
}

//! The dims TensorRT gives a plugin at build time: constants as they are, every other dimension -1.
Dims wildcardDims(std::vector<HostExpr const*> const& exprs)
{
    std::vector<int64_t> values;
    for (auto const* e : exprs)
    {
        values.push_back(e->constant() ? e->value() : -1);
    }
    return toDims(values);
}

std::string dimsJson(Dims const& dims)
{
    std::vector<int64_t> values(dims.d, dims.d + std::max(0, std::min(dims.nbDims, Dims::MAX_DIMS)));
    return intList(values);
}

//! The words of a line: split at ASCII spaces and tabs, byte by byte (no stream, no locale).
std::vector<std::string> splitWords(std::string const& line)
{
    std::vector<std::string> words;
    std::string word;
    for (char c : line)
    {
        if (c == ' ' || c == '\t' || c == '\r')
        {
            if (!word.empty())
            {
                words.push_back(word);
            }
            word.clear();
        }
        else
        {
            word += c;
        }
    }
    if (!word.empty())
    {
        words.push_back(word);
    }
    return words;
}

//! A whole word as a decimal integer (std::from_chars: no locale, no digit grouping), else nothing.
std::optional<int64_t> parseInteger(std::string const& word)
{
    int64_t value = 0;
    char const* end = word.data() + word.size();
    auto const [stop, error] = std::from_chars(word.data(), end, value);
    return error == std::errc{} && stop == end && !word.empty() ? std::optional<int64_t>{value} : std::nullopt;
}

//! Reads the spec the test gives (one item per line):
//!   field NAME v [v ...]          an INT32 plugin field of the network (creator's createPlugin, kBUILD)
//!   input DATATYPE DIM [DIM ...]  an input tensor: DataType as its integer, dims as integers or size names
//!   profile NAME MIN OPT MAX      the optimization profile's range of a size name
//! Split and read byte by byte, with std::from_chars, not with streams: a stream reads numbers with the facets of a
//! locale, and the process may have set a global C++ locale whose digit grouping reads "1 1000000" as one number.
//! A line it cannot read is reported with its bytes.
bool parseSpec(std::string const& spec, Engine& engine, Report& report)
{
    size_t begin = 0;
    while (begin <= spec.size())
    {
        size_t const newline = std::min(spec.find('\n', begin), spec.size());
        std::string const line = spec.substr(begin, newline - begin);
        begin = newline + 1;
        std::vector<std::string> const words = splitWords(line);
        auto refuse = [&](std::string const& what) {
            std::string bytes; // what was received, for a failure that the text alone does not explain
            for (unsigned char c : line)
            {
                char hex[4];
                std::snprintf(hex, sizeof(hex), "%02x", c);
                bytes += hex;
            }
            report.fail(what + ": " + line + " (bytes " + bytes + ")");
            return false;
        };
        if (words.empty())
        {
            continue;
        }
        if (words[0] == "field" && words.size() >= 2)
        {
            std::vector<int32_t> values;
            for (size_t i = 2; i < words.size(); ++i)
            {
                auto v = parseInteger(words[i]);
                if (!v)
                {
                    return refuse("cannot read the field line");
                }
                values.push_back(static_cast<int32_t>(*v));
            }
            engine.fieldSpec.emplace_back(words[1], values);
        }
        else if (words[0] == "input" && words.size() >= 2)
        {
            auto type = parseInteger(words[1]);
            if (!type)
            {
                return refuse("cannot read the input line");
            }
            TensorSpec input{static_cast<DataType>(*type), {}};
            for (size_t i = 2; i < words.size(); ++i)
            {
                auto v = parseInteger(words[i]);
                input.dims.push_back(v ? engine.builder.constantExpr(*v) : engine.builder.symbol(words[i]));
            }
            engine.inputs.push_back(input);
        }
        else if (words[0] == "profile")
        {
            std::optional<int64_t> low, opt, high;
            if (words.size() == 5)
            {
                low = parseInteger(words[2]);
                opt = parseInteger(words[3]);
                high = parseInteger(words[4]);
            }
            if (!low || !opt || !high)
            {
                return refuse("cannot read the profile line");
            }
            engine.profile[words[1]] = Range{*low, *opt, *high};
        }
        else
        {
            return refuse("unknown spec line");
        }
    }
    for (auto& [name, values] : engine.fieldSpec)
    {
        engine.fieldSpecFields.emplace_back(
            name.c_str(), values.data(), PluginFieldType::kINT32, static_cast<int32_t>(values.size()));
    }
    return true;
}

Sizes profileSizes(Engine const& engine, int which)
{
    Sizes sizes;
    for (auto const& [name, range] : engine.profile)
    {
        sizes[name] = which == 0 ? range.min : which == 1 ? range.opt : range.max;
    }
    return sizes;
}

//! Concrete sizes "N=1000 E=5000" (read as the spec is); false for anything else.
bool parseSizes(std::string const& text, Sizes& sizes)
{
    for (std::string const& item : splitWords(text))
    {
        auto const eq = item.find('=');
        auto const value = eq == std::string::npos ? std::nullopt : parseInteger(item.substr(eq + 1));
        if (!value)
        {
            return false;
        }
        sizes[item.substr(0, eq)] = *value;
    }
    return true;
}

std::string typeFormatJson(DataType type, TensorFormat format)
{
    return "[" + std::to_string(static_cast<int32_t>(type)) + ", " + std::to_string(static_cast<int32_t>(format)) + "]";
}

std::string interfaceJson(IVersionedInterface const* object)
{
    if (object == nullptr)
    {
        return "null";
    }
    InterfaceInfo const info = object->getInterfaceInfo();
    return "{\"kind\": " + quoted(info.kind) + ", \"major\": " + std::to_string(info.major)
        + ", \"minor\": " + std::to_string(info.minor)
        + ", \"language\": " + std::to_string(static_cast<int32_t>(object->getAPILanguage())) + "}";
}

// The candidates the host offers supportsFormatCombination at every position (more than a strongly typed
// network makes TensorRT ask about: the answers show what the plugin accepts).
std::vector<DataType> const kCANDIDATE_TYPES{DataType::kFLOAT, DataType::kHALF, DataType::kINT8, DataType::kINT32,
    DataType::kBOOL, DataType::kUINT8, DataType::kBF16, DataType::kINT64};
std::vector<TensorFormat> const kCANDIDATE_FORMATS{
    TensorFormat::kLINEAR, TensorFormat::kCHW4, TensorFormat::kCHW32, TensorFormat::kHWC8};

//! Fills inOut[from..] with values TensorRT leaves undefined: variant 0 invalid enum values and dims, variant 1
//! the values a plugin would want there (the network's types, kLINEAR); a plugin that reads past pos answers
//! differently for the two.
void fillUndefined(
    std::vector<DynamicPluginTensorDesc>& inOut, size_t from, int variant, std::vector<DataType> const& types)
{
    for (size_t i = from; i < inOut.size(); ++i)
    {
        DynamicPluginTensorDesc& d = inOut[i];
        if (variant == 0)
        {
            d.desc.type = static_cast<DataType>(0x5A);
            d.desc.format = static_cast<TensorFormat>(0x5A);
            d.desc.dims.nbDims = Dims::MAX_DIMS;
            std::fill(d.desc.dims.d, d.desc.dims.d + Dims::MAX_DIMS, -0x5A5A);
        }
        else
        {
            d.desc.type = types[i];
            d.desc.format = TensorFormat::kLINEAR;
            d.desc.dims.nbDims = 1;
            d.desc.dims.d[0] = 1;
        }
        d.min = d.opt = d.max = d.desc.dims;
    }
}

//! Destroys a plugin TensorRT owns (created, cloned or attached), with its virtual destructor as TensorRT's
//! delete does, but keeps its memory: the bindings leave the Python object alive after that (each
//! getCapabilityInterface call releases a reference that the destructor does not give back), still registered
//! at this address, and a later plugin allocated there would be taken for it (a double free at its end).
void destroy(IPluginV3*& plugin, std::string const& what, Report& report)
{
    if (plugin == nullptr)
    {
        return;
    }
    StderrCapture capture;
    plugin->~IPluginV3();
    plugin = nullptr;
    std::string const text = capture.finish();
    report.step("delete " + what, text.find("[ERROR]") == std::string::npos, "", text);
}

//! A clone (clone, attachToContext) that is the plugin itself: TensorRT would delete the one object twice. The
//! host deletes neither and says so (the bindings released a reference for each; deleting one would leave
//! Python an object whose C++ part is gone).
void keepSelfReturned(IPluginV3*& copy, IPluginV3*& plugin, std::string const& call, Report& report)
{
    if (copy != nullptr && copy == plugin)
    {
        report.step("not deleted: " + call + " returned the plugin itself", false);
        plugin = nullptr;
    }
    copy = nullptr;
}

//! A plugin's copy of itself, made by `make` (a call of `plugin`'s clone or attachToContext, named `call`) and
//! reported as `label`: true when it is another plugin. Otherwise `copy` is nullptr, and so is `plugin` where the
//! call returned the plugin itself (keepSelfReturned: neither is deleted).
template <typename Make>
bool makeCopy(IPluginV3*& copy, IPluginV3*& plugin, Make const& make, std::string const& call,
    std::string const& label, Report& report)
{
    StderrCapture capture;
    copy = make();
    std::string const text = capture.finish();
    bool const ok = copy != nullptr && copy != plugin;
    report.step(label, ok, "\"plugin\": " + interfaceJson(copy), text);
    if (!ok)
    {
        keepSelfReturned(copy, plugin, call, report);
    }
    return ok;
}

//! makeCopy with IPluginV3::clone: the clones of addPluginV3, of the builder's timing and of the build's check.
bool cloneOf(IPluginV3*& copy, IPluginV3*& plugin, std::string const& label, Report& report)
{
    return makeCopy(copy, plugin, [&plugin] { return plugin->clone(); }, "clone", label, report);
}

//! The CUDA driver functions the host needs, looked up at run time (the host links no CUDA library): the AOT
//! launch, and the made-up buffers of the build's timing enqueue.
struct Driver
{
    using Result = int32_t;
    Result (*moduleLoadData)(void**, void const*){nullptr};
    Result (*moduleGetFunction)(void**, void*, char const*){nullptr};
    Result (*moduleUnload)(void*){nullptr};
    Result (*launchKernel)(
        void*, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t, void*, void**, void**){nullptr};
    Result (*getErrorName)(Result, char const**){nullptr};
    Result (*ctxGetCurrent)(void**){nullptr};
    Result (*ctxSetCurrent)(void*){nullptr};
    Result (*memAlloc)(uint64_t*, size_t){nullptr};
    Result (*memFree)(uint64_t){nullptr};
    Result (*memcpyHtoD)(uint64_t, void const*, size_t){nullptr};
    Result (*streamCreate)(void**, uint32_t){nullptr};
    Result (*streamDestroy)(void*){nullptr};
    Result (*streamQuery)(void*){nullptr};
    Result (*streamSynchronize)(void*){nullptr};

    static Driver const* get(std::string& problem)
    {
        static Driver driver;
        static bool loaded = false;
        if (!loaded)
        {
            void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
            if (lib != nullptr)
            {
                auto find = [lib](auto& function, char const* name) {
                    function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(dlsym(lib, name));
                };
                find(driver.moduleLoadData, "cuModuleLoadData");
                find(driver.moduleGetFunction, "cuModuleGetFunction");
                find(driver.moduleUnload, "cuModuleUnload");
                find(driver.launchKernel, "cuLaunchKernel");
                find(driver.getErrorName, "cuGetErrorName");
                find(driver.ctxGetCurrent, "cuCtxGetCurrent");
                find(driver.ctxSetCurrent, "cuCtxSetCurrent");
                find(driver.memAlloc, "cuMemAlloc_v2");
                find(driver.memFree, "cuMemFree_v2");
                find(driver.memcpyHtoD, "cuMemcpyHtoD_v2");
                find(driver.streamCreate, "cuStreamCreate");
                find(driver.streamDestroy, "cuStreamDestroy_v2");
                find(driver.streamQuery, "cuStreamQuery");
                find(driver.streamSynchronize, "cuStreamSynchronize");
            }
            loaded = true;
        }
        if (driver.moduleLoadData == nullptr || driver.moduleGetFunction == nullptr || driver.launchKernel == nullptr)
        {
            problem = "no CUDA driver (libcuda.so.1) in this process";
            return nullptr;
        }
        return &driver;
    }

    //! The driver with the calls of device buffers, where they exist (a GPU machine); else nullptr (a CPU machine,
    //! or a stand-in libcuda of the launch calls only: the host then records launches instead).
    static Driver const* forBuffers()
    {
        std::string problem;
        Driver const* driver = get(problem);
        if (driver == nullptr || driver->ctxGetCurrent == nullptr || driver->memAlloc == nullptr
            || driver->memFree == nullptr || driver->memcpyHtoD == nullptr || driver->streamCreate == nullptr
            || driver->streamDestroy == nullptr || driver->streamQuery == nullptr
            || driver->streamSynchronize == nullptr)
        {
            return nullptr;
        }
        return driver;
    }

    //! Whether this thread has a current CUDA context (cuCtxGetCurrent names one).
    bool contextCurrent() const
    {
        void* context = nullptr;
        return ctxGetCurrent != nullptr && ctxGetCurrent(&context) == 0 && context != nullptr;
    }

    //! The driver, where this thread has a current CUDA context and the calls of device buffers exist; else nullptr.
    static Driver const* withContext()
    {
        Driver const* driver = forBuffers();
        return driver != nullptr && driver->contextCurrent() ? driver : nullptr;
    }

    std::string name(Result r) const
    {
        char const* text = nullptr;
        if (getErrorName != nullptr)
        {
            getErrorName(r, &text);
        }
        return text == nullptr ? "CUDA error " + std::to_string(r) : text;
    }
};

} // namespace

//! Exports of libnvinfer that the bindings link ---------------------------------------------------------------

extern "C" TENSORRTAPI void* createInferBuilder_INTERNAL(void*, int32_t) noexcept
{
    return nullptr; // no builder: the host drives plugins itself (host_build)
}

extern "C" TENSORRTAPI void* createInferRuntime_INTERNAL(void*, int32_t) noexcept
{
    return nullptr;
}

extern "C" TENSORRTAPI void* createInferRefitter_INTERNAL(void*, void*, int32_t) noexcept
{
    return nullptr;
}

extern "C" TENSORRTAPI IPluginRegistry* getPluginRegistry() noexcept
{
    return &registry();
}

extern "C" TENSORRTAPI IPluginRegistry* getBuilderPluginRegistry(EngineCapability) noexcept
{
    return &registry();
}

extern "C" TENSORRTAPI ILogger* getLogger() noexcept
{
    return nullptr;
}

extern "C" TENSORRTAPI int32_t getInferLibVersion() noexcept
{
    return HOST_TRT_MAJOR * 10000 + HOST_TRT_MINOR * 100 + HOST_TRT_PATCH;
}

extern "C" TENSORRTAPI int32_t getInferLibMajorVersion() noexcept
{
    return HOST_TRT_MAJOR;
}

extern "C" TENSORRTAPI int32_t getInferLibMinorVersion() noexcept
{
    return HOST_TRT_MINOR;
}

extern "C" TENSORRTAPI int32_t getInferLibPatchVersion() noexcept
{
    return HOST_TRT_PATCH;
}

extern "C" TENSORRTAPI int32_t getInferLibBuildVersion() noexcept
{
    return HOST_TRT_BUILD;
}

//! The host's entry points (ctypes) -----------------------------------------------------------------------------

//! The JSON report of the last host_* call on this thread.
HOST_API char const* host_report()
{
    return tLastReport.c_str();
}

//! The header set the host was compiled against (NvInferVersion.h), e.g. "11.1.0".
HOST_API char const* host_headers_version()
{
    static std::string const version = std::to_string(NV_TENSORRT_MAJOR) + "." + std::to_string(NV_TENSORRT_MINOR) + "."
        + std::to_string(NV_TENSORRT_PATCH);
    return version.c_str();
}

#ifndef HOST_SOURCE_SHA256
#define HOST_SOURCE_SHA256 ""
#endif

//! The SHA-256 of the plugin_host.cpp this host was built from (build.py passes it), so that host.py can refuse a
//! host built from another source (a layout carried to a machine where it cannot be rebuilt).
HOST_API char const* host_source_digest()
{
    return HOST_SOURCE_SHA256;
}

//! Sets the callback called at the points where TensorRT goes on with other work before it uses what a plugin
//! call returned (nullptr: none).
HOST_API void host_set_hook(Hook hook)
{
    gHook = hook;
}

//! How long the build's timing enqueue on a GPU is waited for before its kernels are reported as never ending.
HOST_API void host_set_timing_limit(double seconds)
{
    gTimingLimitSeconds = seconds;
}

//! The registry's creators as JSON [[kind, name, version, namespace], ...].
HOST_API char const* host_registry_list()
{
    Report report("registry");
    report.set("creators", jsonList<CreatorNames>(registry().list(), [](CreatorNames const& n) {
        return "[" + quoted(n.kind) + ", " + quoted(n.name) + ", " + quoted(n.version) + ", " + quoted(n.ns) + "]";
    }));
    publish(report);
    return host_report();
}

namespace
{

//! The V3One creator registered under these names, or nullptr (reported).
IPluginCreatorInterface* lookUp(Engine const& engine, Report& report, char const* expectedKind)
{
    IPluginCreatorInterface* creator
        = registry().getCreator(engine.name.c_str(), engine.version.c_str(), engine.ns.c_str());
    if (creator == nullptr)
    {
        report.step("IPluginRegistry::getCreator", false,
            "\"message\": "
                + quoted("no creator registered as (" + engine.name + ", " + engine.version + ", " + engine.ns + ")"));
        return nullptr;
    }
    CreatorNames const names = creatorNames(*creator);
    bool const ok = names.kind == expectedKind;
    report.step("IPluginRegistry::getCreator", ok,
        "\"kind\": " + quoted(names.kind) + ", \"creator\": " + interfaceJson(creator)
            + (ok ? "" : ", \"message\": " + quoted(std::string{"expected a creator of kind "} + expectedKind)));
    return ok ? creator : nullptr;
}

//! getCapabilityInterface(type) with the kind checked: returns the capability or nullptr (reported).
IPluginCapability* capability(IPluginV3& plugin, PluginCapabilityType type, std::string const& label,
    std::vector<std::string> const& kinds, Report& report)
{
    StderrCapture capture;
    IPluginCapability* result = plugin.getCapabilityInterface(type);
    std::string const text = capture.finish();
    std::string const kind = result == nullptr ? "" : result->getInterfaceInfo().kind;
    bool const ok = result != nullptr && std::find(kinds.begin(), kinds.end(), kind) != kinds.end();
    report.step(
        "IPluginV3::getCapabilityInterface(" + label + ")", ok, "\"interface\": " + interfaceJson(result), text);
    return ok ? result : nullptr;
}

//! Checks that a core capability's names match the engine's (the creator's).
template <typename Core>
bool checkNames(Core* core, Engine const& engine, std::string const& call, Report& report)
{
    StderrCapture capture;
    char const* name = core->getPluginName();
    char const* version = core->getPluginVersion();
    char const* ns = core->getPluginNamespace();
    std::string const text = capture.finish();
    bool const ok = name != nullptr && version != nullptr && ns != nullptr && engine.name == name
        && engine.version == version && engine.ns == ns;
    report.step(call, ok,
        "\"name\": " + quoted(name) + ", \"version\": " + quoted(version) + ", \"namespace\": " + quoted(ns), text);
    return ok;
}

//! One descriptor per input and per output, each filled by fill(dims, type, format, desc) with the engine's
//! choices (inputs first); false at the first fill that fails.
template <typename Desc, typename Fill>
bool fillDescs(Engine const& engine, std::vector<Desc>& in, std::vector<Desc>& out, Fill const& fill)
{
    size_t const nbIn = engine.inputs.size();
    in.resize(nbIn);
    out.resize(engine.nbOutputs);
    for (size_t i = 0; i < nbIn; ++i)
    {
        if (!fill(engine.inputs[i].dims, engine.inputs[i].type, engine.formats[i], in[i]))
        {
            return false;
        }
    }
    for (int32_t i = 0; i < engine.nbOutputs; ++i)
    {
        if (!fill(engine.outputDims[i], engine.outputTypes[i], engine.formats[nbIn + i], out[i]))
        {
            return false;
        }
    }
    return true;
}

//! The input and output descriptors of the build phase (dims with -1 for sizes, the profile's min/opt/max).
bool buildDescs(Engine const& engine, std::vector<DynamicPluginTensorDesc>& in,
    std::vector<DynamicPluginTensorDesc>& out, Report& report)
{
    auto fill = [&](std::vector<HostExpr const*> const& dims, DataType type, TensorFormat format,
                    DynamicPluginTensorDesc& d) {
        d = DynamicPluginTensorDesc{};
        d.desc.dims = wildcardDims(dims);
        d.desc.type = type;
        d.desc.format = format;
        d.desc.scale = 1.0F;
        auto low = evaluateAll(dims, profileSizes(engine, 0));
        auto opt = evaluateAll(dims, profileSizes(engine, 1));
        auto high = evaluateAll(dims, profileSizes(engine, 2));
        if (!low || !opt || !high)
        {
            report.fail("a shape has a size with no profile: " + dimsText(dims));
            return false;
        }
        d.min = toDims(*low);
        d.opt = toDims(*opt);
        d.max = toDims(*high);
        return true;
    };
    return fillDescs(engine, in, out, fill);
}

//! The inputs' shapes as the plugin's shape calls get them: the host's symbolic expressions.
std::vector<DimsExprs> inputExprs(Engine const& engine)
{
    std::vector<DimsExprs> inputs(engine.inputs.size());
    for (size_t i = 0; i < engine.inputs.size(); ++i)
    {
        inputs[i].nbDims = static_cast<int32_t>(engine.inputs[i].dims.size());
        std::copy(engine.inputs[i].dims.begin(), engine.inputs[i].dims.end(), inputs[i].d);
    }
    return inputs;
}

//! getOutputShapes with the host's IExprBuilder: inputs symbolic, outputs checked to be the builder's own and
//! evaluated for the profile's min, opt and max.
template <typename Build>
bool outputShapes(Build* build, Engine& engine, Report& report)
{
    std::vector<DimsExprs> const inputs = inputExprs(engine);
    std::vector<DimsExprs> outputs(engine.nbOutputs);
    for (auto& o : outputs)
    {
        o.nbDims = -1; // the plugin must set every output's shape
    }
    StderrCapture capture;
    int32_t const status = build->getOutputShapes(inputs.data(), static_cast<int32_t>(inputs.size()), nullptr, 0,
        outputs.data(), engine.nbOutputs, engine.builder);
    std::string text = capture.finish();
    for (auto const& error : engine.builder.errors())
    {
        text += (text.empty() ? "" : " | ") + error;
    }
    bool ok = status == 0;
    std::string problem;
    engine.outputDims.assign(engine.nbOutputs, {});
    for (int32_t i = 0; ok && i < engine.nbOutputs; ++i)
    {
        if (outputs[i].nbDims < 0 || outputs[i].nbDims > Dims::MAX_DIMS)
        {
            ok = false;
            problem = "output " + std::to_string(i) + " has nbDims " + std::to_string(outputs[i].nbDims);
            break;
        }
        for (int32_t j = 0; j < outputs[i].nbDims; ++j)
        {
            HostExpr const* e = engine.builder.own(outputs[i].d[j]);
            if (e == nullptr)
            {
                ok = false;
                problem = "output " + std::to_string(i) + " dim " + std::to_string(j)
                    + " is not an expression of the host's IExprBuilder";
                break;
            }
            engine.outputDims[i].push_back(e);
        }
    }
    std::string shapes = "[";
    for (int32_t i = 0; ok && i < engine.nbOutputs; ++i)
    {
        std::string evaluated = "[";
        for (int which = 0; which < 3; ++which)
        {
            auto values = evaluateAll(engine.outputDims[i], profileSizes(engine, which));
            evaluated += (which ? ", " : "") + (values ? intList(*values) : "null");
        }
        shapes += (i ? ", " : "") + std::string{"{\"exprs\": "} + dimsText(engine.outputDims[i])
            + ", \"min_opt_max\": " + evaluated + "]}";
    }
    shapes += "]";
    report.step("getOutputShapes", ok,
        "\"status\": " + std::to_string(status) + (ok ? ", \"outputs\": " + shapes : "")
            + (problem.empty() ? "" : ", \"message\": " + quoted(problem)),
        text);
    return ok;
}

//! getNbTactics + getValidTactics (both build phases): the tactics kept in the engine (0, the default's, refused).
template <typename Build>
void tactics(Build* build, Engine& engine, Report& report)
{
    StderrCapture capture;
    int32_t const count = build->getNbTactics();
    std::vector<int32_t> values(std::max(count, 0));
    int32_t const status = count > 0 ? build->getValidTactics(values.data(), count) : 0;
    std::string const text = capture.finish();
    bool const ok = count >= 0 && status == 0
        && std::find(values.begin(), values.end(), 0) == values.end(); // 0 is reserved for the default tactic
    engine.tactics = values;
    report.step("getNbTactics + getValidTactics", ok,
        "\"count\": " + std::to_string(count) + ", \"status\": " + std::to_string(status)
            + ", \"tactics\": " + intList(std::vector<int64_t>(values.begin(), values.end())),
        text);
}

//! setTactic with the engine's first valid tactic (0, the default, where there are none); true when it returned 0.
template <typename Runtime>
bool setTactic(Runtime* runtime, Engine const& engine, Report& report)
{
    StderrCapture capture;
    int32_t const status = runtime->setTactic(engine.tactics.empty() ? 0 : engine.tactics.front());
    std::string const text = capture.finish();
    report.step("setTactic", status == 0, "\"status\": " + std::to_string(status), text);
    return status == 0;
}

//! Whether getAliasedInput's answers (engine.aliases) are ones TensorRT accepts, for V3One and AOT plugins alike
//! (NvInferPythonPlugin.h: the AOT call "Behaves similary to `v_2_0::IPluginV3OneBuild.getAliasedInput()`"): each
//! output -1 or an input of the output's type, and no input twice. NvInferRuntime.h
//! (IPluginV3OneBuildV2::getAliasedInput, 10.4 to 11.1): "A given plugin input can only be aliased to a single
//! plugin output."
bool aliasesValid(Engine const& engine)
{
    int32_t const nbIn = static_cast<int32_t>(engine.inputs.size());
    std::vector<bool> taken(nbIn, false);
    for (int32_t i = 0; i < engine.nbOutputs; ++i)
    {
        int32_t const a = engine.aliases[i];
        if (a == -1)
        {
            continue;
        }
        if (a < 0 || a >= nbIn || taken[a] || engine.inputs[a].type != engine.outputTypes[i])
        {
            return false;
        }
        taken[a] = true;
    }
    return true;
}

} // namespace

namespace
{

//! Bytes of one element of a tensor of this type.
size_t elementBytes(DataType type)
{
    switch (type)
    {
    case DataType::kFLOAT:
    case DataType::kINT32: return 4;
    case DataType::kHALF:
    case DataType::kBF16: return 2;
    case DataType::kINT64: return 8;
    default: return 1;
    }
}

size_t tensorBytes(PluginTensorDesc const& d)
{
    size_t elements = 1;
    for (int32_t i = 0; i < d.dims.nbDims; ++i)
    {
        elements *= static_cast<size_t>(std::max<int64_t>(d.dims.d[i], 0));
    }
    return elements * elementBytes(d.type);
}

//! The addresses of one timing call on made-up buffers: one per input, one per output (0 for an output aliased to
//! an input: the call gives it that input's), the workspace's (0 for none) and the stream.
struct TimingAddresses
{
    std::vector<uint64_t> in, out;
    uint64_t workspace{0};
    uint64_t stream{0};
};

//! The buffers of the build's timing enqueue: on a GPU (a current CUDA context on this thread) device memory
//! holding random bytes and a stream of the host's; on a CPU made-up addresses and stream that nothing reads (the
//! test records the plugin's launch instead). Freed at the end, unless a kernel did not end (then left alone).
class MadeUpBuffers
{
public:
    MadeUpBuffers()
        : mDriver(Driver::withContext())
        , mNoContext(mDriver == nullptr && Driver::forBuffers() != nullptr)
    {
    }

    MadeUpBuffers(MadeUpBuffers const&) = delete;
    MadeUpBuffers& operator=(MadeUpBuffers const&) = delete;

    ~MadeUpBuffers()
    {
        if (mDriver == nullptr || mAbandoned)
        {
            return;
        }
        if (mStream != nullptr)
        {
            mDriver->streamSynchronize(mStream);
            mDriver->streamDestroy(mStream);
        }
        for (uint64_t address : mAllocations)
        {
            mDriver->memFree(address);
        }
    }

    bool onDevice() const
    {
        return mDriver != nullptr;
    }

    //! Whether wait() gave up on a kernel still running: its buffers are left alone, and so is anything else the
    //! kernel may still use (the AOT build's module).
    bool abandoned() const
    {
        return mAbandoned;
    }

    //! A GPU machine (the CUDA driver is there) but no current CUDA context on this thread: the made-up addresses
    //! and stream of a CPU run would reach a real driver through the plugin's launch (a crash, not a report).
    bool noContext() const
    {
        return mNoContext;
    }

    //! A buffer of `bytes` random bytes (0 for no bytes); false (problem set) where the driver refused.
    bool make(size_t bytes, uint64_t& address, std::string& problem)
    {
        address = 0;
        if (bytes == 0)
        {
            return true;
        }
        if (mDriver == nullptr)
        {
            address = kMADE_UP_BASE + (++mCount << 32);
            return true;
        }
        Driver::Result r = mDriver->memAlloc(&address, bytes);
        if (r != 0)
        {
            problem = "cuMemAlloc(" + std::to_string(bytes) + ") failed: " + mDriver->name(r);
            return false;
        }
        mAllocations.push_back(address);
        std::vector<uint64_t> random((bytes + 7) / 8);
        for (auto& word : random)
        {
            word = mRandom();
        }
        r = mDriver->memcpyHtoD(address, random.data(), bytes);
        if (r != 0)
        {
            problem = "cuMemcpyHtoD failed: " + mDriver->name(r);
            return false;
        }
        return true;
    }

    //! Every buffer of one timing call at these descriptors, in this order: the inputs, the outputs not aliased to
    //! an input, a workspace of `workspaceBytes` (0: none), then the stream; false (problem set) at the first the
    //! driver refused. The V3One enqueue and the AOT launch of the build's timing both get theirs here.
    bool forCall(Engine const& engine, std::vector<PluginTensorDesc> const& inDescs,
        std::vector<PluginTensorDesc> const& outDescs, size_t workspaceBytes, TimingAddresses& addresses,
        std::string& problem)
    {
        addresses = TimingAddresses{};
        addresses.in.resize(inDescs.size());
        addresses.out.resize(outDescs.size());
        bool ok = true;
        for (size_t i = 0; ok && i < inDescs.size(); ++i)
        {
            ok = make(tensorBytes(inDescs[i]), addresses.in[i], problem);
        }
        for (size_t i = 0; ok && i < outDescs.size(); ++i)
        {
            ok = engine.aliases[i] >= 0 || make(tensorBytes(outDescs[i]), addresses.out[i], problem);
        }
        return ok && make(workspaceBytes, addresses.workspace, problem) && stream(addresses.stream, problem);
    }

    //! The stream the timing enqueue gets.
    bool stream(uint64_t& handle, std::string& problem)
    {
        if (mDriver == nullptr)
        {
            handle = kMADE_UP_STREAM;
            return true;
        }
        Driver::Result const r = mStream == nullptr ? mDriver->streamCreate(&mStream, 1 /* non-blocking */) : 0;
        if (r != 0)
        {
            problem = "cuStreamCreate failed: " + mDriver->name(r);
            return false;
        }
        handle = reinterpret_cast<uint64_t>(mStream);
        return true;
    }

    //! Waits for the stream at most `seconds`; false (problem set) when its work failed or did not end.
    bool wait(double seconds, std::string& problem)
    {
        if (mDriver == nullptr || mStream == nullptr)
        {
            return true;
        }
        auto const deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
        Driver::Result r = mDriver->streamQuery(mStream);
        while (r == kNOT_READY && std::chrono::steady_clock::now() < deadline)
        {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
            r = mDriver->streamQuery(mStream);
        }
        if (r == kNOT_READY)
        {
            mAbandoned = true; // a kernel still running: its buffers stay
            char limit[32];
            std::snprintf(limit, sizeof(limit), "%g", seconds);
            problem = std::string{"the kernels did not end within "} + limit + " s";
            return false;
        }
        if (r != 0)
        {
            problem = "the stream's work failed: " + mDriver->name(r);
            return false;
        }
        return true;
    }

private:
    static constexpr uint64_t kMADE_UP_BASE = 0x7e0000000000ULL;
    static constexpr uint64_t kMADE_UP_STREAM = 0x5eed0000ULL;
    static constexpr Driver::Result kNOT_READY = 600; // CUDA_ERROR_NOT_READY
    Driver const* mDriver;
    bool mNoContext;
    std::vector<uint64_t> mAllocations;
    void* mStream{nullptr};
    uint64_t mCount{0};
    bool mAbandoned{false};
    std::mt19937_64 mRandom{std::random_device{}()};
};

//! The concrete descriptors for these sizes: inputs from their shapes, outputs from the plugin's own shape
//! expressions; false (reported) where a size is missing.
bool concreteDescs(Engine const& engine, Sizes const& sizes, std::vector<PluginTensorDesc>& in,
    std::vector<PluginTensorDesc>& out, Report& report)
{
    auto makeDesc
        = [&](std::vector<HostExpr const*> const& dims, DataType type, TensorFormat format, PluginTensorDesc& d) {
              auto values = evaluateAll(dims, sizes);
              if (!values)
              {
                  report.fail("a size is missing for the shape " + dimsText(dims));
                  return false;
              }
              d = PluginTensorDesc{};
              d.dims = toDims(*values);
              d.type = type;
              d.format = format;
              d.scale = 1.0F;
              return true;
          };
    return fillDescs(engine, in, out, makeDesc);
}

std::string descJson(PluginTensorDesc const& d)
{
    return "{\"dims\": " + dimsJson(d.dims) + ", \"type\": " + std::to_string(static_cast<int32_t>(d.type))
        + ", \"format\": " + std::to_string(static_cast<int32_t>(d.format)) + "}";
}

//! onShapeChange with these descriptors, reported as `call`; true when it returned 0.
bool shapeChange(IPluginV3OneRuntime* runtime, std::vector<PluginTensorDesc> const& in,
    std::vector<PluginTensorDesc> const& out, std::string const& call, Report& report)
{
    StderrCapture capture;
    int32_t const status = runtime->onShapeChange(
        in.data(), static_cast<int32_t>(in.size()), out.data(), static_cast<int32_t>(out.size()));
    std::string const text = capture.finish();
    report.step(call, status == 0,
        "\"status\": " + std::to_string(status) + ", \"in\": " + jsonList<PluginTensorDesc>(in, descJson)
            + ", \"out\": " + jsonList<PluginTensorDesc>(out, descJson),
        text);
    return status == 0;
}

std::string pointerList(std::vector<uint64_t> const& values)
{
    return intList(std::vector<int64_t>(values.begin(), values.end()));
}

//! The pointers enqueue gets for its outputs: an output the plugin aliases to an input gets that input's pointer
//! (TensorRT's in-place binding), the others the pointers given.
std::vector<uint64_t> outputPointers(Engine const& engine, std::vector<uint64_t> const& in, uint64_t const* given)
{
    std::vector<uint64_t> out(engine.nbOutputs);
    for (int32_t i = 0; i < engine.nbOutputs; ++i)
    {
        int32_t const a = engine.aliases[i];
        out[i] = a >= 0 ? in[a] : given[i];
    }
    return out;
}

//! One enqueue call with these pointers.
//! The pointer arrays enqueue takes, converted once from the addresses, before any (timed) call.
struct EnqueuePointers
{
    std::vector<void const*> inputs;
    std::vector<void*> outputs;

    EnqueuePointers(std::vector<uint64_t> const& in, std::vector<uint64_t> const& out)
        : inputs(in.size())
        , outputs(out.size())
    {
        std::transform(
            in.begin(), in.end(), inputs.begin(), [](uint64_t p) { return reinterpret_cast<void const*>(p); });
        std::transform(out.begin(), out.end(), outputs.begin(), [](uint64_t p) { return reinterpret_cast<void*>(p); });
    }
};

int32_t callEnqueue(IPluginV3OneRuntime* runtime, std::vector<PluginTensorDesc> const& inDescs,
    std::vector<PluginTensorDesc> const& outDescs, EnqueuePointers const& pointers, uint64_t workspace,
    uint64_t stream)
{
    return runtime->enqueue(inDescs.data(), outDescs.data(), pointers.inputs.data(), pointers.outputs.data(),
        reinterpret_cast<void*>(workspace), reinterpret_cast<cudaStream_t>(stream));
}


//! What the builder may do to time a plugin, on a clone of the network's plugin: onShapeChange at kOPT, then
//! enqueue (twice) on inputs it made up and a workspace of the size getWorkspaceSize promised.
//! NvInferRuntime.h (IPluginV3OneRuntime::onShapeChange, 10.4 to 11.1): "IBuilder will call this function once per
//! profile, with `in` resolved to the values specified by the kOPT field of the current profile." What enqueue
//! then reads is the builder's: a TensorRT maintainer, NVIDIA/TensorRT#2552, on plugins timed while building: the
//! builder runs them on inputs it made up. On a GPU (a current CUDA context) the buffers hold random bytes and the
//! host waits for the kernels (gTimingLimitSeconds at most); on a CPU the addresses are made up and the plugin's
//! launch is recorded by the test.
bool timeOnMadeUpInputs(IPluginV3& plugin, Engine const& engine, Report& report)
{
    IPluginV3* timing = nullptr;
    IPluginV3* self = &plugin;
    if (!cloneOf(timing, self, "IPluginV3::clone (the builder's copy for timing)", report))
    {
        return false;
    }
    bool ok = false;
    {
        MadeUpBuffers buffers;
        if (buffers.noContext())
        {
            // TensorRT's builder times plugins inside the CUDA context it builds in; with none current here there
            // is no device to make buffers on, and made-up addresses would reach the real driver.
            report.fail("the build's timing enqueue needs a current CUDA context on this thread (the CUDA driver is "
                        "here, but cuCtxGetCurrent names none): make one current first, e.g. torch.cuda.init()");
        }
        auto* runtime = buffers.noContext() ? nullptr
                                            : static_cast<IPluginV3OneRuntime*>(capability(*timing,
                                                PluginCapabilityType::kRUNTIME, "kRUNTIME of the timing copy",
                                                {"PLUGIN_V3ONE_RUNTIME"}, report));
        std::vector<PluginTensorDesc> inDescs, outDescs;
        ok = runtime != nullptr && setTactic(runtime, engine, report)
            && concreteDescs(engine, profileSizes(engine, 1), inDescs, outDescs, report)
            && shapeChange(runtime, inDescs, outDescs, "onShapeChange (build: kOPT)", report);
        TimingAddresses call;
        std::string problem;
        ok = ok && buffers.forCall(engine, inDescs, outDescs, engine.workspace, call, problem);
        if (!problem.empty())
        {
            report.fail("made-up buffers for the timing enqueue: " + problem);
        }
        if (ok)
        {
            std::vector<uint64_t> const out = outputPointers(engine, call.in, call.out.data());
            int32_t status = 0;
            int32_t calls = 0;
            EnqueuePointers const pointers(call.in, out);
            StderrCapture capture;
            while (calls < 2 && status == 0)
            {
                status = callEnqueue(runtime, inDescs, outDescs, pointers, call.workspace, call.stream);
                ++calls;
            }
            std::string const text = capture.finish();
            report.step("IPluginV3OneRuntime::enqueue (build: timing on made-up inputs at kOPT)", status == 0,
                "\"status\": " + std::to_string(status) + ", \"calls\": " + std::to_string(calls)
                    + ", \"on_device\": " + (buffers.onDevice() ? "true" : "false") + ", \"inputs\": "
                    + pointerList(call.in) + ", \"outputs\": " + pointerList(out) + ", \"workspace\": "
                    + std::to_string(call.workspace) + ", \"workspace_bytes\": " + std::to_string(engine.workspace)
                    + ", \"stream\": " + std::to_string(call.stream),
                text);
            ok = status == 0;
            if (ok && buffers.onDevice())
            {
                ok = buffers.wait(gTimingLimitSeconds, problem);
                report.step("the timing enqueue's kernels on made-up inputs", ok,
                    ok ? "" : "\"message\": " + quoted(problem));
            }
        }
    }
    destroy(timing, "the timing copy", report);
    return ok && report.ok();
}

//! getWorkspaceSize for these descriptors, reported as `call`; nothing where the trampoline printed an error (the
//! bindings swallow an exception there and return 0: an [ERROR] line is the only sign).
std::optional<size_t> workspaceSize(IPluginV3OneBuild* build, std::vector<DynamicPluginTensorDesc> const& in,
    std::vector<DynamicPluginTensorDesc> const& out, std::string const& call, Report& report)
{
    StderrCapture capture;
    size_t const bytes = build->getWorkspaceSize(
        in.data(), static_cast<int32_t>(in.size()), out.data(), static_cast<int32_t>(out.size()));
    std::string const text = capture.finish();
    bool const ok = text.find("[ERROR]") == std::string::npos;
    report.step(call, ok, "\"bytes\": " + std::to_string(bytes), text);
    return ok ? std::optional<size_t>{bytes} : std::nullopt;
}

//! What the two build phases share: the engine being made, the report, the plugins TensorRT would own (destroyed
//! at the end, the clone first) and the steps whose calls are the same for V3One and quick plugins.
class BuildPhase
{
public:
    BuildPhase(char const* phase, char const* name, char const* version, char const* ns)
        : engine(std::make_unique<Engine>())
        , report(phase)
    {
        engine->name = name == nullptr ? "" : name;
        engine->version = version == nullptr ? "" : version;
        engine->ns = ns == nullptr ? "" : ns;
    }

    //! Reads the spec and finds the creator, of this kind; nullptr (reported) otherwise.
    IPluginCreatorInterface* start(char const* spec, char const* kind)
    {
        return parseSpec(spec == nullptr ? "" : spec, *engine, report) ? lookUp(*engine, report, kind) : nullptr;
    }

    //! Destroys the plugins and publishes the report; the engine when every step succeeded, else nullptr.
    void* finish(bool success)
    {
        destroy(copy, "the clone", report);
        destroy(plugin, "the build plugin", report);
        publish(report);
        return success && report.ok() ? engine.release() : nullptr;
    }

    //! The network's fields as the collection createPlugin gets.
    PluginFieldCollection networkFields() const
    {
        return {static_cast<int32_t>(engine->fieldSpecFields.size()), engine->fieldSpecFields.data()};
    }

    template <typename Build>
    bool nbOutputs(Build* build)
    {
        StderrCapture capture;
        engine->nbOutputs = build->getNbOutputs();
        std::string const text = capture.finish();
        bool const ok = engine->nbOutputs > 0;
        report.step("getNbOutputs", ok, "\"value\": " + std::to_string(engine->nbOutputs), text);
        return ok;
    }

    //! Reports getOutputDataTypes' answer (engine->outputTypes, pre-filled with -1).
    bool outputTypes(char const* call, int32_t status, std::string const& text)
    {
        bool ok = status == 0;
        std::vector<int64_t> types;
        for (DataType t : engine->outputTypes)
        {
            types.push_back(static_cast<int64_t>(t));
            ok = ok && t != static_cast<DataType>(-1);
        }
        report.step(call, ok, "\"status\": " + std::to_string(status) + ", \"types\": " + intList(types), text);
        return ok;
    }

    //! configurePlugin as the builder may call it. NvInferRuntime.h (IPluginV3OneBuild::configurePlugin, 10.4 to
    //! 11.1): "configurePlugin() can be called multiple times in the build phase during creation of an engine by
    //! IBuilder." The host calls it for the profile (min, opt, max), then as for profiles of one point each at
    //! kMIN, kOPT and kMAX, then for the profile again; after each call, after(label) (V3One plugins:
    //! getWorkspaceSize, "called after the plugin is configured"). False at the first failure.
    template <typename Build, typename After>
    bool configureRounds(Build* build, std::vector<DynamicPluginTensorDesc> const& in,
        std::vector<DynamicPluginTensorDesc> const& out, std::string const& details, After const& after)
    {
        enum Round
        {
            kPROFILE = -1,
            kMIN = 0,
            kOPT = 1,
            kMAX = 2
        };
        std::pair<Round, char const*> const rounds[] = {{kPROFILE, "the profile: min, opt, max"},
            {kMIN, "kMIN only"}, {kOPT, "kOPT only"}, {kMAX, "kMAX only"}, {kPROFILE, "the profile again"}};
        for (auto const& [round, label] : rounds)
        {
            std::vector<DynamicPluginTensorDesc> roundIn(in), roundOut(out);
            for (auto* descs : {&roundIn, &roundOut})
            {
                for (auto& d : *descs)
                {
                    if (round != kPROFILE)
                    {
                        Dims const point = round == kMIN ? d.min : round == kOPT ? d.opt : d.max;
                        d.min = d.opt = d.max = point;
                    }
                }
            }
            StderrCapture capture;
            int32_t const status = build->configurePlugin(
                roundIn.data(), static_cast<int32_t>(engine->inputs.size()), roundOut.data(), engine->nbOutputs);
            std::string const text = capture.finish();
            report.step(std::string{"configurePlugin ("} + label + ")", status == 0,
                "\"status\": " + std::to_string(status) + (round == kPROFILE ? details : ""), text);
            if (status != 0 || !after(label, roundIn, roundOut))
            {
                return false;
            }
        }
        return true;
    }

    //! What addPluginV3 and the ONNX parser do with the plugin createPlugin made: the network keeps a clone and the
    //! parser deletes its own right away (onnx-tensorrt 10.16, FallbackPluginImporter, read 2026-12-01: the
    //! plugin it created is deleted right after addPluginV3). NvInferPluginBase.h (IPluginV3::clone, 10.16.0 and
    //! 11.1.0; NvInferRuntime.h in 10.4.0): "The cloned object must be in a fully initialized state." Every later
    //! build call goes to the clone.
    bool adoptClone()
    {
        IPluginV3* made = plugin;
        if (!cloneOf(plugin, made, "IPluginV3::clone (addPluginV3: the network's copy)", report))
        {
            plugin = made; // still the parser's (nullptr where clone returned it: kept, not deleted)
            return false;
        }
        destroy(made, "the parser's plugin (right after addPluginV3)", report);
        return report.ok();
    }

    //! clone, then the clone's core capability (kind coreKind) and names; a clone that is the plugin itself is
    //! reported and neither is destroyed.
    template <typename Core>
    bool cloneChecked(char const* coreKind)
    {
        if (!cloneOf(copy, plugin, "IPluginV3::clone", report))
        {
            return false;
        }
        auto* core = static_cast<Core*>(
            capability(*copy, PluginCapabilityType::kCORE, "kCORE of the clone", {coreKind}, report));
        return core != nullptr && checkNames(core, *engine, "the clone's getPluginName/Version/Namespace", report);
    }

    std::unique_ptr<Engine> engine;
    Report report;
    IPluginV3* plugin{nullptr};
    IPluginV3* copy{nullptr};
};

//! The build phase of a V3One plugin (IPluginV3OneBuild(V2)), in TensorRT's order. Returns the engine (what the
//! runtime phase needs: the fields read back, types, formats, shapes, aliasing) or nullptr; the report says
//! what each call got.
void* build(char const* name, char const* version, char const* ns, char const* spec)
{
    BuildPhase phase("build", name, version, ns);
    Engine* engine = phase.engine.get();
    Report& report = phase.report;
    IPluginV3*& plugin = phase.plugin;
    auto finish = [&](bool success) { return phase.finish(success); };
    IPluginCreatorInterface* found = phase.start(spec, "PLUGIN CREATOR_V3ONE");
    if (found == nullptr)
    {
        return finish(false);
    }
    auto* creator = static_cast<IPluginCreatorV3One*>(found);

    // The creator's advertised fields (TensorRT may read them at any time after registration).
    {
        StderrCapture capture;
        PluginFieldCollection const* advertised = creator->getFieldNames();
        std::string text = capture.finish();
        hookPoint("getFieldNames");
        std::vector<StoredField> fields;
        std::string problem;
        bool const ok = copyFields(advertised, fields, problem);
        report.step("IPluginCreatorV3One::getFieldNames", ok,
            ok ? "\"fields\": " + jsonList<StoredField>(fields, fieldJson) : "\"message\": " + quoted(problem), text);
        if (!ok)
        {
            return finish(false);
        }
    }

    // createPlugin(kBUILD) with the network's fields
    {
        PluginFieldCollection const fc = phase.networkFields();
        StderrCapture capture;
        plugin = creator->createPlugin(engine->name.c_str(), &fc, TensorRTPhase::kBUILD);
        std::string const text = capture.finish();
        report.step("IPluginCreatorV3One::createPlugin(kBUILD)", plugin != nullptr,
            "\"plugin\": " + interfaceJson(plugin), text);
        if (plugin == nullptr)
        {
            return finish(false);
        }
    }
    if (!phase.adoptClone())
    {
        return finish(false);
    }
    auto* core = static_cast<IPluginV3OneCore*>(
        capability(*plugin, PluginCapabilityType::kCORE, "kCORE", {"PLUGIN_V3ONE_CORE"}, report));
    if (core == nullptr || !checkNames(core, *engine, "IPluginV3OneCore::getPluginName/Version/Namespace", report))
    {
        return finish(false);
    }
    IPluginCapability* buildCapability
        = capability(*plugin, PluginCapabilityType::kBUILD, "kBUILD", {"PLUGIN_V3ONE_BUILD"}, report);
    if (buildCapability == nullptr)
    {
        return finish(false);
    }
    auto* build = static_cast<IPluginV3OneBuild*>(buildCapability);
    bool const v2 = buildCapability->getInterfaceInfo().major >= 2;
    auto* buildV2 = v2 ? static_cast<IPluginV3OneBuildV2*>(buildCapability) : nullptr;

    size_t const nbIn = engine->inputs.size();
    if (!phase.nbOutputs(build))
    {
        return finish(false);
    }
    {
        std::vector<DataType> inTypes;
        for (auto const& input : engine->inputs)
        {
            inTypes.push_back(input.type);
        }
        engine->outputTypes.assign(engine->nbOutputs, static_cast<DataType>(-1));
        StderrCapture capture;
        int32_t const status = build->getOutputDataTypes(
            engine->outputTypes.data(), engine->nbOutputs, inTypes.data(), static_cast<int32_t>(nbIn));
        if (!phase.outputTypes("getOutputDataTypes", status, capture.finish()))
        {
            return finish(false);
        }
    }
    if (!outputShapes(build, *engine, report))
    {
        return finish(false);
    }

    // supportsFormatCombination: position by position, inOut[0..pos-1] as chosen, inOut[pos] each candidate,
    // the rest undefined (two variants: an answer that differs between them read past pos).
    {
        size_t const nbIO = nbIn + engine->nbOutputs;
        std::vector<DynamicPluginTensorDesc> inOut(nbIO);
        std::vector<DataType> types;
        for (auto const& input : engine->inputs)
        {
            types.push_back(input.type);
        }
        types.insert(types.end(), engine->outputTypes.begin(), engine->outputTypes.end());
        engine->formats.assign(nbIO, TensorFormat::kLINEAR);
        std::string positions = "[";
        bool ok = true;
        std::string problem;
        std::string allText;
        for (size_t pos = 0; pos < nbIO && ok; ++pos)
        {
            DataType const wanted = pos < nbIn ? engine->inputs[pos].type : engine->outputTypes[pos - nbIn];
            std::vector<HostExpr const*> const& dims
                = pos < nbIn ? engine->inputs[pos].dims : engine->outputDims[pos - nbIn];
            std::vector<std::string> accepted;
            std::optional<TensorFormat> chosen;
            for (DataType type : kCANDIDATE_TYPES)
            {
                for (TensorFormat format : kCANDIDATE_FORMATS)
                {
                    bool answers[2];
                    for (int variant = 0; variant < 2; ++variant)
                    {
                        inOut[pos] = DynamicPluginTensorDesc{};
                        inOut[pos].desc.dims = wildcardDims(dims);
                        inOut[pos].desc.type = type;
                        inOut[pos].desc.format = format;
                        inOut[pos].desc.scale = 1.0F;
                        inOut[pos].min = inOut[pos].opt = inOut[pos].max = inOut[pos].desc.dims;
                        fillUndefined(inOut, pos + 1, variant, types);
                        StderrCapture capture;
                        answers[variant] = build->supportsFormatCombination(
                            static_cast<int32_t>(pos), inOut.data(), static_cast<int32_t>(nbIn), engine->nbOutputs);
                        std::string const text = capture.finish();
                        if (!text.empty() && allText.size() < 4096)
                        {
                            allText += (allText.empty() ? "" : " | ") + text;
                        }
                    }
                    if (answers[0] != answers[1])
                    {
                        ok = false;
                        problem = "the answer at pos " + std::to_string(pos)
                            + " depends on inOut[pos + 1 ..], which TensorRT leaves undefined";
                    }
                    if (answers[0])
                    {
                        accepted.push_back(typeFormatJson(type, format));
                        if (type == wanted && !chosen)
                        {
                            chosen = format;
                        }
                    }
                }
            }
            if (ok && !chosen)
            {
                ok = false;
                problem = "no format accepted at pos " + std::to_string(pos) + " for its type "
                    + std::to_string(static_cast<int32_t>(wanted));
            }
            if (chosen)
            {
                engine->formats[pos] = *chosen;
                inOut[pos].desc.type = wanted;
                inOut[pos].desc.format = *chosen;
            }
            positions += (pos ? ", " : "") + std::string{"{\"pos\": "} + std::to_string(pos)
                + ", \"accepted\": " + jsonList<std::string>(accepted, [](std::string const& s) { return s; })
                + ", \"chosen\": " + (chosen ? typeFormatJson(wanted, *chosen) : "null") + "}";
        }
        positions += "]";
        report.step("supportsFormatCombination", ok,
            "\"positions\": " + positions + (problem.empty() ? "" : ", \"message\": " + quoted(problem)), allText);
        if (!ok)
        {
            return finish(false);
        }
    }

    std::vector<DynamicPluginTensorDesc> in, out;
    if (!buildDescs(*engine, in, out, report))
    {
        return finish(false);
    }
    std::string const descs = "\"in\": " + jsonList<DynamicPluginTensorDesc>(in, [](DynamicPluginTensorDesc const& d) {
        return "{\"dims\": " + dimsJson(d.desc.dims) + ", \"min\": " + dimsJson(d.min) + ", \"opt\": " + dimsJson(d.opt)
            + ", \"max\": " + dimsJson(d.max) + "}";
    });
    // configurePlugin several times, getWorkspaceSize after each: the engine keeps the last answer for the
    // profile, which must be the first one's (the same descriptors).
    std::optional<size_t> profileWorkspace;
    auto afterConfigure = [&](char const* label, std::vector<DynamicPluginTensorDesc> const& roundIn,
                              std::vector<DynamicPluginTensorDesc> const& roundOut) {
        auto bytes = workspaceSize(build, roundIn, roundOut, std::string{"getWorkspaceSize ("} + label + ")", report);
        if (!bytes)
        {
            return false;
        }
        if (std::string{label}.rfind("the profile", 0) == 0)
        {
            if (profileWorkspace && *profileWorkspace != *bytes)
            {
                report.step("getWorkspaceSize for the same profile", false,
                    "\"message\": " + quoted("answered " + std::to_string(*profileWorkspace) + " bytes, then "
                        + std::to_string(*bytes) + " after other configurePlugin calls"));
                return false;
            }
            profileWorkspace = bytes;
            engine->workspace = *bytes;
        }
        return true;
    };
    if (!phase.configureRounds(build, in, out, ", " + descs, afterConfigure))
    {
        return finish(false);
    }
    {
        engine->aliases.assign(engine->nbOutputs, -1);
        std::string text;
        bool ok = true;
        for (int32_t i = 0; i < engine->nbOutputs && v2; ++i)
        {
            StderrCapture capture;
            engine->aliases[i] = buildV2->getAliasedInput(i);
            std::string const t = capture.finish();
            text += (text.empty() || t.empty() ? "" : " | ") + t;
            ok = ok && t.find("[ERROR]") == std::string::npos;
        }
        ok = ok && aliasesValid(*engine);
        report.step(v2 ? "IPluginV3OneBuildV2::getAliasedInput" : "getAliasedInput (IPluginV3OneBuild v1: none)", ok,
            "\"aliases\": " + intList(std::vector<int64_t>(engine->aliases.begin(), engine->aliases.end())), text);
        if (!ok)
        {
            return finish(false);
        }
    }
    tactics(build, *engine, report);
    {
        StderrCapture capture;
        char const* cacheId = build->getTimingCacheID();
        int32_t const limit = build->getFormatCombinationLimit();
        char const* metadata = build->getMetadataString();
        std::string const text = capture.finish();
        report.step("getTimingCacheID + getFormatCombinationLimit + getMetadataString", limit > 0,
            "\"timing_cache_id\": " + quoted(cacheId) + ", \"format_combination_limit\": " + std::to_string(limit)
                + ", \"metadata\": " + quoted(metadata),
            text);
    }
    if (!report.ok() || !timeOnMadeUpInputs(*plugin, *engine, report))
    {
        return finish(false);
    }

    // Serialization: the build plugin's runtime capability gives the fields, read after TensorRT moved on.
    auto* runtime = static_cast<IPluginV3OneRuntime*>(
        capability(*plugin, PluginCapabilityType::kRUNTIME, "kRUNTIME", {"PLUGIN_V3ONE_RUNTIME"}, report));
    if (runtime == nullptr)
    {
        return finish(false);
    }
    {
        StderrCapture capture;
        PluginFieldCollection const* fields = runtime->getFieldsToSerialize();
        std::string const text = capture.finish();
        hookPoint("getFieldsToSerialize");
        std::string problem;
        bool const ok = copyFields(fields, engine->fields, problem);
        report.step("IPluginV3OneRuntime::getFieldsToSerialize", ok,
            ok ? "\"fields\": " + jsonList<StoredField>(engine->fields, fieldJson) : "\"message\": " + quoted(problem),
            text);
        if (!ok)
        {
            return finish(false);
        }
    }

    // clone: the copy must be a complete plugin with the same names and outputs.
    if (!phase.cloneChecked<IPluginV3OneCore>("PLUGIN_V3ONE_CORE"))
    {
        return finish(false);
    }
    auto* copyBuild = static_cast<IPluginV3OneBuild*>(
        capability(*phase.copy, PluginCapabilityType::kBUILD, "kBUILD of the clone", {"PLUGIN_V3ONE_BUILD"}, report));
    if (copyBuild != nullptr)
    {
        int32_t const outputs = copyBuild->getNbOutputs();
        report.step("the clone's getNbOutputs", outputs == engine->nbOutputs, "\"value\": " + std::to_string(outputs));
    }
    return finish(true);
}

} // namespace

//! The engine's decisions as JSON (the same as the build report's, for a later check).
HOST_API char const* host_engine_describe(void* handle)
{
    auto const* engine = static_cast<Engine const*>(handle);
    Report report("engine");
    report.set("workspace", std::to_string(engine->workspace));
    report.set("aliases", intList(std::vector<int64_t>(engine->aliases.begin(), engine->aliases.end())));
    report.set("fields", jsonList<StoredField>(engine->fields, fieldJson));
    report.set("outputs", std::to_string(engine->nbOutputs));
    publish(report);
    return host_report();
}

namespace
{

//! An execution context of an engine: the plugin attached to it, its shapes and the addresses it last enqueued with.
struct Context
{
    Engine* engine{nullptr};
    IPluginV3* attached{nullptr}; // attachToContext's clone (the execution context's)
    IPluginV3OneRuntime* runtime{nullptr};
    HostResourceContext resources;
    Sizes sizes;
    std::vector<PluginTensorDesc> in, out;
    std::optional<std::vector<uint64_t>> bound; // the inputs', outputs', workspace's addresses onShapeChange saw last
    int64_t lastNanoseconds{0};
};

//! Deserialization's part of the runtime phase, once per engine: the engine's plugin from its serialized fields
//! (createPlugin kRUNTIME), its runtime capability, and getWorkspaceSize asked of it. NvInferRuntime.h
//! (IPluginV3OneBuild::getWorkspaceSize, 10.4 to 11.1): "This function is called after the plugin is configured,
//! and possibly during execution." A runtime plugin was never configured: its answer for the build's descriptors
//! must be the one the build promised (TensorRT may size the workspace from either; the bindings make an
//! exception there 0 bytes).
bool deserialize(Engine& engine, Report& report)
{
    IPluginCreatorInterface* found = lookUp(engine, report, "PLUGIN CREATOR_V3ONE");
    if (found == nullptr)
    {
        return false;
    }
    auto* creator = static_cast<IPluginCreatorV3One*>(found);
    engine.fieldsView.clear();
    for (auto const& field : engine.fields)
    {
        engine.fieldsView.emplace_back(field.name.c_str(), field.data.data(), field.type, field.length);
    }
    {
        PluginFieldCollection fc{static_cast<int32_t>(engine.fieldsView.size()), engine.fieldsView.data()};
        StderrCapture capture;
        engine.runtimePlugin = creator->createPlugin(engine.name.c_str(), &fc, TensorRTPhase::kRUNTIME);
        std::string const text = capture.finish();
        report.step("IPluginCreatorV3One::createPlugin(kRUNTIME, the serialized fields)",
            engine.runtimePlugin != nullptr, "\"plugin\": " + interfaceJson(engine.runtimePlugin), text);
        if (engine.runtimePlugin == nullptr)
        {
            return false;
        }
    }
    engine.runtime = static_cast<IPluginV3OneRuntime*>(capability(
        *engine.runtimePlugin, PluginCapabilityType::kRUNTIME, "kRUNTIME", {"PLUGIN_V3ONE_RUNTIME"}, report));
    if (engine.runtime == nullptr)
    {
        return false;
    }
    // A runtime plugin needs no kBUILD (NvInferPluginBase.h: "IPluginV3 objects added for the runtime phase must
    // return valid objects for PluginCapabilityType::kCORE and PluginCapabilityType::kRUNTIME"): asked only where
    // it has one.
    IPluginCapability* buildCapability = nullptr;
    {
        StderrCapture capture;
        buildCapability = engine.runtimePlugin->getCapabilityInterface(PluginCapabilityType::kBUILD);
        std::string const text = capture.finish();
        std::string const kind = buildCapability == nullptr ? "" : buildCapability->getInterfaceInfo().kind;
        report.step("IPluginV3::getCapabilityInterface(kBUILD of the runtime plugin)", true,
            "\"interface\": " + interfaceJson(buildCapability), text);
        if (kind != "PLUGIN_V3ONE_BUILD")
        {
            return true;
        }
    }
    std::vector<DynamicPluginTensorDesc> in, out;
    if (!buildDescs(engine, in, out, report))
    {
        return false;
    }
    auto bytes = workspaceSize(static_cast<IPluginV3OneBuild*>(buildCapability), in, out,
        "getWorkspaceSize (the runtime plugin, never configured)", report);
    if (bytes && *bytes != engine.workspace)
    {
        report.step("the runtime plugin's workspace against the build's", false,
            "\"message\": "
                + quoted("the runtime plugin asks for " + std::to_string(*bytes) + " bytes where the build promised "
                    + std::to_string(engine.workspace)
                    + (*bytes < engine.workspace ? " (a size that only configurePlugin computed?)" : "")
                    + ": the same descriptors must give the same workspace"));
    }
    return report.ok();
}

//! The runtime phase up to onShapeChange, in TensorRT's order: at the engine's first context its deserialization
//! (above), then the execution context's own plugin (attachToContext), setTactic, onShapeChange for the concrete
//! sizes ("N=1000 E=5000"). Returns the context or nullptr. NvInferRuntime.h (IExecutionContext, 10.4 to 11.1):
//! "Multiple execution contexts may exist for one ICudaEngine instance, allowing the same engine to be used for
//! the execution of multiple batches simultaneously": each context's plugin is attached from the one engine plugin.
void* runtimeOpen(void* handle, char const* sizesText)
{
    auto* engine = static_cast<Engine*>(handle);
    auto context = std::make_unique<Context>();
    context->engine = engine;
    Report report("runtime");
    auto fail = [&]() -> void* {
        destroy(context->attached, "the context's plugin", report);
        if (engine != nullptr && engine->runtime == nullptr)
        {
            destroy(engine->runtimePlugin, "the engine's plugin", report);
        }
        publish(report);
        return nullptr;
    };
    if (engine == nullptr || !parseSizes(sizesText == nullptr ? "" : sizesText, context->sizes))
    {
        report.fail("no engine, or sizes not given as NAME=VALUE");
        return fail();
    }
    if (engine->runtimePlugin == nullptr && !deserialize(*engine, report))
    {
        engine->runtime = nullptr;
        return fail();
    }
    auto attach = [&] { return engine->runtime->attachToContext(&context->resources); };
    if (!makeCopy(context->attached, engine->runtimePlugin, attach, "attachToContext",
            "IPluginV3OneRuntime::attachToContext", report))
    {
        if (engine->runtimePlugin == nullptr)
        {
            engine->runtime = nullptr; // the engine's plugin was returned: kept, neither deleted
        }
        return fail();
    }
    context->runtime = static_cast<IPluginV3OneRuntime*>(capability(*context->attached, PluginCapabilityType::kRUNTIME,
        "kRUNTIME of the context's plugin", {"PLUGIN_V3ONE_RUNTIME"}, report));
    if (context->runtime == nullptr || !setTactic(context->runtime, *engine, report)
        || !concreteDescs(*engine, context->sizes, context->in, context->out, report)
        || !shapeChange(context->runtime, context->in, context->out, "onShapeChange", report))
    {
        return fail();
    }
    publish(report);
    return context.release();
}

//! enqueue `repeats` times on `stream` with the inputs' device pointers; an output the plugin aliases to an input
//! gets that input's pointer (TensorRT's in-place binding), the others the pointers given (one per output, in
//! order; aliased entries ignored). New sizes ("N=10 E=20", or empty: unchanged) or addresses since the last
//! onShapeChange call it again first. NvInferRuntime.h (IPluginV3OneRuntime::onShapeChange, 10.4 to 11.1):
//! "IExecutionContext will call this during the next subsequent instance of enqueueV3() or executeV2() if: [...]
//! An input binding is changed via setInputTensorAddress() or setTensorAddress() or setInputShape()." Returns 0 when
//! every call returned 0; the report has the pointers passed and lastNanoseconds the time of the loop after its
//! first call (steady clock around the calls only). `stderrLock`, where given, is held while stderr is captured
//! (the capture redirects the process's file descriptor 2: two threads must not do it at once).
int32_t enqueue(Context& context, std::vector<uint64_t> const& in, uint64_t const* given, uint64_t workspace,
    uint64_t stream, int32_t repeats, std::string const& sizesText, Report& report, std::mutex* stderrLock = nullptr)
{
    Engine const& engine = *context.engine;
    std::vector<uint64_t> const out = outputPointers(engine, in, given);
    std::unique_lock<std::mutex> lock;
    if (stderrLock != nullptr)
    {
        lock = std::unique_lock<std::mutex>(*stderrLock);
    }
    std::string why;
    if (!sizesText.empty())
    {
        Sizes sizes;
        if (!parseSizes(sizesText, sizes))
        {
            report.fail("sizes not given as NAME=VALUE: " + sizesText);
            return -1;
        }
        if (sizes != context.sizes)
        {
            if (!concreteDescs(engine, sizes, context.in, context.out, report))
            {
                return -1;
            }
            context.sizes = sizes;
            why = "shapes";
        }
    }
    std::vector<uint64_t> addresses(in);
    addresses.insert(addresses.end(), out.begin(), out.end());
    addresses.push_back(workspace);
    if (!context.bound || *context.bound != addresses)
    {
        why += why.empty() ? "addresses" : " and addresses";
    }
    if (!why.empty())
    {
        if (!shapeChange(context.runtime, context.in, context.out, "onShapeChange (at enqueue: " + why + " changed)",
                report))
        {
            return -1;
        }
        context.bound = addresses;
    }
    int32_t status = 0;
    std::string text;
    EnqueuePointers const pointers(in, out);
    {
        // The first call's stderr is captured; the rest run bare (timed), stopping at the first failure.
        StderrCapture capture;
        status = callEnqueue(context.runtime, context.in, context.out, pointers, workspace, stream);
        text = capture.finish();
    }
    if (lock.owns_lock())
    {
        lock.unlock();
    }
    int32_t calls = 1;
    auto const start = std::chrono::steady_clock::now();
    for (; calls < repeats && status == 0; ++calls)
    {
        status = callEnqueue(context.runtime, context.in, context.out, pointers, workspace, stream);
    }
    context.lastNanoseconds
        = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
    report.step("IPluginV3OneRuntime::enqueue", status == 0,
        "\"status\": " + std::to_string(status) + ", \"calls\": " + std::to_string(calls)
            + ", \"inputs\": " + pointerList(in) + ", \"outputs\": " + pointerList(out)
            + ", \"workspace\": " + std::to_string(workspace) + ", \"stream\": " + std::to_string(stream),
        text);
    return status;
}

//! Two execution contexts (of one engine or two) enqueueing at once, each from a thread of its own with its own
//! buffers and stream, as an application may run them (the IExecutionContext sentence above: "multiple batches
//! simultaneously"; it goes on: "each execution context in concurrent use must use a separate optimization
//! profile", which the plugin cannot tell apart: the host has one). Both threads start together; each context's
//! report goes into `report` as "context I: ...".
int32_t enqueueTogether(Context* const* contexts, std::vector<uint64_t> const* in, uint64_t const* const* given,
    uint64_t const* workspaces, uint64_t const* streams, int32_t repeats, Report& report)
{
    std::mutex stderrLock, startLock;
    std::condition_variable started;
    int32_t waiting = 2;
    // Each thread makes the caller's CUDA context current first, as an application's threads must before
    // enqueueV3 (none on a CPU).
    Driver const* driver = Driver::withContext();
    void* cudaContext = nullptr;
    if (driver != nullptr && driver->ctxSetCurrent != nullptr)
    {
        driver->ctxGetCurrent(&cudaContext);
    }
    Report reports[2] = {Report("context 0"), Report("context 1")};
    int32_t statuses[2] = {-1, -1};
    auto run = [&](int32_t i) {
        if (cudaContext != nullptr)
        {
            driver->ctxSetCurrent(cudaContext);
        }
        {
            std::unique_lock<std::mutex> lock(startLock);
            if (--waiting == 0)
            {
                started.notify_all();
            }
            started.wait(lock, [&] { return waiting == 0; });
        }
        statuses[i]
            = enqueue(*contexts[i], in[i], given[i], workspaces[i], streams[i], repeats, "", reports[i], &stderrLock);
    };
    std::thread first(run, 0), second(run, 1);
    first.join();
    second.join();
    report.merge(reports[0], "context 0: ");
    report.merge(reports[1], "context 1: ");
    return statuses[0] != 0 ? statuses[0] : statuses[1];
}

} // namespace

//! Nanoseconds of host_enqueue's last loop after its first call (repeats - 1 calls; 0 for repeats 1).
HOST_API int64_t host_enqueue_nanoseconds(void* handle)
{
    return static_cast<Context*>(handle)->lastNanoseconds;
}

namespace
{

//! Destroys an execution context as TensorRT does: its plugin (the engine's lives as long as the engine).
void runtimeClose(void* handle)
{
    auto* context = static_cast<Context*>(handle);
    Report report("close");
    destroy(context->attached, "the context's plugin", report);
    delete context;
    publish(report);
}

//! Destroys an engine: its runtime plugin (where a context was made), its AOT module; the report says how the
//! plugin's destruction went.
void engineFree(Engine* engine)
{
    Report report("free");
    destroy(engine->runtimePlugin, "the engine's plugin", report);
#if PLUGIN_HOST_QUICK
    std::string problem;
    Driver const* driver = engine->module == nullptr ? nullptr : Driver::get(problem);
    if (driver != nullptr && driver->moduleUnload != nullptr)
    {
        driver->moduleUnload(engine->module);
    }
#endif
    delete engine;
    publish(report);
}

} // namespace

#if PLUGIN_HOST_QUICK
namespace
{

//! ISymExpr as the host keeps it: the expression and its argument type, read when the plugin sets it (the
//! Python object behind an ISymExpr is the plugin's, and may be gone after the setter returns).
struct SymValue
{
    ISymExpr* given{nullptr};
    HostExpr const* expr{nullptr};
    int32_t dataType{-1};
};

bool readSym(ISymExpr* sym, HostExprBuilder const& builder, SymValue& out, std::vector<std::string>& errors)
{
    if (sym == nullptr)
    {
        errors.push_back("a null ISymExpr");
        return false;
    }
    out.given = sym;
    out.dataType = static_cast<int32_t>(sym->getDataType());
    out.expr = builder.own(static_cast<IDimensionExpr const*>(sym->getExpr()));
    if (sym->getType() != PluginArgType::kINT || out.expr == nullptr)
    {
        errors.push_back("an ISymExpr that is not an integer expression of the host's IExprBuilder");
        return false;
    }
    return true;
}

class HostSymExprs final : public ISymExprs
{
public:
    explicit HostSymExprs(HostExprBuilder const& builder)
        : mImplObject(*this, builder)
    {
        mImpl = &mImplObject;
    }
    ~HostSymExprs() noexcept override = default;

    std::vector<SymValue> values;
    std::vector<std::string> errors;

private:
    class Impl final : public ISymExprsImpl
    {
    public:
        Impl(HostSymExprs& owner, HostExprBuilder const& builder)
            : mOwner(owner)
            , mBuilder(builder)
        {
        }
        ISymExpr* getSymExpr(int32_t index) const noexcept override
        {
            return index >= 0 && index < getNbSymExprs() ? mOwner.values[index].given : nullptr;
        }
        bool setSymExpr(int32_t index, ISymExpr* symExpr) noexcept override
        {
            if (index < 0 || index >= getNbSymExprs())
            {
                mOwner.errors.push_back("ISymExprs::setSymExpr index " + std::to_string(index) + " out of range");
                return false;
            }
            return readSym(symExpr, mBuilder, mOwner.values[index], mOwner.errors);
        }
        int32_t getNbSymExprs() const noexcept override
        {
            return static_cast<int32_t>(mOwner.values.size());
        }
        bool setNbSymExprs(int32_t count) noexcept override
        {
            if (count < 0)
            {
                return false;
            }
            mOwner.values.assign(count, SymValue{});
            return true;
        }

    private:
        HostSymExprs& mOwner;
        HostExprBuilder const& mBuilder;
    };
    Impl mImplObject;
};

class HostLaunchParams final : public IKernelLaunchParams
{
public:
    explicit HostLaunchParams(HostExprBuilder const& builder)
        : mImplObject(*this, builder)
    {
        mImpl = &mImplObject;
    }
    ~HostLaunchParams() noexcept override = default;

    //! grid x, y, z, block x, y, z, shared memory bytes (unset: none)
    SymValue values[7];
    std::vector<std::string> errors;

private:
    class Impl final : public IKernelLaunchParamsImpl
    {
    public:
        Impl(HostLaunchParams& owner, HostExprBuilder const& builder)
            : mOwner(owner)
            , mBuilder(builder)
        {
        }
        // clang-format off
        ISymExpr* getGridX() noexcept override { return mOwner.values[0].given; }
        bool setGridX(ISymExpr* e) noexcept override { return set(0, e); }
        ISymExpr* getGridY() noexcept override { return mOwner.values[1].given; }
        bool setGridY(ISymExpr* e) noexcept override { return set(1, e); }
        ISymExpr* getGridZ() noexcept override { return mOwner.values[2].given; }
        bool setGridZ(ISymExpr* e) noexcept override { return set(2, e); }
        ISymExpr* getBlockX() noexcept override { return mOwner.values[3].given; }
        bool setBlockX(ISymExpr* e) noexcept override { return set(3, e); }
        ISymExpr* getBlockY() noexcept override { return mOwner.values[4].given; }
        bool setBlockY(ISymExpr* e) noexcept override { return set(4, e); }
        ISymExpr* getBlockZ() noexcept override { return mOwner.values[5].given; }
        bool setBlockZ(ISymExpr* e) noexcept override { return set(5, e); }
        ISymExpr* getSharedMem() noexcept override { return mOwner.values[6].given; }
        bool setSharedMem(ISymExpr* e) noexcept override { return set(6, e); }
        // clang-format on

    private:
        bool set(int32_t slot, ISymExpr* e)
        {
            return readSym(e, mBuilder, mOwner.values[slot], mOwner.errors);
        }
        HostLaunchParams& mOwner;
        HostExprBuilder const& mBuilder;
    };
    Impl mImplObject;
};

char const* const kLAUNCH_NAMES[7] = {"grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "shared_mem"};

bool timeAotOnMadeUpInputs(Engine& engine, Report& report);

//! The build phase of a quickly deployable AOT plugin (IPluginV3QuickAOTBuild), in TensorRT's order, up to the
//! kernel TensorRT embeds in the engine: getLaunchParams with the host's IExprBuilder, then getKernel.
void* aotBuild(char const* name, char const* version, char const* ns, char const* spec, int32_t request)
{
    BuildPhase phase("aot build", name, version, ns);
    Engine* engine = phase.engine.get();
    Report& report = phase.report;
    IPluginV3*& plugin = phase.plugin;
    auto finish = [&](bool success) { return phase.finish(success); };
    IPluginCreatorInterface* found = phase.start(spec, "PLUGIN CREATOR_V3QUICK");
    if (found == nullptr)
    {
        return finish(false);
    }
    auto* creator = static_cast<IPluginCreatorV3Quick*>(found);
    {
        PluginFieldCollection const fc = phase.networkFields();
        StderrCapture capture;
        plugin = creator->createPlugin(engine->name.c_str(), engine->ns.c_str(), &fc, TensorRTPhase::kBUILD,
            static_cast<QuickPluginCreationRequest>(request));
        std::string const text = capture.finish();
        report.step("IPluginCreatorV3Quick::createPlugin(kBUILD)", plugin != nullptr,
            "\"request\": " + std::to_string(request) + ", \"plugin\": " + interfaceJson(plugin), text);
        if (plugin == nullptr)
        {
            return finish(false);
        }
    }
    if (!phase.adoptClone())
    {
        return finish(false);
    }
    auto* core = static_cast<IPluginV3QuickCore*>(
        capability(*plugin, PluginCapabilityType::kCORE, "kCORE", {"PLUGIN_V3QUICK_CORE"}, report));
    if (core == nullptr || !checkNames(core, *engine, "IPluginV3QuickCore::getPluginName/Version/Namespace", report))
    {
        return finish(false);
    }
    auto* build = static_cast<IPluginV3QuickAOTBuild*>(
        capability(*plugin, PluginCapabilityType::kBUILD, "kBUILD", {"PLUGIN_V3QUICKAOT_BUILD"}, report));
    if (build == nullptr)
    {
        return finish(false);
    }
    size_t const nbIn = engine->inputs.size();
    if (!phase.nbOutputs(build))
    {
        return finish(false);
    }
    {
        std::vector<DataType> inTypes;
        std::vector<int32_t> ranks;
        for (auto const& input : engine->inputs)
        {
            inTypes.push_back(input.type);
            ranks.push_back(static_cast<int32_t>(input.dims.size()));
        }
        engine->outputTypes.assign(engine->nbOutputs, static_cast<DataType>(-1));
        StderrCapture capture;
        int32_t const status = build->getOutputDataTypes(
            engine->outputTypes.data(), engine->nbOutputs, inTypes.data(), ranks.data(), static_cast<int32_t>(nbIn));
        if (!phase.outputTypes("getOutputDataTypes (with input ranks)", status, capture.finish()))
        {
            return finish(false);
        }
    }
    if (!outputShapes(build, *engine, report))
    {
        return finish(false);
    }
    size_t const nbIO = nbIn + engine->nbOutputs;
    engine->formats.assign(nbIO, TensorFormat::kLINEAR);
    {
        // The supported combinations: the plugin lists them (no per-position queries for quick plugins).
        std::vector<DynamicPluginTensorDesc> in, out;
        if (!buildDescs(*engine, in, out, report))
        {
            return finish(false);
        }
        std::vector<DynamicPluginTensorDesc> inOut(in);
        inOut.insert(inOut.end(), out.begin(), out.end());
        StderrCapture capture;
        int32_t const count
            = build->getNbSupportedFormatCombinations(inOut.data(), static_cast<int32_t>(nbIn), engine->nbOutputs);
        std::vector<PluginTensorDesc> combos(std::max(count, 0) * nbIO);
        int32_t const status = count > 0 ? build->getSupportedFormatCombinations(inOut.data(),
                                               static_cast<int32_t>(nbIn), engine->nbOutputs, combos.data(), count)
                                         : -1;
        std::string const text = capture.finish();
        std::optional<int32_t> chosen;
        std::string listed = "[";
        for (int32_t c = 0; c < count && status == 0; ++c)
        {
            bool matches = true;
            std::string combo = "[";
            for (size_t p = 0; p < nbIO; ++p)
            {
                PluginTensorDesc const& d = combos[c * nbIO + p];
                DataType const wanted = p < nbIn ? engine->inputs[p].type : engine->outputTypes[p - nbIn];
                matches = matches && d.type == wanted;
                combo += (p ? ", " : "") + typeFormatJson(d.type, d.format);
            }
            listed += (c ? ", " : "") + combo + "]";
            if (matches && !chosen)
            {
                chosen = c;
            }
        }
        listed += "]";
        bool const ok = count > 0 && status == 0 && chosen.has_value();
        if (ok)
        {
            for (size_t p = 0; p < nbIO; ++p)
            {
                engine->formats[p] = combos[*chosen * nbIO + p].format;
            }
        }
        report.step("getNbSupportedFormatCombinations + getSupportedFormatCombinations", ok,
            "\"count\": " + std::to_string(count) + ", \"status\": " + std::to_string(status)
                + ", \"combinations\": " + listed + ", \"chosen\": " + (chosen ? std::to_string(*chosen) : "null"),
            text);
        if (!ok)
        {
            return finish(false);
        }
    }
    std::vector<DynamicPluginTensorDesc> in, out;
    if (!buildDescs(*engine, in, out, report))
    {
        return finish(false);
    }
    auto nothingAfter = [](char const*, std::vector<DynamicPluginTensorDesc> const&,
                            std::vector<DynamicPluginTensorDesc> const&) { return true; };
    if (!phase.configureRounds(build, in, out, "", nothingAfter))
    {
        return finish(false);
    }
    {
        engine->aliases.assign(engine->nbOutputs, -1);
        StderrCapture capture;
        for (int32_t i = 0; i < engine->nbOutputs; ++i)
        {
            engine->aliases[i] = build->getAliasedInput(i);
        }
        std::string const text = capture.finish();
        bool const ok = text.find("[ERROR]") == std::string::npos && aliasesValid(*engine);
        report.step("getAliasedInput", ok,
            "\"aliases\": " + intList(std::vector<int64_t>(engine->aliases.begin(), engine->aliases.end())), text);
        if (!ok)
        {
            return finish(false);
        }
    }
    tactics(build, *engine, report);
    setTactic(build, *engine, report);
    if (!report.ok())
    {
        return finish(false);
    }
    {
        std::vector<DimsExprs> const inputs = inputExprs(*engine);
        std::vector<DynamicPluginTensorDesc> inOut(in);
        inOut.insert(inOut.end(), out.begin(), out.end());
        HostLaunchParams launch(engine->builder);
        HostSymExprs extra(engine->builder);
        StderrCapture capture;
        int32_t const status = build->getLaunchParams(inputs.data(), inOut.data(), static_cast<int32_t>(nbIn),
            engine->nbOutputs, &launch, &extra, engine->builder);
        std::string text = capture.finish();
        for (auto const& e : launch.errors)
        {
            text += (text.empty() ? "" : " | ") + e;
        }
        for (auto const& e : extra.errors)
        {
            text += (text.empty() ? "" : " | ") + e;
        }
        bool ok = status == 0 && launch.errors.empty() && extra.errors.empty();
        std::string launchJson = "{";
        for (int32_t i = 0; i < 7; ++i)
        {
            engine->launch.push_back(launch.values[i].expr);
            launchJson += (i ? ", " : "") + quoted(kLAUNCH_NAMES[i]) + ": "
                + (launch.values[i].expr ? quoted(launch.values[i].expr->text()) : "null");
        }
        launchJson += "}";
        for (auto const& v : extra.values)
        {
            ok = ok && v.expr != nullptr;
            engine->extraArgs.emplace_back(v.expr, v.dataType);
        }
        report.step("IPluginV3QuickAOTBuild::getLaunchParams", ok,
            "\"status\": " + std::to_string(status) + ", \"launch\": " + launchJson + ", \"extra_args\": "
                + jsonList<SymValue>(extra.values,
                    [](SymValue const& v) {
                        return "{\"expr\": " + (v.expr ? quoted(v.expr->text()) : "null")
                            + ", \"dtype\": " + std::to_string(v.dataType) + "}";
                    }),
            text);
        if (!ok)
        {
            return finish(false);
        }
    }
    {
        std::vector<PluginTensorDesc> inDescs, outDescs;
        for (auto const& d : in)
        {
            inDescs.push_back(d.desc);
        }
        for (auto const& d : out)
        {
            outDescs.push_back(d.desc);
        }
        char const* kernelName = nullptr;
        char* kernel = nullptr;
        int32_t kernelSize = -1;
        StderrCapture capture;
        int32_t const status = build->getKernel(inDescs.data(), static_cast<int32_t>(nbIn), outDescs.data(),
            engine->nbOutputs, &kernelName, &kernel, &kernelSize);
        std::string const text = capture.finish();
        hookPoint("getKernel");
        auto nameText = kernelName == nullptr ? std::nullopt : readableString(kernelName);
        bool const ok = status == 0 && nameText && kernelSize > 0 && readable(kernel, kernelSize);
        if (ok)
        {
            engine->kernelName = *nameText;
            engine->kernel.assign(kernel, kernel + kernelSize);
        }
        report.step("IPluginV3QuickAOTBuild::getKernel", ok,
            "\"status\": " + std::to_string(status) + ", \"kernel_name\": " + (nameText ? quoted(*nameText) : "null")
                + ", \"size\": " + std::to_string(kernelSize),
            text);
        if (!ok)
        {
            return finish(false);
        }
    }
    {
        StderrCapture capture;
        char const* cacheId = build->getTimingCacheID();
        char const* metadata = build->getMetadataString();
        std::string const text = capture.finish();
        report.step("getTimingCacheID + getMetadataString", true,
            "\"timing_cache_id\": " + quoted(cacheId) + ", \"metadata\": " + quoted(metadata), text);
    }
    if (!timeAotOnMadeUpInputs(*engine, report))
    {
        return finish(false);
    }
    return finish(phase.cloneChecked<IPluginV3QuickCore>("PLUGIN_V3QUICK_CORE"));
}

//! The launch TensorRT makes of an AOT plugin's kernel for concrete sizes: grid, block, shared memory and the
//! extra arguments evaluated.
struct AotLaunch
{
    int64_t grid[3]{1, 1, 1};
    int64_t block[3]{1, 1, 1};
    int64_t shared{0};
    std::vector<int64_t> extra;
};

bool evaluateLaunch(Engine const& engine, Sizes const& sizes, AotLaunch& out, std::string& problem)
{
    int64_t* slots[7]
        = {&out.grid[0], &out.grid[1], &out.grid[2], &out.block[0], &out.block[1], &out.block[2], &out.shared};
    for (int32_t i = 0; i < 7; ++i)
    {
        if (engine.launch[i] == nullptr)
        {
            continue; // unset: TensorRT's default (1, or no shared memory)
        }
        auto v = engine.launch[i]->evaluate(sizes);
        if (!v)
        {
            problem = std::string{kLAUNCH_NAMES[i]} + " = " + engine.launch[i]->text() + " cannot be evaluated";
            return false;
        }
        *slots[i] = *v;
    }
    for (auto const& [expr, dataType] : engine.extraArgs)
    {
        auto v = expr->evaluate(sizes);
        if (!v)
        {
            problem = "extra argument " + expr->text() + " cannot be evaluated";
            return false;
        }
        out.extra.push_back(*v);
    }
    return true;
}

std::string launchJson(AotLaunch const& l)
{
    return "{\"grid\": " + intList({l.grid[0], l.grid[1], l.grid[2]})
        + ", \"block\": " + intList({l.block[0], l.block[1], l.block[2]})
        + ", \"shared_mem\": " + std::to_string(l.shared) + ", \"extra_args\": " + intList(l.extra) + "}";
}

//! Launches the AOT kernel as TensorRT documents it (tensorrt.plugin.aot_impl): the input pointers, then the extra
//! arguments (int32, int16 or int8 as declared), then the output pointers; an output aliased to an input gets
//! that input's pointer. The module is loaded from the engine's PTX in the current CUDA context.
int32_t launchAot(Engine* engine, Sizes const& sizes, uint64_t const* inputs, uint64_t const* outputs,
    uint64_t stream, Report& report)
{
    AotLaunch launch;
    std::string problem;
    Driver const* driver = nullptr;
    if (!evaluateLaunch(*engine, sizes, launch, problem) || (driver = Driver::get(problem)) == nullptr)
    {
        report.fail(problem);
        return -1;
    }
    size_t const nbIn = engine->inputs.size();
    std::vector<uint64_t> pointers(inputs, inputs + nbIn);
    std::vector<int32_t> ints32;
    std::vector<int16_t> ints16;
    std::vector<int8_t> ints8;
    ints32.reserve(launch.extra.size());
    ints16.reserve(launch.extra.size());
    ints8.reserve(launch.extra.size());
    std::vector<void*> params;
    std::vector<uint64_t> outputPointers(engine->nbOutputs);
    for (size_t i = 0; i < nbIn; ++i)
    {
        params.push_back(&pointers[i]);
    }
    for (size_t i = 0; i < launch.extra.size(); ++i)
    {
        int32_t const dataType = engine->extraArgs[i].second;
        if (dataType == static_cast<int32_t>(PluginArgDataType::kINT16))
        {
            ints16.push_back(static_cast<int16_t>(launch.extra[i]));
            params.push_back(&ints16.back());
        }
        else if (dataType == static_cast<int32_t>(PluginArgDataType::kINT8))
        {
            ints8.push_back(static_cast<int8_t>(launch.extra[i]));
            params.push_back(&ints8.back());
        }
        else
        {
            ints32.push_back(static_cast<int32_t>(launch.extra[i]));
            params.push_back(&ints32.back());
        }
    }
    for (int32_t i = 0; i < engine->nbOutputs; ++i)
    {
        int32_t const a = engine->aliases[i];
        outputPointers[i] = a >= 0 ? pointers[a] : outputs[i];
        params.push_back(&outputPointers[i]);
    }
    // Loaded once per engine, as TensorRT loads the engine's kernel once (unloaded with the engine).
    Engine* mutableEngine = engine;
    Driver::Result r = 0;
    if (mutableEngine->module == nullptr)
    {
        r = driver->moduleLoadData(&mutableEngine->module, engine->kernel.c_str());
        report.step("cuModuleLoadData(the engine's PTX)", r == 0, "\"result\": " + quoted(driver->name(r)));
        if (r == 0)
        {
            r = driver->moduleGetFunction(&mutableEngine->function, mutableEngine->module, engine->kernelName.c_str());
            report.step("cuModuleGetFunction", r == 0,
                "\"kernel_name\": " + quoted(engine->kernelName) + ", \"result\": " + quoted(driver->name(r)));
        }
    }
    if (r == 0 && mutableEngine->function != nullptr)
    {
        r = driver->launchKernel(mutableEngine->function, static_cast<uint32_t>(launch.grid[0]),
            static_cast<uint32_t>(launch.grid[1]), static_cast<uint32_t>(launch.grid[2]),
            static_cast<uint32_t>(launch.block[0]), static_cast<uint32_t>(launch.block[1]),
            static_cast<uint32_t>(launch.block[2]), static_cast<uint32_t>(launch.shared),
            reinterpret_cast<void*>(stream), params.data(), nullptr);
        std::vector<int64_t> outs(outputPointers.begin(), outputPointers.end());
        report.step("cuLaunchKernel", r == 0,
            "\"launch\": " + launchJson(launch) + ", \"outputs\": " + intList(outs)
                + ", \"result\": " + quoted(driver->name(r)));
    }
    return r;
}

int32_t aotLaunch(void* handle, char const* sizesText, uint64_t const* inputs, uint64_t const* outputs, uint64_t stream)
{
    Report report("aot launch");
    Sizes sizes;
    int32_t status = -1;
    if (!parseSizes(sizesText == nullptr ? "" : sizesText, sizes))
    {
        report.fail("sizes not given as NAME=VALUE");
    }
    else
    {
        status = launchAot(static_cast<Engine*>(handle), sizes, inputs, outputs, stream, report);
    }
    publish(report);
    return status;
}

//! The builder's timing of an AOT plugin at kOPT: TensorRT launches the kernel itself, on inputs it made up (the
//! maintainer's answer in NVIDIA/TensorRT#2552, as for timeOnMadeUpInputs), so the kernel must end and stay in its
//! buffers whatever they hold. On a GPU (a current CUDA context) the host loads the PTX and launches the kernel on
//! device buffers of random bytes, waiting gTimingLimitSeconds at most; on a CPU it evaluates the launch only.
bool timeAotOnMadeUpInputs(Engine& engine, Report& report)
{
    Sizes const sizes = profileSizes(engine, 1);
    MadeUpBuffers buffers;
    if (!buffers.onDevice())
    {
        AotLaunch launch;
        std::string problem;
        bool const ok = evaluateLaunch(engine, sizes, launch, problem);
        report.step("the timing launch at kOPT (no CUDA context: evaluated, not launched)", ok,
            ok ? "\"launch\": " + launchJson(launch) : "\"message\": " + quoted(problem));
        return ok;
    }
    std::vector<PluginTensorDesc> inDescs, outDescs;
    if (!concreteDescs(engine, sizes, inDescs, outDescs, report))
    {
        return false;
    }
    TimingAddresses call;
    std::string problem;
    if (!buffers.forCall(engine, inDescs, outDescs, 0 /* an AOT kernel has no workspace */, call, problem))
    {
        report.fail("made-up buffers for the timing launch: " + problem);
        return false;
    }
    bool ok = launchAot(&engine, sizes, call.in.data(), call.out.data(), call.stream, report) == 0;
    if (ok)
    {
        ok = buffers.wait(gTimingLimitSeconds, problem);
        report.step(
            "the timing launch's kernel on made-up inputs at kOPT", ok, ok ? "" : "\"message\": " + quoted(problem));
    }
    Driver const* driver = Driver::get(problem);
    // Not while a kernel may still run from it (wait gave up: abandoned).
    if (!buffers.abandoned() && engine.module != nullptr && driver != nullptr && driver->moduleUnload != nullptr)
    {
        driver->moduleUnload(engine.module); // the build's own load: the engine's launches load it again
        engine.module = engine.function = nullptr;
    }
    return ok && report.ok();
}

} // namespace
#endif // PLUGIN_HOST_QUICK

//! The entry points of the tests (ctypes) ------------------------------------------------------------------------
//! Each host_* call below queues its work; host_run(), called through the bindings' own C++ entry point
//! (IPluginCreatorV3One.create_plugin on the host's driver creator, see host_register_driver), runs it there
//! with the GIL released. That is how TensorRT's calls into a plugin happen: inside a bound call of the
//! bindings (build_serialized_network, deserialize_cuda_engine, create_execution_context, execute_async_v3,
//! most of them with the GIL released), so pybind11 keeps the temporaries of its conversions of what a plugin
//! returns (e.g. a PluginFieldCollection) alive until that call returns, and each trampoline takes the GIL.

namespace
{

std::function<void()> gQueued;
void* gResult = nullptr;
int32_t gStatus = 0;

void queue(std::function<void()> work)
{
    gQueued = std::move(work);
    gResult = nullptr;
    gStatus = -1;
}

//! Runs the queued work with the GIL released where this thread holds it (the Python C API is looked up in the
//! process: the bindings load the host into a Python process).
void runQueued()
{
    auto work = std::move(gQueued);
    gQueued = nullptr;
    if (!work)
    {
        return;
    }
    using Check = int (*)();
    using Save = void* (*)();
    using Restore = void (*)(void*);
    static auto const held = reinterpret_cast<Check>(dlsym(RTLD_DEFAULT, "PyGILState_Check"));
    static auto const save = reinterpret_cast<Save>(dlsym(RTLD_DEFAULT, "PyEval_SaveThread"));
    static auto const restore = reinterpret_cast<Restore>(dlsym(RTLD_DEFAULT, "PyEval_RestoreThread"));
    bool const release = held != nullptr && save != nullptr && restore != nullptr && held() != 0;
    void* state = release ? save() : nullptr;
    work();
    if (state != nullptr)
    {
        restore(state);
    }
}

//! A C++ creator of the host's, registered as (PluginHostDriver, 1, plugin_host): its createPlugin, called from
//! Python through the bindings, runs the queued host work and creates nothing.
class HostDriver final : public IPluginCreatorV3One
{
public:
    IPluginV3* createPlugin(AsciiChar const*, PluginFieldCollection const*, TensorRTPhase) noexcept override
    {
        runQueued();
        return nullptr;
    }
    PluginFieldCollection const* getFieldNames() noexcept override
    {
        return &mNoFields;
    }
    AsciiChar const* getPluginName() const noexcept override
    {
        return "PluginHostDriver";
    }
    AsciiChar const* getPluginVersion() const noexcept override
    {
        return "1";
    }
    AsciiChar const* getPluginNamespace() const noexcept override
    {
        return "plugin_host";
    }

private:
    PluginFieldCollection mNoFields{0, nullptr};
};

} // namespace

//! Registers the driver creator (once); true when it is in the registry.
HOST_API bool host_register_driver()
{
    static HostDriver driver;
    if (registry().getCreator("PluginHostDriver", "1", "plugin_host") != nullptr)
    {
        return true;
    }
    return registry().registerCreator(driver, "plugin_host");
}

//! The result of the last work run: an engine or context handle (or nullptr), and a status.
HOST_API void* host_result()
{
    return gResult;
}

HOST_API int32_t host_status()
{
    return gStatus;
}

HOST_API void host_build(char const* name, char const* version, char const* ns, char const* spec)
{
    std::string const n{name}, v{version}, s{ns}, p{spec};
    queue([=] {
        gResult = build(n.c_str(), v.c_str(), s.c_str(), p.c_str());
        gStatus = gResult ? 0 : -1;
    });
}

HOST_API void host_runtime_open(void* engine, char const* sizes)
{
    std::string const text{sizes};
    queue([=] {
        gResult = runtimeOpen(engine, text.c_str());
        gStatus = gResult ? 0 : -1;
    });
}

HOST_API void host_enqueue(void* context, uint64_t const* inputs, int32_t nbInputs, uint64_t const* outputs,
    int32_t nbOutputs, uint64_t workspace, uint64_t stream, int32_t repeats, char const* sizes)
{
    std::vector<uint64_t> const in(inputs, inputs + nbInputs), out(outputs, outputs + nbOutputs);
    std::string const sizesText{sizes == nullptr ? "" : sizes};
    auto* c = static_cast<Context*>(context);
    queue([=] {
        Report report("enqueue");
        if (in.size() != c->engine->inputs.size() || out.size() != static_cast<size_t>(c->engine->nbOutputs))
        {
            report.fail("host_enqueue needs one pointer per input and per output");
        }
        else
        {
            gStatus = enqueue(*c, in, out.data(), workspace, stream, repeats, sizesText, report);
        }
        publish(report);
    });
}

//! Two contexts enqueueing at once from two threads: contexts[2]; inputs and outputs one row per context
//! (nbInputs, nbOutputs pointers each); workspaces[2], streams[2].
HOST_API void host_enqueue_together(void* const* contexts, uint64_t const* inputs, int32_t nbInputs,
    uint64_t const* outputs, int32_t nbOutputs, uint64_t const* workspaces, uint64_t const* streams, int32_t repeats)
{
    Context* const pair[2] = {static_cast<Context*>(contexts[0]), static_cast<Context*>(contexts[1])};
    std::vector<uint64_t> in[2], out[2];
    for (int32_t i = 0; i < 2; ++i)
    {
        in[i].assign(inputs + i * nbInputs, inputs + (i + 1) * nbInputs);
        out[i].assign(outputs + i * nbOutputs, outputs + (i + 1) * nbOutputs);
    }
    uint64_t const spaces[2] = {workspaces[0], workspaces[1]}, handles[2] = {streams[0], streams[1]};
    queue([=] {
        Report report("enqueue, two contexts at once");
        bool fits = true;
        for (auto* c : pair)
        {
            fits = fits && static_cast<size_t>(nbInputs) == c->engine->inputs.size()
                && nbOutputs == c->engine->nbOutputs;
        }
        if (!fits)
        {
            report.fail("host_enqueue_together needs one pointer per input and per output of each context");
        }
        else
        {
            uint64_t const* given[2] = {out[0].data(), out[1].data()};
            gStatus = enqueueTogether(pair, in, given, spaces, handles, repeats, report);
        }
        publish(report);
    });
}

HOST_API void host_runtime_close(void* context)
{
    queue([=] {
        runtimeClose(context);
        gStatus = 0;
    });
}

//! Runs the queued work right here, outside any bound call of the bindings: what a host driven by ctypes alone
//! would see (pybind11 then cannot keep conversion temporaries alive; the tests show the difference).
HOST_API void host_run_unbound()
{
    runQueued();
}

#if PLUGIN_HOST_QUICK
HOST_API void host_aot_build(char const* name, char const* version, char const* ns, char const* spec, int32_t request)
{
    std::string const n{name}, v{version}, s{ns}, p{spec};
    queue([=] {
        gResult = aotBuild(n.c_str(), v.c_str(), s.c_str(), p.c_str(), request);
        gStatus = gResult ? 0 : -1;
    });
}

//! The AOT kernel's launch for concrete sizes ("N=10 E=20 F=3"), as JSON (no GPU needed).
HOST_API char const* host_aot_evaluate(void* handle, char const* sizesText)
{
    Report report("aot evaluate");
    Sizes sizes;
    AotLaunch launch;
    std::string problem;
    if (!parseSizes(sizesText == nullptr ? "" : sizesText, sizes)
        || !evaluateLaunch(*static_cast<Engine const*>(handle), sizes, launch, problem))
    {
        report.fail(problem.empty() ? "sizes not given as NAME=VALUE" : problem);
    }
    else
    {
        report.set("launch", launchJson(launch));
    }
    publish(report);
    return host_report();
}

//! The kernel getKernel returned (the bytes, size in *size) and its name.
HOST_API char const* host_aot_kernel(void* handle, int32_t* size)
{
    auto const* engine = static_cast<Engine const*>(handle);
    *size = static_cast<int32_t>(engine->kernel.size());
    return engine->kernel.data();
}

HOST_API char const* host_aot_kernel_name(void* handle)
{
    return static_cast<Engine const*>(handle)->kernelName.c_str();
}

HOST_API void host_aot_launch(void* engine, char const* sizes, uint64_t const* inputs, int32_t nbInputs,
    uint64_t const* outputs, int32_t nbOutputs, uint64_t stream)
{
    std::string const text{sizes};
    std::vector<uint64_t> const in(inputs, inputs + nbInputs), out(outputs, outputs + nbOutputs);
    queue([=] { gStatus = aotLaunch(engine, text.c_str(), in.data(), out.data(), stream); });
}
#endif

HOST_API void host_engine_free(void* handle)
{
    queue([=] {
        if (handle != nullptr)
        {
            engineFree(static_cast<Engine*>(handle));
        }
        gStatus = 0;
    });
}
