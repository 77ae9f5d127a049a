// backend/kv_blob.cpp — the canonical KV layout's sizes and checks (backend.h), shared by the
// backends' read_kv / write_kv and by the memory plan (Backend::kv_bytes_for).
#include "backend/backend.h"

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

void check_kv_blob(const KvBlob& in, const ModelConfig& c, KvType t, int pos0, int n_ctx) {
    if (in.type != t) throw JllmError("kv: snapshot KV type differs from the cache's");
    if (pos0 < 0 || in.n_pos < 0 || pos0 + in.n_pos > n_ctx) throw JllmError("kv: snapshot does not fit the context");
    if (in.bytes.size() != kv_row_bytes(c, t).layer(in.n_pos) * static_cast<size_t>(c.n_layer)) {
        throw JllmError("kv: snapshot size does not match the model");
    }
}

}  // namespace jllm
