// synth/model_cut.cpp — copies metadata entry by entry (typed) and the kept tensors' bytes.
#include "synth/model_cut.h"

#include <cstring>
#include <sys/stat.h>
#include <vector>

#include "core/error.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "synth/quant_recipe.h"

namespace jllm {

namespace {

void copy_array(const std::string& key, const GgufArray& a, GgufWriter& w) {
    switch (a.elem_type) {
        case GgufType::STRING: {
            std::vector<std::string> v(a.strings.begin(), a.strings.end());
            w.set_array_string(key, v);
            return;
        }
        case GgufType::INT32: {
            std::vector<int32_t> v(a.count);
            if (a.count) std::memcpy(v.data(), a.data, a.count * 4);
            w.set_array_i32(key, v);
            return;
        }
        case GgufType::UINT32: {
            std::vector<uint32_t> v(a.count);
            if (a.count) std::memcpy(v.data(), a.data, a.count * 4);
            w.set_array_u32(key, v);
            return;
        }
        case GgufType::FLOAT32: {
            std::vector<float> v(a.count);
            if (a.count) std::memcpy(v.data(), a.data, a.count * 4);
            w.set_array_f32(key, v);
            return;
        }
        default:
            throw JllmError(std::string("cut: metadata '") + key + "' is an array of " + gguf_type_name(a.elem_type) +
                            " (not supported by the writer)");
    }
}

void copy_kv(const GgufKV& kv, GgufWriter& w) {
    const GgufValue& v = kv.value;
    const std::string& k = kv.key;
    switch (v.type) {
        case GgufType::UINT8: w.set_u8(k, static_cast<uint8_t>(v.u)); break;
        case GgufType::INT8: w.set_i8(k, static_cast<int8_t>(v.i)); break;
        case GgufType::UINT16: w.set_u16(k, static_cast<uint16_t>(v.u)); break;
        case GgufType::INT16: w.set_i16(k, static_cast<int16_t>(v.i)); break;
        case GgufType::UINT32: w.set_u32(k, static_cast<uint32_t>(v.u)); break;
        case GgufType::INT32: w.set_i32(k, static_cast<int32_t>(v.i)); break;
        case GgufType::UINT64: w.set_u64(k, v.u); break;
        case GgufType::INT64: w.set_i64(k, v.i); break;
        case GgufType::FLOAT32: w.set_f32(k, static_cast<float>(v.f)); break;
        case GgufType::FLOAT64: w.set_f64(k, v.f); break;
        case GgufType::BOOL: w.set_bool(k, v.u != 0); break;
        case GgufType::STRING: w.set_string(k, std::string(v.str)); break;
        case GgufType::ARRAY: copy_array(k, v.arr, w); break;
    }
}

}  // namespace

CutSummary cut_model_layers(const std::string& in_path, int64_t n_layer, const std::string& out_path) {
    std::unique_ptr<GgufFile> f = GgufFile::open(in_path);
    const std::optional<std::string_view> arch = f->get_string("general.architecture");
    if (!arch) throw JllmError("cut: '" + in_path + "' has no general.architecture");
    const std::string bc_key = std::string(*arch) + ".block_count";
    const std::optional<uint64_t> bc = f->get_uint(bc_key);
    if (!bc) throw JllmError("cut: '" + in_path + "' has no " + bc_key);
    CutSummary s;
    s.n_layer_in = static_cast<int64_t>(*bc);
    if (n_layer < 1 || n_layer > s.n_layer_in) {
        throw JllmError(strfmt("cut: --layers %lld is outside [1, %lld] (the model's block count)",
                               static_cast<long long>(n_layer), static_cast<long long>(s.n_layer_in)));
    }
    s.n_layer_out = n_layer;

    GgufWriter w;
    if (f->alignment() != 32) w.set_alignment(static_cast<uint32_t>(f->alignment()));
    for (const GgufKV& kv : f->kvs()) {
        if (kv.key == bc_key) {
            // Same integer type as the source keeps every reader happy.
            if (kv.value.type == GgufType::UINT32) w.set_u32(bc_key, static_cast<uint32_t>(n_layer));
            else if (kv.value.type == GgufType::INT32) w.set_i32(bc_key, static_cast<int32_t>(n_layer));
            else w.set_u64(bc_key, static_cast<uint64_t>(n_layer));
            continue;
        }
        if (kv.key == "general.alignment") continue;  // set_alignment wrote it
        copy_kv(kv, w);
    }
    const GgufFile* src = f.get();
    for (const GgufTensorInfo& t : f->tensors()) {
        s.tensors_in++;
        const int64_t il = tensor_layer_index(t.name);
        if (il >= n_layer) continue;
        std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
        const uint8_t* data = t.data;
        const uint64_t nb = t.nbytes;
        w.add_tensor_lazy(t.name, t.type, ne, [data, nb, src](uint8_t* dst) {
            (void)src;
            std::memcpy(dst, data, nb);
        });
        s.tensors_out++;
    }
    w.write_file(out_path);
    struct stat st {};
    if (::stat(out_path.c_str(), &st) == 0) s.file_bytes = static_cast<uint64_t>(st.st_size);
    return s;
}

}  // namespace jllm
