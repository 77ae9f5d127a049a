// backend/cuda/weights_upload.cu — bind_weights: every weight the forward pass reads, copied to
// device memory (Q4_K/Q6_K matrices re-laid in the GPU's tiles, cuda_ops.h WeightLayout) or, with
// mapped placement, registered in place (cudaHostRegister) and read zero-copy from the GGUF.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <unordered_map>
#include <vector>

#include "backend/cpu/rope.h"
#include "backend/cuda/cuda_backend_impl.cuh"
#include "core/error.h"
#include "core/log.h"

namespace jllm {

namespace {
size_t align256(size_t n) { return (n + 255) & ~static_cast<size_t>(255); }
}  // namespace

void CudaBackend::bind_weights(const ModelWeights& weights, WeightPlacement placement) {
    JLLM_CUDA_CHECK(cudaSetDevice(opt_.device));
    host_weights_ = &weights;
    std::vector<const WeightTensor*> all = {&weights.token_embd, &weights.output_norm, &weights.output};
    for (const LayerWeights& L : weights.layers) {
        for (const WeightTensor* w : {&L.attn_norm, &L.wq, &L.wk, &L.wv, &L.bq, &L.bk, &L.bv, &L.q_norm, &L.k_norm,
                                      &L.wo, &L.ffn_norm, &L.w_gate, &L.w_up, &L.w_down}) {
            all.push_back(w);
        }
    }
    // Matrices the GEMV/GEMM must handle.
    auto check_matmul = [](const WeightTensor& w) {
        if (!cuda::matmul_type_supported(w.type) || w.cols % 32 != 0) {
            throw JllmError(strfmt("cuda: tensor '%s' (%s, %lld columns) has no CUDA matmul kernel", w.name.c_str(),
                                   type_name(w.type), static_cast<long long>(w.cols)));
        }
    };
    check_matmul(weights.output);
    use_q8_ = cuda::gemv_q8_type_supported(weights.output.type);
    for (const LayerWeights& L : weights.layers) {
        for (const WeightTensor* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) {
            check_matmul(*w);
            use_q8_ = use_q8_ && cuda::gemv_q8_type_supported(w->type);
        }
    }

    mapped_ = placement == WeightPlacement::Mapped || (placement == WeightPlacement::Auto && prop_.integrated);
    std::unordered_map<const uint8_t*, const uint8_t*> dev;  // host bytes -> device bytes
    if (mapped_) {
        uintptr_t lo = UINTPTR_MAX, hi = 0;
        for (const WeightTensor* w : all) {
            if (!w->present()) continue;
            lo = std::min(lo, reinterpret_cast<uintptr_t>(w->data));
            hi = std::max(hi, reinterpret_cast<uintptr_t>(w->data) + static_cast<uintptr_t>(w->nbytes));
        }
        const uintptr_t page = static_cast<uintptr_t>(std::max(4096L, sysconf(_SC_PAGESIZE)));
        lo &= ~(page - 1);
        hi = (hi + page - 1) & ~(page - 1);
        void* base = reinterpret_cast<void*>(lo);
        // The file is mapped read-only: register it read-only where the device supports that.
        const auto t_reg = std::chrono::steady_clock::now();
        cudaError_t e = cudaHostRegister(base, hi - lo, cudaHostRegisterMapped | cudaHostRegisterReadOnly);
        if (e != cudaSuccess && e != cudaErrorHostMemoryAlreadyRegistered) {
            (void)cudaGetLastError();
            e = cudaHostRegister(base, hi - lo, cudaHostRegisterMapped);
        }
        // Another backend on the same file registered it already: use its registration.
        const bool owner = e == cudaSuccess;
        if (e == cudaErrorHostMemoryAlreadyRegistered) {
            (void)cudaGetLastError();
            e = cudaSuccess;
        }
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            if (placement == WeightPlacement::Mapped) {
                throw JllmError(strfmt("cuda: weights cannot be mapped in place (cudaHostRegister: %s)",
                                       cudaGetErrorName(e)));
            }
            log_msg(LogLevel::Warn, "cuda: cudaHostRegister failed (%s); copying the weights", cudaGetErrorName(e));
            mapped_ = false;
        } else {
            log_msg(LogLevel::Debug, "cuda: registered %.1f MB of the mapped file for the GPU in %.1f ms",
                    static_cast<double>(hi - lo) / 1e6,
                    std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_reg).count());
            if (owner) registered_ = base;
            void* dbase = nullptr;
            JLLM_CUDA_CHECK(cudaHostGetDevicePointer(&dbase, base, 0));
            for (const WeightTensor* w : all) {
                if (w->present()) dev[w->data] = static_cast<const uint8_t*>(dbase) + (w->data - static_cast<const uint8_t*>(base));
            }
            weights_bytes_ = 0;
        }
    }
    if (!mapped_) {
        size_t total = 0;
        for (const WeightTensor* w : all) {
            if (w->present() && dev.emplace(w->data, nullptr).second) total += align256(w->nbytes);
        }
        uint8_t* buf = static_cast<uint8_t*>(alloc(total));
        size_t off = 0;
        std::vector<uint8_t> tiles;  // a matrix in the tiled layout (tiles_fit), on its way to the device
        for (auto& kv : dev) {
            // find the size of this tensor (first tensor with this data pointer)
            const WeightTensor* w = *std::find_if(all.begin(), all.end(), [&](const WeightTensor* t) {
                return t->data == kv.first;
            });
            const uint8_t* src = w->data;
            if (cuda::tiles_fit(w->type, w->rows, w->cols)) {
                tiles.resize(w->nbytes);
                cuda::to_tiles(w->type, w->data, tiles.data(), w->rows, w->cols);
                src = tiles.data();
            }
            JLLM_CUDA_CHECK(cudaMemcpy(buf + off, src, w->nbytes, cudaMemcpyHostToDevice));
            kv.second = buf + off;
            off += align256(w->nbytes);
        }
        weights_bytes_ = static_cast<int64_t>(total);
    }
    auto bind = [&](const WeightTensor& w) {
        DevWeight d;
        if (!w.present()) return d;
        d.data = dev.at(w.data);
        d.type = w.type;
        d.cols = w.cols;
        d.rows = w.rows;
        d.host = w.data;
        if (!mapped_ && cuda::tiles_fit(w.type, w.rows, w.cols)) d.layout = cuda::WeightLayout::Tiles;  // as copied above
        return d;
    };
    token_embd_ = bind(weights.token_embd);
    output_norm_ = bind(weights.output_norm);
    output_ = bind(weights.output);
    // A decode step's logits copy starts after the first three quarters of the vocabulary's product,
    // so most of it runs under the last quarter's (copy_logits).
    logits_head_ = use_q8_ ? cuda::gemv_q8_split_rows(output_.fmt(), output_.rows, output_.cols, output_.rows * 3 / 4) : 0;
    layers_.clear();
    for (const LayerWeights& L : weights.layers) {
        DevLayer d;
        d.attn_norm = bind(L.attn_norm);
        d.wq = bind(L.wq);
        d.wk = bind(L.wk);
        d.wv = bind(L.wv);
        d.bq = bind(L.bq);
        d.bk = bind(L.bk);
        d.bv = bind(L.bv);
        d.q_norm = bind(L.q_norm);
        d.k_norm = bind(L.k_norm);
        d.wo = bind(L.wo);
        d.ffn_norm = bind(L.ffn_norm);
        d.w_gate = bind(L.w_gate);
        d.w_up = bind(L.w_up);
        d.w_down = bind(L.w_down);
        layers_.push_back(d);
    }
    const std::vector<float> inv = rope_inv_freq(
        c_, weights.rope_freqs.present() ? reinterpret_cast<const float*>(weights.rope_freqs.data) : nullptr);
    inv_freq_ = static_cast<float*>(alloc(std::max<size_t>(1, inv.size()) * sizeof(float)));
    if (!inv.empty()) {
        JLLM_CUDA_CHECK(cudaMemcpy(inv_freq_, inv.data(), inv.size() * sizeof(float), cudaMemcpyHostToDevice));
    }
}

}  // namespace jllm
