// backend/cuda/weights_upload.cu — bind_weights: every weight the forward pass reads, copied to
// device memory (Q4_K/Q6_K matrices re-laid in the GPU's tiles, cuda_ops.h WeightLayout; the
// mapped file's pages dropped behind the copy) or, with mapped placement, registered in place
// (cudaHostRegister) and read zero-copy from the GGUF.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <unordered_map>
#include <vector>

#include "backend/cpu/rope.h"
#include "backend/cuda/cuda_backend_impl.cuh"
#include "backend/cuda/weight_tiles.cuh"
#include "core/error.h"
#include "core/log.h"
#include "core/mmap_file.h"
#include "core/thread_pool.h"

namespace jllm {

namespace {
size_t align256(size_t n) { return (n + 255) & ~static_cast<size_t>(255); }
constexpr size_t STAGE_BYTES = size_t{16} << 20;  // a copied matrix goes up in pieces of about this

// Two pinned staging buffers of `cap` bytes: the host fills one (next) while the stream copies the
// other to the device (send). Without pinned memory, one pageable buffer and synchronous copies.
class StagedUpload {
public:
    StagedUpload(cudaStream_t stream, size_t cap) : stream_(stream), cap_(cap) {
        for (int i = 0; i < 2 && pinned_; ++i) {
            if (cudaHostAlloc(&buf_[i], cap, cudaHostAllocDefault) != cudaSuccess ||
                cudaEventCreateWithFlags(&sent_[i], cudaEventDisableTiming) != cudaSuccess) {
                (void)cudaGetLastError();
                pinned_ = false;
            }
        }
        if (!pinned_) {
            release();
            plain_.resize(cap);
        }
    }
    ~StagedUpload() { release(); }
    StagedUpload(const StagedUpload&) = delete;
    StagedUpload& operator=(const StagedUpload&) = delete;

    // The buffer to fill next, once the device has finished reading it.
    uint8_t* next() {
        if (!pinned_) return plain_.data();
        cur_ ^= 1;
        if (used_[cur_]) JLLM_CUDA_CHECK(cudaEventSynchronize(sent_[cur_]));
        return static_cast<uint8_t*>(buf_[cur_]);
    }
    // Copies the first `bytes` of the buffer next() gave to `dst` on the device.
    void send(void* dst, size_t bytes) {
        JLLM_ASSERT(bytes <= cap_);
        if (!pinned_) {
            JLLM_CUDA_CHECK(cudaMemcpy(dst, plain_.data(), bytes, cudaMemcpyHostToDevice));
            return;
        }
        JLLM_CUDA_CHECK(cudaMemcpyAsync(dst, buf_[cur_], bytes, cudaMemcpyHostToDevice, stream_));
        JLLM_CUDA_CHECK(cudaEventRecord(sent_[cur_], stream_));
        used_[cur_] = true;
    }
    void finish() { JLLM_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

private:
    void release() {
        if (pinned_) (void)cudaStreamSynchronize(stream_);
        for (int i = 0; i < 2; ++i) {
            if (sent_[i]) (void)cudaEventDestroy(sent_[i]);
            if (buf_[i]) (void)cudaFreeHost(buf_[i]);
            sent_[i] = nullptr;
            buf_[i] = nullptr;
        }
    }
    cudaStream_t stream_;
    size_t cap_;
    bool pinned_ = true;
    void* buf_[2] = {nullptr, nullptr};
    cudaEvent_t sent_[2] = {nullptr, nullptr};
    bool used_[2] = {false, false};
    int cur_ = 1;
    std::vector<uint8_t> plain_;
};
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

    // Auto copies on every GPU. On an integrated one (the Jetson: one DRAM) the copy is still the
    // faster place to read from: pinned host memory, which a mapped file becomes, is not cached by
    // the iGPU while device memory is, and only copied Q4_K/Q6_K matrices take the tiled layout the
    // tiled GEMV and the register GEMMs read. The file's pages are dropped as the copy goes, so
    // the weights are still held once.
    mapped_ = placement == WeightPlacement::Mapped;
    auto tiled = [&](const WeightTensor& w) {
        return !mapped_ && opt_.tiled_weights && cuda::tiles_fit(w.type, w.rows, w.cols);
    };
    std::unordered_map<const uint8_t*, const uint8_t*> dev;  // host bytes -> device bytes
    uintptr_t lo = UINTPTR_MAX, hi = 0;                       // the bytes of every weight, on the host
    for (const WeightTensor* w : all) {
        if (!w->present()) continue;
        lo = std::min(lo, reinterpret_cast<uintptr_t>(w->data));
        hi = std::max(hi, reinterpret_cast<uintptr_t>(w->data) + static_cast<uintptr_t>(w->nbytes));
    }
    if (mapped_) {
        const uintptr_t page = static_cast<uintptr_t>(std::max(4096L, sysconf(_SC_PAGESIZE)));
        const uintptr_t plo = lo & ~(page - 1), phi = (hi + page - 1) & ~(page - 1);
        void* base = reinterpret_cast<void*>(plo);
        // The file is mapped read-only: register it read-only where the device supports that.
        const auto t_reg = std::chrono::steady_clock::now();
        cudaError_t e = cudaHostRegister(base, phi - plo, cudaHostRegisterMapped | cudaHostRegisterReadOnly);
        if (e != cudaSuccess && e != cudaErrorHostMemoryAlreadyRegistered) {
            (void)cudaGetLastError();
            e = cudaHostRegister(base, phi - plo, cudaHostRegisterMapped);
        }
        // Another backend on the same file registered it already: use its registration.
        const bool owner = e == cudaSuccess;
        if (e == cudaErrorHostMemoryAlreadyRegistered) {
            (void)cudaGetLastError();
            e = cudaSuccess;
        }
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            throw JllmError(strfmt("cuda: weights cannot be mapped in place (cudaHostRegister: %s); --weights copy "
                                   "(or auto) copies them",
                                   cudaGetErrorName(e)));
        }
        log_msg(LogLevel::Debug, "cuda: registered %.1f MB of the mapped file for the GPU in %.1f ms",
                static_cast<double>(phi - plo) / 1e6,
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_reg).count());
        if (owner) registered_ = base;
        void* dbase = nullptr;
        JLLM_CUDA_CHECK(cudaHostGetDevicePointer(&dbase, base, 0));
        for (const WeightTensor* w : all) {
            if (w->present()) dev[w->data] = static_cast<const uint8_t*>(dbase) + (w->data - static_cast<const uint8_t*>(base));
        }
        weights_bytes_ = 0;
    } else {
        size_t total = 0;
        std::vector<const WeightTensor*> copies;  // one per distinct tensor (a tied output is its embedding)
        for (const WeightTensor* w : all) {
            if (w->present() && dev.emplace(w->data, nullptr).second) {
                copies.push_back(w);
                total += align256(w->nbytes);
            }
        }
        uint8_t* buf = static_cast<uint8_t*>(alloc(total));
        // Matrices go up in pieces of whole tile rows (~STAGE_BYTES), each re-laid (or copied) into
        // a pinned staging buffer by the host's threads while the device copies the previous piece
        // from the other buffer; each piece's pages of the mapped file are dropped once staged, so
        // the process never holds a tensor twice, nor the file beside the copy.
        struct Piece {
            const WeightTensor* w;
            int64_t n;         // rows (whole tile rows when tiled); a non-matrix is one piece of one "row"
            size_t at, bytes;  // the piece's bytes in the tensor
            size_t dst;        // its offset in buf
        };
        std::vector<Piece> pieces;
        size_t off = 0, cap = 0;
        for (const WeightTensor* w : copies) {
            const size_t row_bytes = w->rows > 0 ? row_size(w->type, w->cols) : 0;
            const bool by_rows = row_bytes > 0 && row_bytes * static_cast<size_t>(w->rows) == w->nbytes;
            const int64_t unit = tiled(*w) ? cuda::TILE_ROWS : 1;
            const int64_t rows = by_rows ? std::max<int64_t>(unit, static_cast<int64_t>(STAGE_BYTES / row_bytes) / unit * unit) : 1;
            const int64_t n_rows = by_rows ? w->rows : 1;
            for (int64_t r0 = 0; r0 < n_rows; r0 += rows) {
                const int64_t n = std::min(rows, n_rows - r0);
                const size_t at = by_rows ? static_cast<size_t>(r0) * row_bytes : 0;
                const size_t bytes = by_rows ? static_cast<size_t>(n) * row_bytes : w->nbytes;
                pieces.push_back(Piece{w, n, at, bytes, off + at});
                cap = std::max(cap, bytes);
            }
            dev[w->data] = buf + off;
            off += align256(w->nbytes);
        }
        const auto t_copy = std::chrono::steady_clock::now();
        StagedUpload up(stream_, cap);
        ThreadPool pool(static_cast<int>(std::min(8u, std::max(1u, std::thread::hardware_concurrency()))));
        for (const Piece& p : pieces) {
            const WeightTensor& w = *p.w;
            uint8_t* stage = up.next();
            const int64_t unit = tiled(w) ? cuda::TILE_ROWS : 1;  // rows a thread takes at least
            const size_t unit_bytes = p.bytes / static_cast<size_t>(p.n / unit);
            auto fill = [&](int64_t u0, int64_t u1, int) {
                const size_t a = static_cast<size_t>(u0) * unit_bytes, n = static_cast<size_t>(u1 - u0) * unit_bytes;
                // Whole tile rows are tiled in place of the same bytes (weight_tiles.cuh).
                if (tiled(w)) cuda::to_tiles(w.type, w.data + p.at + a, stage + a, (u1 - u0) * unit, w.cols);
                else std::memcpy(stage + a, w.data + p.at + a, n);
            };
            if (p.bytes >= (size_t{1} << 20)) pool.parallel_for(p.n / unit, fill);
            else fill(0, p.n / unit, 0);
            if (weights.mapping) weights.mapping->drop_pages(w.data + p.at, p.bytes);
            up.send(buf + p.dst, p.bytes);
        }
        up.finish();
        // Then the pages the pieces shared with their neighbours.
        const size_t dropped =
            weights.mapping && lo < hi ? weights.mapping->drop_pages(reinterpret_cast<const void*>(lo), hi - lo) : 0;
        weights_bytes_ = static_cast<int64_t>(total);
        log_msg(LogLevel::Debug, "cuda: copied %.1f MB of weights in %.1f ms; %.1f MB of the file's pages dropped",
                static_cast<double>(total) / 1e6,
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_copy).count(),
                static_cast<double>(dropped) / 1e6);
    }
    auto bind = [&](const WeightTensor& w) {
        DevWeight d;
        if (!w.present()) return d;
        d.data = dev.at(w.data);
        d.type = w.type;
        d.cols = w.cols;
        d.rows = w.rows;
        d.host = w.data;
        if (tiled(w)) d.layout = cuda::WeightLayout::Tiles;  // as copied above
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
