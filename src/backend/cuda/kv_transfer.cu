// backend/cuda/kv_transfer.cu — the KV cache in and out in the canonical layout (backend.h
// KvBlob): the device buffers already hold it per layer, so each part is one copy.
#include "backend/cuda/cuda_backend_impl.cuh"
#include "core/error.h"

namespace jllm {

void CudaBackend::read_kv(int pos0, int n_pos, KvBlob& out) const {
    JLLM_ASSERT(pos0 >= 0 && n_pos >= 0 && pos0 + n_pos <= n_ctx_);
    JLLM_CUDA_CHECK(cudaSetDevice(opt_.device));
    JLLM_CUDA_CHECK(cudaStreamSynchronize(stream_));
    const KvRowBytes rb = kv_row_bytes(c_, kv_type_);
    out.type = kv_type_;
    out.n_pos = n_pos;
    out.bytes.resize(rb.layer(n_pos) * kv_.size());
    uint8_t* p = out.bytes.data();
    auto get = [&](const void* base, size_t row) {
        const size_t n = static_cast<size_t>(n_pos) * row;
        JLLM_CUDA_CHECK(cudaMemcpy(p, static_cast<const uint8_t*>(base) + pos0 * row, n, cudaMemcpyDeviceToHost));
        p += n;
    };
    for (const DevKv& l : kv_) {
        get(l.k, rb.row);
        if (rb.scale_row) get(l.k_scale, rb.scale_row);
        get(l.v, rb.row);
        if (rb.scale_row) get(l.v_scale, rb.scale_row);
    }
}

void CudaBackend::write_kv(int pos0, const KvBlob& in) {
    check_kv_blob(in, c_, kv_type_, pos0, n_ctx_);
    JLLM_CUDA_CHECK(cudaSetDevice(opt_.device));
    JLLM_CUDA_CHECK(cudaStreamSynchronize(stream_));
    const KvRowBytes rb = kv_row_bytes(c_, kv_type_);
    const uint8_t* p = in.bytes.data();
    auto put = [&](void* base, size_t row) {
        const size_t n = static_cast<size_t>(in.n_pos) * row;
        JLLM_CUDA_CHECK(cudaMemcpy(static_cast<uint8_t*>(base) + pos0 * row, p, n, cudaMemcpyHostToDevice));
        p += n;
    };
    for (DevKv& l : kv_) {
        put(l.k, rb.row);
        if (rb.scale_row) put(l.k_scale, rb.scale_row);
        put(l.v, rb.row);
        if (rb.scale_row) put(l.v_scale, rb.scale_row);
    }
}

}  // namespace jllm
