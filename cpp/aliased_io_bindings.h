/*
 * aliased_io_bindings.h: what a C++ runtime needs to run an engine of aliased_io_plugin.py in place.
 *
 * TensorRT reports no alias for a plugin's output (ICudaEngine::getAliasedInputTensor answers null), so an engine
 * built from a model of one's own (`aliased_io_plugin.py --onnx M --plugin aot --save_engine E`) comes with a
 * description, E.desc, that says which outputs the plugin writes into which inputs' memory. Read it, bind the
 * inputs, then bind each aliased output at its input's address: every enqueueV3 then updates the state in place
 * and nothing is copied back.
 *
 *     aliased_io::EngineDescription const d = aliased_io::readEngineDescription("E.desc"); // throws, one line
 *     // ... context->setInputShape and setTensorAddress for every input, as usual ...
 *     aliased_io::bindAliasedOutputs(*context, d);  // false: an input is unbound or TensorRT refused the address
 *     // ... setTensorAddress for the other outputs, then enqueueV3 as often as the state needs ...
 *
 * The format (docs/own_model_cpp.md): ASCII, one record a line, fields separated by spaces, '#' starts a comment
 * line; the first record is `format aliased_io_engine 1`, then `plugin python|aot`, `input NAME DTYPE [D0,D1]`,
 * `output NAME DTYPE [D0,D1]` (a dimension is a size or the name of a dynamic one), `alias OUTPUT INPUT`, `index
 * NAME ROWS`, `index NAME INPUT AXIS` or `index NAME own_max` (a bound of an index input's values; `row=R` after it:
 * of row R of the index only; `wraps`: the model maps a negative value v to v + rows itself; an index may have
 * several), `profile NAME [MIN] [OPT] [MAX]`.
 * Every rule that common/engine_description.py checks is checked here too.
 */

#ifndef ALIASED_IO_BINDINGS_H
#define ALIASED_IO_BINDINGS_H

#include <NvInferRuntime.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace aliased_io
{

//! An engine input or output: name, dtype ("float32", "float16", "int64", ...) and dimensions (a size, or the
//! name of a dynamic dimension).
struct TensorDescription
{
    std::string name;
    std::string dtype;
    std::vector<std::string> dims;
};

//! One bound of an index input's values: [0, rows), [0, dimension `axis` of input `input`), or (ownMax) [0, its
//! own largest value] (PyG's batch vector: the rows are its largest value + 1); of row `row` (axis 0) of the index
//! only (-1: all of it), and [-rows, rows) where the model `wraps` a negative value into the rows itself. An index
//! may have several: its values lie within each that bounds them.
struct IndexRows
{
    std::string index;
    int64_t rows{-1};
    std::string input;
    size_t axis{0};
    bool ownMax{false};
    int64_t row{-1};
    bool wraps{false};
};

//! Optimization profile 0 of one input: its min, opt and max shapes.
struct ProfileShapes
{
    std::string input;
    std::array<std::vector<int64_t>, 3> shapes;
};

struct EngineDescription
{
    std::string plugin;
    std::vector<TensorDescription> inputs;
    std::vector<TensorDescription> outputs;
    std::vector<std::pair<std::string, std::string>> aliases; // (output, input): the output is the input's memory
    std::vector<IndexRows> indexRows;
    std::vector<ProfileShapes> profile;

    TensorDescription const* input(std::string const& name) const
    {
        auto const found = std::find_if(inputs.begin(), inputs.end(), [&](auto const& t) { return t.name == name; });
        return found == inputs.end() ? nullptr : &*found;
    }
    TensorDescription const* output(std::string const& name) const
    {
        auto const found = std::find_if(outputs.begin(), outputs.end(), [&](auto const& t) { return t.name == name; });
        return found == outputs.end() ? nullptr : &*found;
    }
    //! The input whose memory `output` is written into, or "" when it has a buffer of its own.
    std::string aliasedInput(std::string const& output) const
    {
        auto const found = std::find_if(aliases.begin(), aliases.end(), [&](auto const& a) { return a.first == output; });
        return found == aliases.end() ? "" : found->second;
    }
};

//! A description that cannot be read or breaks a rule; what() is one line naming the file, the line and the problem.
struct DescriptionError : std::runtime_error
{
    using std::runtime_error::runtime_error;
};

namespace detail
{
inline bool isSize(std::string const& text)
{
    return !text.empty() && text.size() <= 18 && text.find_first_not_of("0123456789") == std::string::npos;
}

inline bool isName(std::string const& text)
{
    return !text.empty() && text != "." && text != ".."
        && text.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:+-")
        == std::string::npos;
}

//! "[D0,D1,...]" -> its dimensions; `sizes`: every one a size.
inline std::vector<std::string> parseDims(std::string const& text, bool sizes, std::string const& where)
{
    if (text.size() < 2 || text.front() != '[' || text.back() != ']')
    {
        throw DescriptionError(where + ": shape '" + text + "' is not [D0,D1,...]");
    }
    std::vector<std::string> dims;
    std::string const inner = text.substr(1, text.size() - 2);
    std::stringstream parts(inner);
    for (std::string dim; !inner.empty() && std::getline(parts, dim, ',');)
    {
        bool const named = dim == "?" || (isName(dim) && (std::isalpha(static_cast<unsigned char>(dim[0])) || dim[0] == '_'));
        if (!(isSize(dim) || (!sizes && named)))
        {
            throw DescriptionError(where + ": dimension '" + dim + "' of " + text + " is not a size"
                + (sizes ? "" : " or the name of a dynamic dimension"));
        }
        dims.push_back(dim);
    }
    if (!inner.empty() && inner.back() == ',')
    {
        throw DescriptionError(where + ": shape '" + text + "' ends with a comma");
    }
    return dims;
}

//! An index record (`index NAME ROWS|INPUT AXIS|own_max [row=R] [wraps]`, 2 to 5 fields) as IndexRows.
inline IndexRows parseIndex(std::vector<std::string> words, std::string const& where)
{
    IndexRows rows{words[1], -1, "", 0, false, -1, false};
    rows.wraps = words.back() == "wraps";
    if (rows.wraps)
    {
        words.pop_back();
    }
    if (words.size() > 2 && words.back().rfind("row=", 0) == 0)
    {
        std::string const number = words.back().substr(4);
        if (!isSize(number))
        {
            throw DescriptionError(where + ": row '" + number + "' is not a number");
        }
        rows.row = std::stoll(number);
        words.pop_back();
    }
    if (words.size() == 3 && words[2] == "own_max")
    {
        rows.ownMax = true;
        return rows;
    }
    if (words.size() != 3 && words.size() != 4)
    {
        throw DescriptionError(where + ": index takes ROWS, INPUT AXIS or own_max, then row=R and wraps where they hold");
    }
    if (!isSize(words.back()))
    {
        throw DescriptionError(where + ": '" + words.back() + "' is not a number");
    }
    if (words.size() == 3)
    {
        rows.rows = std::stoll(words[2]);
    }
    else
    {
        rows.input = words[2];
        rows.axis = std::stoul(words[3]);
    }
    return rows;
}

//! The rules of common/engine_description.py check_description.
inline void checkDescription(EngineDescription const& d, std::string const& source)
{
    auto fail = [&](std::string const& problem) { throw DescriptionError(source + ": " + problem); };
    static char const* const kDTYPES[] = {"float32", "float16", "bfloat16", "int64", "int32", "int8", "uint8", "bool"};
    if (d.plugin != "python" && d.plugin != "aot")
    {
        fail("plugin '" + d.plugin + "', expected one of python, aot");
    }
    if (d.inputs.empty() || d.outputs.empty())
    {
        fail("an engine has at least one input and one output");
    }
    std::vector<std::string> seen;
    for (auto const* tensors : {&d.inputs, &d.outputs})
    {
        for (TensorDescription const& t : *tensors)
        {
            std::string const kind = tensors == &d.inputs ? "input " : "output ";
            if (!isName(t.name))
            {
                fail(kind + "'" + t.name + "': names are letters, digits and _ . : + - only");
            }
            if (std::find(seen.begin(), seen.end(), t.name) != seen.end())
            {
                fail("tensor '" + t.name + "' is described twice");
            }
            seen.push_back(t.name);
            if (std::find(std::begin(kDTYPES), std::end(kDTYPES), t.dtype) == std::end(kDTYPES))
            {
                fail(kind + t.name + " has dtype '" + t.dtype
                    + "', expected one of float32, float16, bfloat16, int64, int32, int8, uint8, bool");
            }
        }
    }
    std::vector<std::string> targets;
    for (auto const& alias : d.aliases)
    {
        TensorDescription const* written = d.output(alias.first);
        TensorDescription const* read = d.input(alias.second);
        std::string const what = "alias " + alias.first + " " + alias.second + ": ";
        if (written == nullptr || read == nullptr)
        {
            fail(what + "'" + alias.first + "' must be an output and '" + alias.second + "' an input");
        }
        bool same = written->dtype == read->dtype && written->dims.size() == read->dims.size();
        for (size_t i = 0; same && i < read->dims.size(); ++i)
        {
            same = !(isSize(written->dims[i]) && isSize(read->dims[i])) || written->dims[i] == read->dims[i];
        }
        if (!same)
        {
            fail(what + "the output's dtype or shape is not the input's, so it cannot share its memory");
        }
        if (std::find(targets.begin(), targets.end(), alias.second) != targets.end())
        {
            fail("two outputs are written into input " + alias.second + "'s memory");
        }
        targets.push_back(alias.second);
    }
    for (IndexRows const& rows : d.indexRows)
    {
        TensorDescription const* index = d.input(rows.index);
        if (index == nullptr || (index->dtype != "int64" && index->dtype != "int32"))
        {
            fail("index " + rows.index + ": not an int64 or int32 input");
        }
        auto const records = std::count_if(
            d.indexRows.begin(), d.indexRows.end(), [&](IndexRows const& other) { return other.index == rows.index; });
        if (rows.ownMax && (records != 1 || rows.row >= 0 || rows.wraps))
        {
            fail("index " + rows.index + " own_max: its only record, without row=R or wraps");
        }
        TensorDescription const* indexed = rows.input.empty() ? nullptr : d.input(rows.input);
        if (!rows.input.empty() && (indexed == nullptr || rows.axis >= indexed->dims.size()))
        {
            fail("index " + rows.index + " " + rows.input + " " + std::to_string(rows.axis) + ": no such input dimension");
        }
    }
    for (ProfileShapes const& p : d.profile)
    {
        TensorDescription const* t = d.input(p.input);
        if (t == nullptr)
        {
            fail("profile " + p.input + ": not an input");
        }
        for (auto const& shape : p.shapes)
        {
            if (shape.size() != t->dims.size())
            {
                fail("profile " + p.input + ": shapes of another rank than the input's");
            }
        }
        for (size_t axis = 0; axis < t->dims.size(); ++axis)
        {
            for (auto const& shape : p.shapes)
            {
                if (isSize(t->dims[axis]) && std::to_string(shape[axis]) != t->dims[axis])
                {
                    fail("profile " + p.input + ": dimension " + std::to_string(axis) + " is " + t->dims[axis]
                        + " in the input, not in the profile");
                }
            }
            if (!(p.shapes[0][axis] <= p.shapes[1][axis] && p.shapes[1][axis] <= p.shapes[2][axis]))
            {
                fail("profile " + p.input + ": dimension " + std::to_string(axis) + " must satisfy min <= opt <= max");
            }
        }
    }
}
} // namespace detail

//! The description in `text`, every rule checked; `source` names it in the DescriptionError.
inline EngineDescription parseEngineDescription(std::string const& text, std::string const& source)
{
    using detail::isSize;
    EngineDescription d;
    std::istringstream lines(text);
    bool first = true;
    int plugins = 0;
    int number = 0;
    for (std::string line; std::getline(lines, line);)
    {
        ++number;
        std::string const where = source + " line " + std::to_string(number);
        std::istringstream fields(line);
        std::vector<std::string> words;
        for (std::string word; fields >> word;)
        {
            words.push_back(word);
        }
        if (words.empty() || words[0][0] == '#')
        {
            continue;
        }
        if (first)
        {
            if (words.size() < 2 || words[0] != "format" || words[1] != "aliased_io_engine")
            {
                throw DescriptionError(source + ": not an engine description (its first line must be 'format "
                                                "aliased_io_engine 1')");
            }
            if (words.size() != 3 || words[2] != "1")
            {
                throw DescriptionError(source + ": format " + line.substr(line.find("aliased_io_engine"))
                    + ", this program reads 'aliased_io_engine 1' only");
            }
            first = false;
            continue;
        }
        std::string const& record = words[0];
        auto expectFields = [&](size_t count) {
            if (words.size() != count + 1)
            {
                throw DescriptionError(where + ": " + record + " takes " + std::to_string(count) + " field(s), got "
                    + std::to_string(words.size() - 1));
            }
        };
        if (record == "plugin")
        {
            expectFields(1);
            d.plugin = words[1];
            ++plugins;
        }
        else if (record == "input" || record == "output")
        {
            expectFields(3);
            (record == "input" ? d.inputs : d.outputs)
                .push_back({words[1], words[2], detail::parseDims(words[3], false, where)});
        }
        else if (record == "alias")
        {
            expectFields(2);
            if (!d.aliasedInput(words[1]).empty())
            {
                throw DescriptionError(where + ": output " + words[1] + " has two aliases");
            }
            d.aliases.emplace_back(words[1], words[2]);
        }
        else if (record == "index")
        {
            if (words.size() < 3 || words.size() > 6)
            {
                throw DescriptionError(where + ": index takes 2 to 5 field(s), got " + std::to_string(words.size() - 1));
            }
            d.indexRows.push_back(detail::parseIndex(words, where));
            auto const same = [&](IndexRows const& r) {
                IndexRows const& n = d.indexRows.back();
                return r.index == n.index && r.rows == n.rows && r.input == n.input && r.axis == n.axis
                    && r.ownMax == n.ownMax && r.row == n.row && r.wraps == n.wraps;
            };
            if (std::count_if(d.indexRows.begin(), d.indexRows.end(), same) > 1)
            {
                throw DescriptionError(where + ": index " + words[1] + ": the same record twice");
            }
        }
        else if (record == "profile")
        {
            expectFields(4);
            ProfileShapes p{words[1], {}};
            for (size_t i = 0; i < 3; ++i)
            {
                for (std::string const& dim : detail::parseDims(words[2 + i], true, where))
                {
                    p.shapes[i].push_back(std::stoll(dim));
                }
            }
            d.profile.push_back(p);
        }
        else
        {
            throw DescriptionError(where + ": unknown record '" + record
                + "' (expected plugin, input, output, alias, index, profile)");
        }
    }
    if (first)
    {
        throw DescriptionError(source + ": not an engine description (its first line must be 'format "
                                        "aliased_io_engine 1')");
    }
    if (plugins != 1)
    {
        throw DescriptionError(source + ": " + std::to_string(plugins) + " plugin records, expected one");
    }
    detail::checkDescription(d, source);
    return d;
}

//! The description file at `path` (DescriptionError when it is missing, unreadable or breaks a rule).
inline EngineDescription readEngineDescription(std::string const& path)
{
    std::ifstream file(path, std::ios::binary);
    if (!file)
    {
        throw DescriptionError("cannot read the engine description " + path
            + " (--save_engine of an --onnx model writes it beside the engine)");
    }
    std::ostringstream text;
    text << file.rdbuf();
    std::string const content = text.str();
    if (std::any_of(content.begin(), content.end(), [](char c) { return static_cast<unsigned char>(c) > 127; }))
    {
        throw DescriptionError("the engine description " + path + ": not an engine description (not ASCII text)");
    }
    return parseEngineDescription(content, "the engine description " + path);
}

//! Binds each aliased output at the address its input is bound at; call it once the inputs are bound. False when
//! an input is not bound yet or TensorRT refuses an address (its logger says why); `failed` names the output.
inline bool bindAliasedOutputs(
    nvinfer1::IExecutionContext& context, EngineDescription const& d, std::string* failed = nullptr)
{
    for (auto const& alias : d.aliases)
    {
        void const* const address = context.getTensorAddress(alias.second.c_str());
        if (address == nullptr || !context.setTensorAddress(alias.first.c_str(), const_cast<void*>(address)))
        {
            if (failed != nullptr)
            {
                *failed = alias.first;
            }
            return false;
        }
    }
    return true;
}

} // namespace aliased_io

#endif // ALIASED_IO_BINDINGS_H
