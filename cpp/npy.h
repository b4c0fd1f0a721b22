/*
 * npy.h: numpy's .npy files, read and written (format versions 1.0 to 3.0), for cpp/aliased_io_state.cpp.
 *
 * Little-endian float32, float16, int64 and int32 in C order: what `numpy.save` writes for those arrays and what
 * `aliased_io_plugin.py --save_outputs` writes. Anything else (another dtype, big-endian, Fortran order, a file
 * shorter or longer than its header says) is refused with one line (npy::Error).
 */

#ifndef ALIASED_IO_NPY_H
#define ALIASED_IO_NPY_H

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

namespace npy
{

struct Error : std::runtime_error
{
    using std::runtime_error::runtime_error;
};

//! An array: dtype ("float32", "float16", "int64" or "int32"), shape and its bytes in C order.
struct Array
{
    std::string dtype;
    std::vector<int64_t> shape;
    std::vector<char> data;

    int64_t elements() const
    {
        int64_t n = 1;
        for (int64_t d : shape)
        {
            n *= d;
        }
        return n;
    }
};

//! Bytes per element of `dtype`, 0 for a dtype this file does not read.
inline size_t itemSize(std::string const& dtype)
{
    return dtype == "float32" || dtype == "int32" ? 4 : dtype == "float16" ? 2 : dtype == "int64" ? 8 : 0;
}

namespace detail
{
inline char const* descr(std::string const& dtype)
{
    return dtype == "float32" ? "<f4" : dtype == "float16" ? "<f2" : dtype == "int64" ? "<i8" : "<i4";
}

//! The text after `'key':` in the header dict (spaces skipped), or throws.
inline std::string valueOf(std::string const& header, std::string const& key, std::string const& path)
{
    size_t const at = header.find("'" + key + "':");
    if (at == std::string::npos)
    {
        throw Error(path + ": not a .npy file (its header has no '" + key + "')");
    }
    return header.substr(header.find_first_not_of(' ', at + key.size() + 3));
}
} // namespace detail

inline Array read(std::string const& path)
{
    std::ifstream file(path, std::ios::binary | std::ios::ate);
    if (!file)
    {
        throw Error("cannot read " + path + ": " + std::strerror(errno));
    }
    auto const size = static_cast<uint64_t>(file.tellg());
    file.seekg(0);
    char magic[8] = {};
    file.read(magic, 8);
    if (!file || std::memcmp(magic, "\x93NUMPY", 6) != 0)
    {
        throw Error(path + ": not a .npy file (no \\x93NUMPY magic)");
    }
    int const major = static_cast<unsigned char>(magic[6]);
    if (major < 1 || major > 3)
    {
        throw Error(path + ": .npy format version " + std::to_string(major) + ", expected 1, 2 or 3");
    }
    unsigned char length[4] = {};
    file.read(reinterpret_cast<char*>(length), major == 1 ? 2 : 4);
    uint64_t const headerLength = major == 1 ? length[0] | (length[1] << 8)
                                             : length[0] | (length[1] << 8) | (length[2] << 16)
            | (static_cast<uint64_t>(length[3]) << 24);
    uint64_t const dataStart = (major == 1 ? 10 : 12) + headerLength;
    if (!file || headerLength > 65536 || dataStart > size)
    {
        throw Error(path + ": not a .npy file (its header is cut short)");
    }
    std::string header(headerLength, '\0');
    file.read(&header[0], static_cast<std::streamsize>(headerLength));

    Array array;
    std::string const descr = detail::valueOf(header, "descr", path);
    for (char const* name : {"float32", "float16", "int64", "int32"})
    {
        if (descr.rfind(std::string("'") + detail::descr(name) + "'", 0) == 0)
        {
            array.dtype = name;
        }
    }
    if (array.dtype.empty())
    {
        throw Error(path + ": dtype " + descr.substr(0, descr.find_first_of(",}"))
            + ", expected little-endian float32, float16, int64 or int32 ('<f4', '<f2', '<i8', '<i4')");
    }
    if (detail::valueOf(header, "fortran_order", path).rfind("False", 0) != 0)
    {
        throw Error(path + ": a Fortran-order array; save it in C order (numpy.ascontiguousarray)");
    }
    std::string const shape = detail::valueOf(header, "shape", path);
    size_t const close = shape.find(')');
    if (shape.empty() || shape[0] != '(' || close == std::string::npos)
    {
        throw Error(path + ": not a .npy file (its shape is not a tuple)");
    }
    std::string number;
    for (char c : shape.substr(1, close))
    {
        if (c >= '0' && c <= '9')
        {
            number += c;
        }
        else if ((c == ',' || c == ')') && !number.empty())
        {
            if (number.size() > 15)
            {
                throw Error(path + ": a dimension of " + number + " elements is beyond this program's reach");
            }
            array.shape.push_back(std::stoll(number));
            number.clear();
        }
        else if (c != ' ' && c != ',' && c != ')')
        {
            throw Error(path + ": not a .npy file (its shape is not a tuple of sizes)");
        }
    }
    uint64_t bytes = itemSize(array.dtype);
    for (int64_t d : array.shape)
    {
        bytes = d == 0 || bytes <= (uint64_t{1} << 62) / static_cast<uint64_t>(d) ? bytes * static_cast<uint64_t>(d)
                                                                                : UINT64_MAX;
    }
    if (size - dataStart != bytes)
    {
        throw Error(path + ": " + std::to_string(size - dataStart) + " bytes of data, its header says "
            + std::to_string(bytes) + " (a damaged or truncated file)");
    }
    try
    {
        array.data.resize(bytes);
    }
    catch (std::bad_alloc const&)
    {
        throw Error(path + ": " + std::to_string(bytes) + " bytes, more than this machine can hold in memory");
    }
    if (!file.read(array.data.data(), static_cast<std::streamsize>(bytes)))
    {
        throw Error("cannot read " + path + ": " + std::strerror(errno));
    }
    return array;
}

//! Writes `array` as a version 1.0 .npy file (the header padded to 64 bytes, as numpy pads it).
inline void write(std::string const& path, Array const& array)
{
    std::string shape; // numpy's repr of the tuple: (), (5,), (3, 4)
    for (size_t i = 0; i < array.shape.size(); ++i)
    {
        shape += (i ? ", " : "") + std::to_string(array.shape[i]);
    }
    shape = "(" + shape + (array.shape.size() == 1 ? ",)" : ")");
    std::string header = "{'descr': '" + std::string(detail::descr(array.dtype)) + "', 'fortran_order': False, "
        + "'shape': " + shape + ", }";
    header.append(63 - (10 + header.size()) % 64, ' ');
    header += '\n';
    std::ofstream file(path, std::ios::binary);
    char const preamble[8] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0};
    char const length[2] = {static_cast<char>(header.size() & 0xFF), static_cast<char>(header.size() >> 8)};
    file.write(preamble, 8);
    file.write(length, 2);
    file.write(header.data(), static_cast<std::streamsize>(header.size()));
    file.write(array.data.data(), static_cast<std::streamsize>(array.data.size()));
    if (!file.flush())
    {
        throw Error("cannot write " + path + ": " + std::strerror(errno));
    }
}

} // namespace npy

#endif // ALIASED_IO_NPY_H
