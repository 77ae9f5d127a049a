// gguf/gguf_writer.cpp — GgufWriter: metadata encoded as it is set, tensors laid out at the
// alignment, the file written to a temporary name and renamed (format in gguf/gguf_format.h).
#include "gguf/gguf_writer.h"

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>

#include <unistd.h>

#include "core/error.h"
#include "gguf/gguf_format.h"

namespace jllm {

namespace {
void put_bytes(std::vector<uint8_t>& out, const void* p, size_t n) {
    if (n == 0) return;
    const size_t at = out.size();
    out.resize(at + n);
    std::memcpy(out.data() + at, p, n);
}
template <typename T>
void put(std::vector<uint8_t>& out, T v) {
    put_bytes(out, &v, sizeof(T));
}
void put_string(std::vector<uint8_t>& out, const std::string& s) {
    put<uint64_t>(out, s.size());
    put_bytes(out, s.data(), s.size());
}
template <typename T>
std::vector<uint8_t> scalar_payload(T v) {
    std::vector<uint8_t> p;
    put(p, v);
    return p;
}
template <typename T>
std::vector<uint8_t> array_payload(GgufType et, const std::vector<T>& v) {
    std::vector<uint8_t> p;
    put<uint32_t>(p, static_cast<uint32_t>(et));
    put<uint64_t>(p, v.size());
    if (!v.empty()) put_bytes(p, v.data(), v.size() * sizeof(T));
    return p;
}
}  // namespace

GgufWriter::GgufWriter() = default;

void GgufWriter::set_raw(const std::string& key, GgufType type, std::vector<uint8_t> payload) {
    for (Meta& m : meta_) {
        if (m.key == key) {
            m.type = type;
            m.payload = std::move(payload);
            return;
        }
    }
    meta_.push_back(Meta{key, type, std::move(payload)});
}

void GgufWriter::set_u8(const std::string& k, uint8_t v) { set_raw(k, GgufType::UINT8, scalar_payload(v)); }
void GgufWriter::set_i8(const std::string& k, int8_t v) { set_raw(k, GgufType::INT8, scalar_payload(v)); }
void GgufWriter::set_u16(const std::string& k, uint16_t v) { set_raw(k, GgufType::UINT16, scalar_payload(v)); }
void GgufWriter::set_i16(const std::string& k, int16_t v) { set_raw(k, GgufType::INT16, scalar_payload(v)); }
void GgufWriter::set_u32(const std::string& k, uint32_t v) { set_raw(k, GgufType::UINT32, scalar_payload(v)); }
void GgufWriter::set_i32(const std::string& k, int32_t v) { set_raw(k, GgufType::INT32, scalar_payload(v)); }
void GgufWriter::set_u64(const std::string& k, uint64_t v) { set_raw(k, GgufType::UINT64, scalar_payload(v)); }
void GgufWriter::set_i64(const std::string& k, int64_t v) { set_raw(k, GgufType::INT64, scalar_payload(v)); }
void GgufWriter::set_f32(const std::string& k, float v) { set_raw(k, GgufType::FLOAT32, scalar_payload(v)); }
void GgufWriter::set_f64(const std::string& k, double v) { set_raw(k, GgufType::FLOAT64, scalar_payload(v)); }
void GgufWriter::set_bool(const std::string& k, bool v) {
    set_raw(k, GgufType::BOOL, scalar_payload<uint8_t>(v ? 1 : 0));
}
void GgufWriter::set_string(const std::string& k, const std::string& v) {
    std::vector<uint8_t> p;
    put_string(p, v);
    set_raw(k, GgufType::STRING, std::move(p));
}
void GgufWriter::set_array_string(const std::string& k, const std::vector<std::string>& v) {
    std::vector<uint8_t> p;
    put<uint32_t>(p, static_cast<uint32_t>(GgufType::STRING));
    put<uint64_t>(p, v.size());
    for (const std::string& s : v) put_string(p, s);
    set_raw(k, GgufType::ARRAY, std::move(p));
}
void GgufWriter::set_array_i32(const std::string& k, const std::vector<int32_t>& v) {
    set_raw(k, GgufType::ARRAY, array_payload(GgufType::INT32, v));
}
void GgufWriter::set_array_u32(const std::string& k, const std::vector<uint32_t>& v) {
    set_raw(k, GgufType::ARRAY, array_payload(GgufType::UINT32, v));
}
void GgufWriter::set_array_f32(const std::string& k, const std::vector<float>& v) {
    set_raw(k, GgufType::ARRAY, array_payload(GgufType::FLOAT32, v));
}
void GgufWriter::copy_kv(const GgufKV& kv) {
    const GgufValue& v = kv.value;
    std::vector<uint8_t> p;
    auto put_scalar = [&](GgufType t, const GgufValue& x) {
        switch (t) {
            case GgufType::UINT8: put<uint8_t>(p, static_cast<uint8_t>(x.u)); break;
            case GgufType::INT8: put<int8_t>(p, static_cast<int8_t>(x.i)); break;
            case GgufType::UINT16: put<uint16_t>(p, static_cast<uint16_t>(x.u)); break;
            case GgufType::INT16: put<int16_t>(p, static_cast<int16_t>(x.i)); break;
            case GgufType::UINT32: put<uint32_t>(p, static_cast<uint32_t>(x.u)); break;
            case GgufType::INT32: put<int32_t>(p, static_cast<int32_t>(x.i)); break;
            case GgufType::UINT64: put<uint64_t>(p, x.u); break;
            case GgufType::INT64: put<int64_t>(p, x.i); break;
            case GgufType::FLOAT32: put<float>(p, static_cast<float>(x.f)); break;
            case GgufType::FLOAT64: put<double>(p, x.f); break;
            case GgufType::BOOL: put<uint8_t>(p, static_cast<uint8_t>(x.u)); break;
            case GgufType::STRING: put_string(p, std::string(x.str)); break;
            default: break;
        }
    };
    if (v.type == GgufType::ARRAY) {
        put<uint32_t>(p, static_cast<uint32_t>(v.arr.elem_type));
        put<uint64_t>(p, v.arr.count);
        if (v.arr.elem_type == GgufType::STRING) {
            for (std::string_view s : v.arr.strings) put_string(p, std::string(s));
        } else {
            put_bytes(p, v.arr.data, static_cast<size_t>(v.arr.count * gguf_scalar_size(v.arr.elem_type)));
        }
    } else {
        put_scalar(v.type, v);
    }
    set_raw(kv.key, v.type, std::move(p));
}

void GgufWriter::set_alignment(uint32_t alignment) {
    if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
        throw JllmError(strfmt("gguf writer: alignment %u is not a power of two", alignment));
    }
    alignment_ = alignment;
    set_u32("general.alignment", alignment);
}

namespace {
uint64_t tensor_bytes(const std::string& name, GgmlType type, const std::vector<int64_t>& ne) {
    if (ne.empty() || ne.size() > 4) {
        throw JllmError(strfmt("gguf writer: tensor '%s' has %zu dims (1..4 allowed)", name.c_str(), ne.size()));
    }
    uint64_t rows = 1;
    for (size_t d = 1; d < ne.size(); ++d) {
        if (ne[d] <= 0) throw JllmError(strfmt("gguf writer: tensor '%s' has dimension %zu <= 0", name.c_str(), d));
        rows *= static_cast<uint64_t>(ne[d]);
    }
    if (ne[0] <= 0) throw JllmError(strfmt("gguf writer: tensor '%s' has dimension 0 <= 0", name.c_str()));
    return rows * row_size(type, ne[0]);
}
}  // namespace

void GgufWriter::add_tensor(const std::string& name, GgmlType type, const std::vector<int64_t>& ne,
                            std::vector<uint8_t> bytes) {
    const uint64_t nb = tensor_bytes(name, type, ne);
    if (bytes.size() != nb) {
        throw JllmError(strfmt("gguf writer: tensor '%s' needs %" PRIu64 " bytes, got %zu", name.c_str(), nb,
                               bytes.size()));
    }
    for (const Tensor& t : tensors_) {
        if (t.name == name) throw JllmError("gguf writer: duplicate tensor '" + name + "'");
    }
    tensors_.push_back(Tensor{name, type, ne, nb, std::move(bytes), nullptr});
}

void GgufWriter::add_tensor_lazy(const std::string& name, GgmlType type, const std::vector<int64_t>& ne,
                                 std::function<void(uint8_t*)> fill) {
    const uint64_t nb = tensor_bytes(name, type, ne);
    for (const Tensor& t : tensors_) {
        if (t.name == name) throw JllmError("gguf writer: duplicate tensor '" + name + "'");
    }
    tensors_.push_back(Tensor{name, type, ne, nb, {}, std::move(fill)});
}

std::vector<uint8_t> GgufWriter::header_bytes(uint64_t* data_offset) const {
    std::vector<uint8_t> out;
    put<uint32_t>(out, GGUF_MAGIC);
    put<uint32_t>(out, 3);
    put<uint64_t>(out, tensors_.size());
    put<uint64_t>(out, meta_.size());
    for (const Meta& m : meta_) {
        put_string(out, m.key);
        put<uint32_t>(out, static_cast<uint32_t>(m.type));
        put_bytes(out, m.payload.data(), m.payload.size());
    }
    uint64_t off = 0;
    for (const Tensor& t : tensors_) {
        put_string(out, t.name);
        put<uint32_t>(out, static_cast<uint32_t>(t.ne.size()));
        for (int64_t d : t.ne) put<uint64_t>(out, static_cast<uint64_t>(d));
        put<uint32_t>(out, static_cast<uint32_t>(t.type));
        put<uint64_t>(out, off);
        off += t.nbytes;
        off = (off + alignment_ - 1) / alignment_ * alignment_;
    }
    const uint64_t pad = (alignment_ - out.size() % alignment_) % alignment_;
    out.insert(out.end(), pad, 0);
    *data_offset = out.size();
    return out;
}

std::vector<uint8_t> GgufWriter::write_to_memory() const {
    uint64_t data_off = 0;
    std::vector<uint8_t> out = header_bytes(&data_off);
    for (const Tensor& t : tensors_) {
        const size_t at = out.size();
        out.resize(at + t.nbytes);
        if (t.fill) t.fill(out.data() + at);
        else std::memcpy(out.data() + at, t.bytes.data(), t.nbytes);
        const uint64_t pad = (alignment_ - out.size() % alignment_) % alignment_;
        out.insert(out.end(), pad, 0);
    }
    return out;
}

void GgufWriter::write_file(const std::string& path) const {
    // A temporary name of this process's own: writers of the same file in parallel (test
    // processes writing a shared synthetic model) each rename a whole file over it.
    const std::string tmp = path + "." + std::to_string(static_cast<long>(getpid())) + ".tmp";
    FILE* f = std::fopen(tmp.c_str(), "wb");
    if (!f) throw JllmError(strfmt("cannot create '%s': %s", tmp.c_str(), std::strerror(errno)));
    auto write_or_throw = [&](const void* p, size_t n) {
        if (n && std::fwrite(p, 1, n, f) != n) {
            const int e = errno;
            std::fclose(f);
            std::remove(tmp.c_str());
            throw JllmError(strfmt("cannot write '%s': %s", tmp.c_str(), std::strerror(e)));
        }
    };
    uint64_t data_off = 0;
    const std::vector<uint8_t> head = header_bytes(&data_off);
    write_or_throw(head.data(), head.size());
    std::vector<uint8_t> buf;
    const std::vector<uint8_t> zeros(alignment_, 0);
    for (const Tensor& t : tensors_) {
        if (t.fill) {
            buf.assign(t.nbytes, 0);
            t.fill(buf.data());
            write_or_throw(buf.data(), buf.size());
        } else {
            write_or_throw(t.bytes.data(), t.bytes.size());
        }
        const uint64_t pad = (alignment_ - t.nbytes % alignment_) % alignment_;
        write_or_throw(zeros.data(), pad);
    }
    if (std::fclose(f) != 0) {
        std::remove(tmp.c_str());
        throw JllmError(strfmt("cannot close '%s': %s", tmp.c_str(), std::strerror(errno)));
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        const int e = errno;
        std::remove(tmp.c_str());
        throw JllmError(strfmt("cannot rename '%s' to '%s': %s", tmp.c_str(), path.c_str(), std::strerror(e)));
    }
}

}  // namespace jllm
