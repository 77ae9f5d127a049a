// gguf/gguf.h — GGUF v2/v3 reader (mmap, fully validated) and the value types it yields; the
// writer (tests, jllm-synth) is gguf/gguf_writer.h.
//
// The reader never trusts the file: every count, length, offset and size is checked against
// the bytes that exist and against sane limits before use; a bad file raises one JllmError
// naming what is wrong and where ("gguf: <path>: <what> at offset N (key 'x' / tensor 'y')").
// Strings and numeric arrays are views into the mapping (no copies of 150k-token vocabularies).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/mmap_file.h"
#include "quant/quant_types.h"

namespace jllm {

enum class GgufType : uint32_t {
    UINT8 = 0,
    INT8 = 1,
    UINT16 = 2,
    INT16 = 3,
    UINT32 = 4,
    INT32 = 5,
    FLOAT32 = 6,
    BOOL = 7,
    STRING = 8,
    ARRAY = 9,
    UINT64 = 10,
    INT64 = 11,
    FLOAT64 = 12,
};

const char* gguf_type_name(GgufType t);

// Limits that keep a hostile file from causing huge allocations or hangs.
struct GgufLimits {
    static constexpr uint64_t MAX_STRING = 64ull << 20;     // bytes in one string
    static constexpr uint64_t MAX_KEY = 65535;              // bytes in a key or tensor name
    static constexpr uint64_t MAX_KV = 1ull << 20;          // metadata entries
    static constexpr uint64_t MAX_TENSORS = 1ull << 20;     // tensor infos
    static constexpr uint64_t MAX_ARRAY = 1ull << 28;       // elements in one array
    static constexpr uint32_t MAX_DIMS = 4;
    static constexpr uint64_t MAX_ALIGNMENT = 1ull << 16;   // general.alignment upper bound
};

struct GgufArray {
    GgufType elem_type = GgufType::UINT8;
    uint64_t count = 0;
    const uint8_t* data = nullptr;           // numeric arrays: raw little-endian elements
    std::vector<std::string_view> strings;   // string arrays: views into the mapping
    // Element i of a numeric array converted to the requested type (range-checked by caller).
    int64_t get_int(uint64_t i) const;
    double get_float(uint64_t i) const;
};

struct GgufValue {
    GgufType type = GgufType::UINT8;
    uint64_t u = 0;        // unsigned integers and bool
    int64_t i = 0;         // signed integers
    double f = 0.0;        // floats
    std::string_view str;  // STRING
    GgufArray arr;         // ARRAY
    std::string to_string(size_t max_array_items = 8) const;  // for --info
};

struct GgufKV {
    std::string key;
    GgufValue value;
    uint64_t offset = 0;  // file offset of the key's length field
};

struct GgufTensorInfo {
    std::string name;
    uint32_t n_dims = 0;
    int64_t ne[4] = {1, 1, 1, 1};  // ne[0] is the contiguous (row) dimension
    GgmlType type = GgmlType::F32;
    uint64_t offset = 0;       // relative to the data section
    uint64_t file_offset = 0;  // absolute
    uint64_t nbytes = 0;
    const uint8_t* data = nullptr;  // into the mapping
    int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
    std::string shape_string() const;  // "[576, 49152]"
};

class GgufFile {
public:
    // Maps and validates `path`. Throws JllmError on any problem.
    static std::unique_ptr<GgufFile> open(const std::string& path);
    // Validates a buffer owned by the caller (fuzzing, tests). `name` appears in errors.
    static std::unique_ptr<GgufFile> from_memory(const uint8_t* data, size_t size,
                                                 const std::string& name = "<memory>");

    uint32_t version() const { return version_; }
    uint64_t alignment() const { return alignment_; }
    uint64_t data_offset() const { return data_offset_; }
    uint64_t file_size() const { return size_; }
    const std::string& path() const { return path_; }
    const uint8_t* base() const { return base_; }
    // The file's mapping (open), or nullptr for a caller's buffer (from_memory).
    const MmapFile* mapping() const { return map_.data() != nullptr ? &map_ : nullptr; }

    const std::vector<GgufKV>& kvs() const { return kvs_; }
    const GgufKV* find(std::string_view key) const;
    bool has(std::string_view key) const { return find(key) != nullptr; }

    // Typed getters. Absent key: nullopt. Present with the wrong type: JllmError naming the key,
    // the expected and the actual type. Integer getters accept any integer type whose value fits.
    std::optional<uint64_t> get_uint(std::string_view key) const;
    std::optional<int64_t> get_int(std::string_view key) const;
    std::optional<double> get_float(std::string_view key) const;  // FLOAT32/FLOAT64
    std::optional<bool> get_bool(std::string_view key) const;
    std::optional<std::string_view> get_string(std::string_view key) const;
    const GgufArray* get_array(std::string_view key) const;  // nullptr if absent

    const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
    const GgufTensorInfo* find_tensor(std::string_view name) const;

private:
    GgufFile() = default;
    void parse();

    MmapFile map_;
    std::string path_;
    const uint8_t* base_ = nullptr;
    uint64_t size_ = 0;
    uint32_t version_ = 0;
    uint64_t alignment_ = 32;
    uint64_t data_offset_ = 0;
    std::vector<GgufKV> kvs_;
    std::vector<GgufTensorInfo> tensors_;
};

}  // namespace jllm
