// gguf/gguf_writer.h — GgufWriter: collects metadata and tensors (given now, or produced while
// the file is written) and writes a valid GGUF v3 file or buffer. Used by tests and jllm-synth.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "quant/quant_types.h"

namespace jllm {

class GgufWriter {
public:
    GgufWriter();

    void set_u8(const std::string& key, uint8_t v);
    void set_i8(const std::string& key, int8_t v);
    void set_u16(const std::string& key, uint16_t v);
    void set_i16(const std::string& key, int16_t v);
    void set_u32(const std::string& key, uint32_t v);
    void set_i32(const std::string& key, int32_t v);
    void set_u64(const std::string& key, uint64_t v);
    void set_i64(const std::string& key, int64_t v);
    void set_f32(const std::string& key, float v);
    void set_f64(const std::string& key, double v);
    void set_bool(const std::string& key, bool v);
    void set_string(const std::string& key, const std::string& v);
    void set_array_string(const std::string& key, const std::vector<std::string>& v);
    void set_array_i32(const std::string& key, const std::vector<int32_t>& v);
    void set_array_u32(const std::string& key, const std::vector<uint32_t>& v);
    void set_array_f32(const std::string& key, const std::vector<float>& v);
    // Copies a metadata entry read from another file, any type, unchanged.
    void copy_kv(const GgufKV& kv);
    // Sets general.alignment and uses it for the data section (power of two).
    void set_alignment(uint32_t alignment);

    // A tensor whose bytes are given now. `ne` has 1..4 dims, ne[0] contiguous.
    void add_tensor(const std::string& name, GgmlType type, const std::vector<int64_t>& ne,
                    std::vector<uint8_t> bytes);
    // A tensor whose bytes are produced when the file is written (large synthetic models):
    // `fill(dst)` must write exactly the tensor's byte size.
    void add_tensor_lazy(const std::string& name, GgmlType type, const std::vector<int64_t>& ne,
                         std::function<void(uint8_t* dst)> fill);

    size_t tensor_count() const { return tensors_.size(); }
    // Writes the file (to a temp name, then renames). Throws JllmError on I/O failure.
    void write_file(const std::string& path) const;
    std::vector<uint8_t> write_to_memory() const;

private:
    struct Meta {
        std::string key;
        GgufType type;
        std::vector<uint8_t> payload;  // encoded value (after the type field)
    };
    struct Tensor {
        std::string name;
        GgmlType type;
        std::vector<int64_t> ne;
        uint64_t nbytes;
        std::vector<uint8_t> bytes;
        std::function<void(uint8_t*)> fill;
    };
    void set_raw(const std::string& key, GgufType type, std::vector<uint8_t> payload);
    std::vector<uint8_t> header_bytes(uint64_t* data_offset) const;
    std::vector<Meta> meta_;
    std::vector<Tensor> tensors_;
    uint32_t alignment_ = 32;
};

}  // namespace jllm
