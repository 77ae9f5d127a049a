// backend/cuda/kv_transfer.cu — the KV cache in and out in the canonical layout (backend.h
// KvBlob): the device buffers already hold it per layer, so each part is one contiguous range.
// The bytes go through two pinned staging buffers in chunks: while the DMA engine moves one
// chunk, the host copies the next into (or out of) the other.
#include <algorithm>
#include <cstring>

#include "backend/cuda/cuda_backend_impl.cuh"
#include "core/error.h"
#include "core/parallel.h"

namespace jllm {

namespace {

// The parts of a canonical blob in order: device range and bytes per position.
struct KvPart {
    uint8_t* dev;
    size_t row;
};

std::vector<KvPart> kv_parts(const std::vector<DevKv>& kv, const KvRowBytes& rb) {
    std::vector<KvPart> parts;
    for (const DevKv& l : kv) {
        parts.push_back({static_cast<uint8_t*>(l.k), rb.row});
        if (rb.scale_row) parts.push_back({reinterpret_cast<uint8_t*>(l.k_scale), rb.scale_row});
        parts.push_back({static_cast<uint8_t*>(l.v), rb.row});
        if (rb.scale_row) parts.push_back({reinterpret_cast<uint8_t*>(l.v_scale), rb.scale_row});
    }
    return parts;
}

}  // namespace

// mutable state behind const read_kv: the staging buffers are scratch, not the cache.
void CudaBackend::ensure_kv_stage() const {
    auto* self = const_cast<CudaBackend*>(this);
    for (int i = 0; i < 2; ++i) {
        if (!self->kv_stage_[i]) {
            JLLM_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&self->kv_stage_[i]), KV_STAGE_BYTES));
            JLLM_CUDA_CHECK(cudaEventCreateWithFlags(&self->kv_stage_ev_[i], cudaEventDisableTiming));
        }
    }
}

void CudaBackend::read_kv(int pos0, int n_pos, KvBlob& out) const {
    JLLM_ASSERT(pos0 >= 0 && n_pos >= 0 && pos0 + n_pos <= n_ctx_);
    JLLM_CUDA_CHECK(cudaSetDevice(opt_.device));
    JLLM_CUDA_CHECK(cudaStreamSynchronize(stream_));
    const KvRowBytes rb = kv_row_bytes(c_, kv_type_);
    out.type = kv_type_;
    out.n_pos = n_pos;
    kv_blob_resize(out, rb.layer(n_pos) * kv_.size());
    if (n_pos == 0) return;
    ensure_kv_stage();
    // Chunks in blob order: (device source, bytes, offset in the blob).
    struct Chunk {
        const uint8_t* dev;
        size_t n, at;
    };
    std::vector<Chunk> chunks;
    size_t at = 0;
    for (const KvPart& p : kv_parts(kv_, rb)) {
        const size_t total = static_cast<size_t>(n_pos) * p.row;
        for (size_t off = 0; off < total; off += KV_STAGE_BYTES) {
            chunks.push_back({p.dev + static_cast<size_t>(pos0) * p.row + off, std::min(KV_STAGE_BYTES, total - off), at});
            at += chunks.back().n;
        }
    }
    // DMA chunk i+1 into one buffer while the host copies chunk i out of the other.
    auto issue = [&](size_t i) {
        const int b = static_cast<int>(i % 2);
        JLLM_CUDA_CHECK(cudaMemcpyAsync(kv_stage_[b], chunks[i].dev, chunks[i].n, cudaMemcpyDeviceToHost, stream_));
        JLLM_CUDA_CHECK(cudaEventRecord(kv_stage_ev_[b], stream_));
    };
    issue(0);
    for (size_t i = 0; i < chunks.size(); ++i) {
        if (i + 1 < chunks.size()) issue(i + 1);
        const int b = static_cast<int>(i % 2);
        JLLM_CUDA_CHECK(cudaEventSynchronize(kv_stage_ev_[b]));
        parallel_memcpy(out.bytes.data() + chunks[i].at, kv_stage_[b], chunks[i].n);
    }
}

void CudaBackend::write_kv_view(int pos0, const KvView& in) {
    check_kv_blob(in, c_, kv_type_, pos0, n_ctx_);
    JLLM_CUDA_CHECK(cudaSetDevice(opt_.device));
    JLLM_CUDA_CHECK(cudaStreamSynchronize(stream_));
    if (in.n_pos == 0) return;
    ensure_kv_stage();
    const KvRowBytes rb = kv_row_bytes(c_, kv_type_);
    const std::vector<KvPart> parts = kv_parts(kv_, rb);
    const int per_layer = rb.scale_row ? 4 : 2;
    int b = 0;
    bool used[2] = {false, false};
    for (size_t pi = 0; pi < parts.size(); ++pi) {
        const KvPart& p = parts[pi];
        const int64_t layer = static_cast<int64_t>(pi) / per_layer;
        const int in_layer = static_cast<int>(pi % per_layer);
        const int part = per_layer == 4 ? in_layer : 2 * in_layer;  // FP16: K, V
        const uint8_t* src = kv_view_part(in, rb, layer, part);
        const size_t total = static_cast<size_t>(in.n_pos) * p.row;
        for (size_t off = 0; off < total; off += KV_STAGE_BYTES) {
            const size_t n = std::min(KV_STAGE_BYTES, total - off);
            if (used[b]) JLLM_CUDA_CHECK(cudaEventSynchronize(kv_stage_ev_[b]));  // its last DMA is done
            parallel_memcpy(kv_stage_[b], src + off, n);
            JLLM_CUDA_CHECK(cudaMemcpyAsync(p.dev + static_cast<size_t>(pos0) * p.row + off, kv_stage_[b], n,
                                            cudaMemcpyHostToDevice, stream_));
            JLLM_CUDA_CHECK(cudaEventRecord(kv_stage_ev_[b], stream_));
            used[b] = true;
            b ^= 1;
        }
    }
    JLLM_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

}  // namespace jllm
