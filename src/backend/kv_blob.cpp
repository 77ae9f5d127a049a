// backend/kv_blob.cpp — the canonical KV layout's sizes and checks (backend.h), shared by the
// backends' read_kv / write_kv and by the memory plan (Backend::kv_bytes_for).
#include "backend/backend.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/cpu/rope.h"
#include "backend/kv_quant.h"
#include "core/error.h"
#include "core/fp16.h"
#include "model/model_config.h"

namespace jllm {

KvRowBytes kv_row_bytes(const ModelConfig& c, KvType t) {
    KvRowBytes r;
    r.row = static_cast<size_t>(c.kv_dim()) * (t == KvType::Int8 ? 1 : 2);
    r.scale_row = t == KvType::Int8 ? static_cast<size_t>(c.n_head_kv) * sizeof(Half) : 0;
    return r;
}

int64_t Backend::kv_bytes_for(const ModelConfig& c, int n_ctx, KvType t) {
    return static_cast<int64_t>(kv_row_bytes(c, t).layer(n_ctx)) * c.n_layer;
}

KvView kv_view(const KvBlob& b) { return kv_view(b, 0, b.n_pos); }

KvView kv_view(const KvBlob& b, int from, int to) {
    JLLM_ASSERT(0 <= from && from <= to && to <= b.n_pos);
    KvView v;
    v.type = b.type;
    v.bytes = b.bytes.data();
    v.size = b.bytes.size();
    v.n_total = b.n_pos;
    v.first = from;
    v.n_pos = to - from;
    return v;
}

void check_kv_blob(const KvView& in, const ModelConfig& c, KvType t, int pos0, int n_ctx) {
    if (in.type != t) throw JllmError("kv: snapshot KV type differs from the cache's");
    if (pos0 < 0 || in.n_pos < 0 || pos0 + in.n_pos > n_ctx) throw JllmError("kv: snapshot does not fit the context");
    if (in.first < 0 || in.first + in.n_pos > in.n_total) throw JllmError("kv: positions outside the snapshot");
    if (in.size != kv_row_bytes(c, t).layer(in.n_total) * static_cast<size_t>(c.n_layer)) {
        throw JllmError("kv: snapshot size does not match the model");
    }
}

const uint8_t* kv_view_part(const KvView& in, const KvRowBytes& rb, int64_t l, int part) {
    const size_t n = static_cast<size_t>(in.n_total), f = static_cast<size_t>(in.first);
    const uint8_t* layer = in.bytes + static_cast<size_t>(l) * rb.layer(in.n_total);
    switch (part) {
        case 0: return layer + f * rb.row;
        case 1: return layer + n * rb.row + f * rb.scale_row;
        case 2: return layer + n * (rb.row + rb.scale_row) + f * rb.row;
        default: return layer + n * (2 * rb.row + rb.scale_row) + f * rb.scale_row;
    }
}

void kv_blob_resize(KvBlob& b, size_t bytes) {
    if (bytes >= (8u << 20) && b.bytes.capacity() < bytes) {
        KvBytes().swap(b.bytes);
        b.bytes.reserve(bytes);  // a fresh mapping, not touched yet
        const uintptr_t huge = 2u << 20;
        const uintptr_t lo = (reinterpret_cast<uintptr_t>(b.bytes.data()) + huge - 1) & ~(huge - 1);
        const uintptr_t hi = (reinterpret_cast<uintptr_t>(b.bytes.data()) + bytes) & ~(huge - 1);
        if (hi > lo) (void)::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
    }
    b.bytes.resize(bytes);
}

void kv_blob_shift(KvBlob& blob, const ModelConfig& c, const float* inv_freq, int delta) {
    if (delta == 0 || blob.n_pos == 0) return;
    const KvRowBytes rb = kv_row_bytes(c, blob.type);
    JLLM_ASSERT(blob.bytes.size() == rb.layer(blob.n_pos) * static_cast<size_t>(c.n_layer));
    const size_t n = static_cast<size_t>(blob.n_pos), hd = static_cast<size_t>(c.head_dim);
    const size_t heads = n * static_cast<size_t>(c.n_head_kv);
    std::vector<float> x(hd), cs(static_cast<size_t>(c.n_rot));
    rope_angles(c.n_rot, inv_freq, delta, cs.data());  // one delta: the same angles for every head
    uint8_t* layer = blob.bytes.data();
    for (int64_t l = 0; l < c.n_layer; ++l) {
        // K rows [n][n_head_kv][head_dim], then (INT8) K scales [n][n_head_kv].
        if (blob.type == KvType::Int8) {
            auto* q = reinterpret_cast<int8_t*>(layer);
            auto* sc = reinterpret_cast<Half*>(layer + n * rb.row);
            // Rotated keys (kv_quant.h) go back to RoPE's basis for the delta and return: H is
            // its own inverse.
            const bool rotated = kv_k_rotated(blob.type, c.head_dim);
            for (size_t h = 0; h < heads; ++h) {
                const float d = to_f32(sc[h]);
                for (size_t i = 0; i < hd; ++i) x[i] = d * static_cast<float>(q[h * hd + i]);
                if (rotated) hadamard_rotate(x.data(), static_cast<int64_t>(hd));
                rope_apply_cs(x.data(), c.n_rot, c.recipe->rope_style, cs.data());
                if (rotated) hadamard_rotate(x.data(), static_cast<int64_t>(hd));
                quantize_kv_int8(x.data(), static_cast<int64_t>(hd), q + h * hd, &sc[h]);
            }
        } else {
            auto* k = reinterpret_cast<Half*>(layer);
            for (size_t h = 0; h < heads; ++h) {
                for (size_t i = 0; i < hd; ++i) x[i] = to_f32(k[h * hd + i]);
                rope_apply_cs(x.data(), c.n_rot, c.recipe->rope_style, cs.data());
                for (size_t i = 0; i < hd; ++i) k[h * hd + i] = to_half(x[i]);
            }
        }
        layer += rb.layer(blob.n_pos);
    }
}

KvBlob kv_blob_slice(const KvBlob& in, const ModelConfig& c, int from, int to) {
    JLLM_ASSERT(0 <= from && from <= to && to <= in.n_pos);
    const KvRowBytes rb = kv_row_bytes(c, in.type);
    JLLM_ASSERT(in.bytes.size() == rb.layer(in.n_pos) * static_cast<size_t>(c.n_layer));
    KvBlob out;
    out.type = in.type;
    out.n_pos = to - from;
    kv_blob_resize(out, rb.layer(out.n_pos) * static_cast<size_t>(c.n_layer));
    const uint8_t* src = in.bytes.data();
    uint8_t* dst = out.bytes.data();
    const size_t n = static_cast<size_t>(out.n_pos), skip = static_cast<size_t>(from), total = static_cast<size_t>(in.n_pos);
    // Per layer: K rows, K scales, V rows, V scales, each [n_pos][...].
    for (int64_t l = 0; l < c.n_layer; ++l) {
        for (int part = 0; part < 2; ++part) {
            for (size_t unit : {rb.row, rb.scale_row}) {
                if (unit == 0) continue;
                std::memcpy(dst, src + skip * unit, n * unit);
                dst += n * unit;
                src += total * unit;
            }
        }
    }
    return out;
}

}  // namespace jllm
