// backend/cuda/cuda_backend.cu — the CUDA backend's construction, buffers and entry points
// (forward, forward_select, warm-up); the forward pass itself is forward_pass.cu, its graphs
// graph_cache.cu (the file list: cuda_backend_impl.cuh). Nothing is allocated in forward().
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_backend_impl.cuh"
#include "core/error.h"
#include "core/log.h"
#include "jllm_memory.h"  // MIB

namespace jllm {

CudaBackend::CudaBackend(const ModelConfig& c, const CudaOptions& options) : c_(c), opt_(options) {
    JLLM_CUDA_CHECK(cudaSetDevice(opt_.device));
    JLLM_CUDA_CHECK(cudaGetDeviceProperties(&prop_, opt_.device));
    cuda::fit_thread_stack();  // before free_at_start_: the stack's reservation is the context's
    JLLM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    JLLM_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
    JLLM_CUDA_CHECK(cudaEventCreateWithFlags(&logits_head_ev_, cudaEventDisableTiming));
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) free_at_start_ = static_cast<int64_t>(free_b);
    else (void)cudaGetLastError();
    if (c_.head_dim % 32 != 0 || c_.head_dim > 256) {
        throw JllmError(strfmt("cuda: head_dim %lld is not supported (a multiple of 32, at most 256)",
                               static_cast<long long>(c_.head_dim)));
    }
}

CudaBackend::~CudaBackend() {
    // Errors cannot propagate from a destructor; a failing free here is not actionable.
    (void)cudaSetDevice(opt_.device);
    if (stream_) (void)cudaStreamSynchronize(stream_);
    release_graphs();
    prof_report();
    for (cudaEvent_t e : prof_pool_) (void)cudaEventDestroy(e);
    if (step_host_) (void)cudaFreeHost(step_host_);
    if (mask_host_) (void)cudaFreeHost(mask_host_);
    for (int i = 0; i < 2; ++i) {
        if (kv_stage_[i]) (void)cudaFreeHost(kv_stage_[i]);
        if (kv_stage_ev_[i]) (void)cudaEventDestroy(kv_stage_ev_[i]);
    }
    for (void* p : allocations_) (void)cudaFree(p);
    if (registered_) (void)cudaHostUnregister(registered_);
    for (void* p : pinned_) (void)cudaHostUnregister(p);
    if (logits_head_ev_) (void)cudaEventDestroy(logits_head_ev_);
    if (copy_stream_) (void)cudaStreamDestroy(copy_stream_);
    if (stream_) (void)cudaStreamDestroy(stream_);
}

std::string CudaBackend::device_description() const {
    return strfmt("%s (SM %d.%d, %.1f GiB%s), weights %s", prop_.name, prop_.major, prop_.minor,
                  static_cast<double>(prop_.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0),
                  prop_.integrated ? ", integrated" : "", mapped_ ? "mapped" : "copied");
}

void* CudaBackend::alloc(size_t bytes) {
    void* p = nullptr;
    JLLM_CUDA_CHECK(cudaMalloc(&p, bytes == 0 ? 1 : bytes));
    allocations_.push_back(p);
    return p;
}

void CudaBackend::allocate(int n_ctx, int n_batch, KvType kv_type) {
    JLLM_ASSERT(host_weights_ != nullptr && n_ctx >= 1);
    JLLM_CUDA_CHECK(cudaSetDevice(opt_.device));
    n_ctx_ = n_ctx;
    n_batch_ = std::max(1, n_batch);
    kv_type_ = kv_type;
    const size_t elt = kv_type == KvType::Int8 ? 1 : 2;
    const size_t kv_elems = static_cast<size_t>(n_ctx) * static_cast<size_t>(c_.kv_dim());
    const size_t sc_elems = static_cast<size_t>(n_ctx) * static_cast<size_t>(c_.n_head_kv);
    kv_.assign(static_cast<size_t>(c_.n_layer), DevKv{});
    for (DevKv& l : kv_) {
        l.k = alloc(kv_elems * elt);
        l.v = alloc(kv_elems * elt);
        JLLM_CUDA_CHECK(cudaMemset(l.k, 0, kv_elems * elt));
        JLLM_CUDA_CHECK(cudaMemset(l.v, 0, kv_elems * elt));
        if (kv_type == KvType::Int8) {
            l.k_scale = static_cast<Half*>(alloc(sc_elems * sizeof(Half)));
            l.v_scale = static_cast<Half*>(alloc(sc_elems * sizeof(Half)));
            JLLM_CUDA_CHECK(cudaMemset(l.k_scale, 0, sc_elems * sizeof(Half)));
            JLLM_CUDA_CHECK(cudaMemset(l.v_scale, 0, sc_elems * sizeof(Half)));
        }
    }
    const size_t B = static_cast<size_t>(n_batch_);
    size_t floats = 0;
    auto fbuf = [&](size_t n) {
        floats += n;
        return static_cast<float*>(alloc(n * sizeof(float)));
    };
    x_ = fbuf(B * c_.n_embd);
    h_ = fbuf(B * c_.n_embd);
    q_ = fbuf(B * c_.q_dim());
    k_ = fbuf(B * c_.kv_dim());
    v_ = fbuf(B * c_.kv_dim());
    att_ = fbuf(B * c_.q_dim());
    g_ = fbuf(B * c_.n_ff);
    const bool mixed_ffn = std::any_of(layers_.begin(), layers_.end(),
                                       [](const DevLayer& l) { return !l.ffn_fused(); });
    if (mixed_ffn) u_ = fbuf(B * c_.n_ff);
    // Split-K work for the non-SwiGLU products (rows up to max(q_dim, n_embd, kv_dim)).
    if (n_batch_ > cuda::GEMV_MAX_TOKENS) {
        const int64_t wrows = std::max({c_.q_dim(), c_.n_embd, c_.kv_dim()});
        gemm_work_floats_ = cuda::gemm_work_floats_for_batch(n_batch_, wrows);
        gemm_work_ = fbuf(gemm_work_floats_);
    }
    logits_dev_ = fbuf(static_cast<size_t>(LOGIT_ROWS) * c_.n_vocab);
    const int64_t widest = std::max({c_.n_embd, c_.q_dim(), c_.n_ff});
    const size_t xh_bytes = n_batch_ > cuda::GEMV_MAX_TOKENS ? B * static_cast<size_t>(widest) * sizeof(uint16_t) : 0;
    if (xh_bytes > 0) xh_ = static_cast<uint16_t*>(alloc(xh_bytes));
    // The int8 GEMM's input where a layer's product takes it (tiled Q4_K; every width a multiple of
    // 256). The logits never do (their products are given no act_q8k input).
    auto s8 = [](const DevWeight& w) { return w.data != nullptr && cuda::gemm_takes_s8(w.fmt()); };
    const bool any_s8 = std::any_of(layers_.begin(), layers_.end(), [&](const DevLayer& l) {
        return s8(l.wq) || s8(l.wk) || s8(l.wv) || s8(l.wo) || s8(l.w_gate) || s8(l.w_up) || s8(l.w_down);
    });
    const bool s8_batch = n_batch_ >= opt_.gemm_int8_min_tokens;
    const size_t xq8_bytes =
        xh_bytes > 0 && opt_.gemm_int8 && s8_batch && any_s8 ? cuda::act_q8k_bytes(n_batch_, widest) : 0;
    xq8_ = xq8_bytes > 0 ? alloc(xq8_bytes) : nullptr;
    release_graphs();  // they point into the buffers being replaced
    // Decode attention splits: one split per attention_split_keys keys of the context (a 32-key
    // tile, or a chunk of the group-shared decode kernel) up to CudaOptions::attn_max_split of them.
    split_keys_ = cuda::attention_split_keys(kv_type_, static_cast<int>(c_.n_head), static_cast<int>(c_.n_head_kv),
                                             static_cast<int>(c_.head_dim), opt_.attention);
    max_split_ = std::min(opt_.attn_max_split, std::max(1, (n_ctx + split_keys_ - 1) / split_keys_));
    // A verification's queries (up to GEMV_MAX_TOKENS, AttentionParams::decode_rows) each take a
    // step's splits; the same buffer holds a short prefill's key splits (one wave of 128-row blocks).
    const int split_rows = std::min(n_batch_, cuda::GEMV_MAX_TOKENS);
    attn_work_floats_ = std::max(cuda::attention_work_floats(split_rows, static_cast<int>(c_.n_head),
                                                             static_cast<int>(c_.head_dim), max_split_),
                                 cuda::attention_mma_work_floats(static_cast<int>(c_.head_dim), cuda::device_sm_count()));
    attn_work_ = fbuf(attn_work_floats_);
    tokens_dev_ = static_cast<int32_t*>(alloc(B * sizeof(int32_t)));
    argmax_dev_ = static_cast<int32_t*>(alloc(sizeof(int32_t)));
    argmax_work_ = alloc(cuda::argmax_work_bytes());
    JLLM_CUDA_CHECK(cudaMemset(argmax_work_, 0, cuda::argmax_work_bytes()));
    step_dev_ = static_cast<int32_t*>(alloc(STEP_WORDS * sizeof(int32_t)));
    const int k_max = static_cast<int>(std::min<int64_t>(cuda::TOPK_MAX, c_.n_vocab));
    topk_work_ = fbuf(cuda::topk_work_floats(c_.n_vocab, k_max));
    topk_vals_ = fbuf(static_cast<size_t>(k_max));
    topk_ids_ = static_cast<int32_t*>(alloc(static_cast<size_t>(k_max) * sizeof(int32_t)));
    if (!step_host_) JLLM_CUDA_CHECK(cudaMallocHost(&step_host_, STEP_WORDS * sizeof(int32_t)));
    mask_words_ = static_cast<size_t>((c_.n_vocab + 31) / 32);
    mask_dev_ = static_cast<uint32_t*>(alloc(mask_words_ * sizeof(uint32_t)));
    if (!mask_host_) JLLM_CUDA_CHECK(cudaMallocHost(&mask_host_, mask_words_ * sizeof(uint32_t)));
    const size_t xq_ff_bytes = use_q8_ ? cuda::act_q8_bytes(cuda::GEMV_MAX_TOKENS, c_.n_ff) : 0;
    const size_t xq_bytes = use_q8_ ? cuda::act_q8_bytes(cuda::GEMV_MAX_TOKENS, widest) + xq_ff_bytes : 0;
    if (use_q8_) {
        xq_ = alloc(xq_bytes - xq_ff_bytes);
        xq_ff_ = alloc(xq_ff_bytes);
    }
    // The int8 GEMV's input (the FFN norm's act_q8k) where a layer's gate / up takes it.
    const bool any_gemv_s8 = use_q8_ && opt_.gemv_int8 && c_.n_embd % 256 == 0 &&
                             std::any_of(layers_.begin(), layers_.end(), [](const DevLayer& l) { return ffn_on_s8(l); });
    const size_t xq8_dec_bytes = any_gemv_s8 ? cuda::act_q8k_bytes(cuda::GEMV_MAX_TOKENS, c_.n_embd) : 0;
    xq8_dec_ = xq8_dec_bytes > 0 ? alloc(xq8_dec_bytes) : nullptr;
    if (!cuda::embed_type_supported(token_embd_.type) || c_.n_embd % 32 != 0) embd_host_.assign(B * c_.n_embd, 0.0f);
    scratch_bytes_ = static_cast<int64_t>(floats * sizeof(float) + B * sizeof(int32_t) + 3 * sizeof(int32_t) + cuda::argmax_work_bytes() +
                                          xq_bytes + xh_bytes + xq8_bytes + xq8_dec_bytes + mask_words_ * sizeof(uint32_t));
}

void CudaBackend::tap(const char* name, int il, const float* dev, int64_t n_tokens, int64_t width) {
    if (!tap_) return;
    tap_buf_.resize(static_cast<size_t>(n_tokens * width));
    JLLM_CUDA_CHECK(cudaMemcpyAsync(tap_buf_.data(), dev, tap_buf_.size() * sizeof(float), cudaMemcpyDeviceToHost,
                                    stream_));
    JLLM_CUDA_CHECK(cudaStreamSynchronize(stream_));
    char buf[64];
    if (il >= 0) std::snprintf(buf, sizeof buf, "l%d.%s", il, name);
    else std::snprintf(buf, sizeof buf, "%s", name);
    tap_(tap_ctx_, buf, tap_buf_.data(), n_tokens, width);
}

void CudaBackend::forward(const int32_t* tokens, int n_tokens, int pos0, LogitsMode mode, float* logits) {
    JLLM_CUDA_CHECK(cudaSetDevice(opt_.device));
    JLLM_ASSERT(host_weights_ != nullptr && !kv_.empty() && n_tokens >= 1 && n_tokens <= n_batch_);
    JLLM_ASSERT(pos0 >= 0 && pos0 + n_tokens <= n_ctx_);
    for (int t = 0; t < n_tokens; ++t) JLLM_ASSERT(tokens[t] >= 0 && tokens[t] < token_embd_.rows);
    const int64_t V = c_.n_vocab;
    if (n_tokens == 1 && mode != LogitsMode::None && graph_usable() &&
        decode_graph(tokens[0], pos0, StepTail::Logits, 0)) {
        copy_logits(logits);
        JLLM_CUDA_CHECK(cudaStreamSynchronize(stream_));
        return;
    }
    // Speculative decoding's verification forward: one graph per batch size, replayed.
    if (n_tokens > 1 && n_tokens <= cuda::GEMV_MAX_TOKENS && mode == LogitsMode::All && q8_path(n_tokens) &&
        graph_usable() && verify_graph(tokens, n_tokens, pos0)) {
        JLLM_CUDA_CHECK(cudaMemcpyAsync(logits, logits_dev_, static_cast<size_t>(n_tokens) * V * sizeof(float),
                                        cudaMemcpyDeviceToHost, stream_));
        JLLM_CUDA_CHECK(cudaStreamSynchronize(stream_));
        return;
    }
    step("start");
    JLLM_CUDA_CHECK(cudaMemcpyAsync(tokens_dev_, tokens, static_cast<size_t>(n_tokens) * sizeof(int32_t),
                                    cudaMemcpyHostToDevice, stream_));
    const int out_first = mode == LogitsMode::All ? 0 : (mode == LogitsMode::Last ? n_tokens - 1 : n_tokens);
    // One graph per layer (the first with the embedding, the last with the final norm and the
    // last row's logits): the host captures layer l + 1 while the GPU runs layer l, so only the
    // first layer's capture (not the whole forward's, ~0.6-1 ms on the H200's host) delays the
    // GPU. One executable per layer (and per mode for the last, whose tail differs), updated in
    // place across positions and batch sizes while the graph's shape allows, re-instantiated when
    // it does not. Not kept per shape: one shape's 37 executables (qwen3-4b) took 6.3 MB of
    // device memory in bench.sh on the H200.
    const int n_layer = static_cast<int>(c_.n_layer);
    for (int il = 0; il < n_layer; ++il) {
        const int64_t key = il + 1 < n_layer ? il : il + (1 + static_cast<int64_t>(mode)) * 1024;
        run_as_graph(key, [&, il] {
            run_layers(tokens, tokens_dev_, n_tokens, pos0, nullptr, out_first, il, il + 1);
            if (il + 1 < n_layer) return;
            if (mode == LogitsMode::Last) {
                final_norm(n_tokens - 1, 1);
                logits_rows(0, 1);
            } else if (mode == LogitsMode::All) {
                final_norm(0, n_tokens);
            }
        });
    }
    if (mode == LogitsMode::Last) {
        JLLM_CUDA_CHECK(cudaMemcpyAsync(logits, logits_dev_, V * sizeof(float), cudaMemcpyDeviceToHost, stream_));
    } else if (mode == LogitsMode::All) {
        for (int first = 0; first < n_tokens; first += LOGIT_ROWS) {
            const int n = std::min(LOGIT_ROWS, n_tokens - first);
            run_as_graph(-1, [&] { logits_rows(first, n); });
            JLLM_CUDA_CHECK(cudaMemcpyAsync(logits + first * V, logits_dev_, static_cast<size_t>(n) * V * sizeof(float),
                                            cudaMemcpyDeviceToHost, stream_));
        }
    }
    step("logits to host");
    JLLM_CUDA_CHECK(cudaStreamSynchronize(stream_));
    prof_collect();
}

void CudaBackend::pin_host_buffer(void* p, size_t bytes) {
    if (p == nullptr || bytes == 0) return;
    JLLM_CUDA_CHECK(cudaSetDevice(opt_.device));
    const cudaError_t e = cudaHostRegister(p, bytes, cudaHostRegisterDefault);
    if (e == cudaSuccess) {
        pinned_.push_back(p);
    } else {
        (void)cudaGetLastError();  // the copies stay pageable
        log_msg(LogLevel::Debug, "cuda: host buffer not pinned (%s)", cudaGetErrorName(e));
    }
}

bool CudaBackend::forward_select(int32_t token, int pos, const TokenSelection& sel, int32_t* ids, float* vals) {
    if (sel.k < 1 || sel.k > cuda::TOPK_MAX || sel.k > c_.n_vocab) return false;
    JLLM_CUDA_CHECK(cudaSetDevice(opt_.device));
    JLLM_ASSERT(host_weights_ != nullptr && !kv_.empty() && pos >= 0 && pos < n_ctx_);
    JLLM_ASSERT(token >= 0 && token < token_embd_.rows);
    // A grammar's mask goes down with the step and is applied to the logits before the selection
    // (decode_on_device).
    if (sel.k == 1) {  // the argmax alone: 4 bytes cross to the host
        decode_on_device(token, pos, StepTail::Argmax, 1, sel);
        JLLM_CUDA_CHECK(cudaMemcpyAsync(ids, argmax_dev_, sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
        vals[0] = 0.0f;  // the argmax kernel leaves no value; the sampler needs none for k = 1
    } else {
        decode_on_device(token, pos, StepTail::TopK, topk_bucket(sel.k), sel);
        JLLM_CUDA_CHECK(cudaMemcpyAsync(vals, topk_vals_, static_cast<size_t>(sel.k) * sizeof(float),
                                        cudaMemcpyDeviceToHost, stream_));
        JLLM_CUDA_CHECK(cudaMemcpyAsync(ids, topk_ids_, static_cast<size_t>(sel.k) * sizeof(int32_t),
                                        cudaMemcpyDeviceToHost, stream_));
    }
    JLLM_CUDA_CHECK(cudaStreamSynchronize(stream_));
    prof_collect();
    return true;
}

void CudaBackend::warm_up(int top_k) {
    // CudaOptions::warm_up false skips it (to measure what a first request pays without it).
    if (!opt_.warm_up) return;
    JLLM_ASSERT(host_weights_ != nullptr && !kv_.empty());
    // A prompt's prefill (the GEMM path and its per-layer graphs), a decode step returning logits,
    // and the greedy and top-k (the sampling's default k) decode graphs, at positions 0 .. n + 2.
    const int n = std::min({n_batch_, n_ctx_ - 3, 16});
    if (n < 1) return;
    std::vector<int32_t> toks(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) toks[static_cast<size_t>(i)] = static_cast<int32_t>(i % token_embd_.rows);
    std::vector<float> logits(static_cast<size_t>(c_.n_vocab));
    forward(toks.data(), n, 0, LogitsMode::Last, logits.data());
    forward(toks.data(), 1, n, LogitsMode::Last, logits.data());
    std::vector<int32_t> ids(static_cast<size_t>(SELECT_MAX_K));
    std::vector<float> vals(static_cast<size_t>(SELECT_MAX_K));
    (void)forward_select(toks[0], n + 1, TokenSelection{1}, ids.data(), vals.data());
    // The masked step's two graphs (the decode through the logits, the masked argmax).
    std::vector<uint32_t> all(mask_words_, ~0u);
    TokenSelection masked{1};
    masked.allowed = all.data();
    (void)forward_select(toks[0], n + 1, masked, ids.data(), vals.data());
    const int k = static_cast<int>(std::min<int64_t>({top_k, cuda::TOPK_MAX, c_.n_vocab}));
    if (k < 1) return;
    (void)forward_select(toks[0], n + 2, TokenSelection{k}, ids.data(), vals.data());
}

BackendMemory CudaBackend::memory() const {
    BackendMemory m;
    m.unified = prop_.integrated != 0;
    size_t free_b = 0, total_b = 0;
    if (cudaSetDevice(opt_.device) == cudaSuccess && cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
        m.device_total = static_cast<int64_t>(total_b);
        m.device_free = static_cast<int64_t>(free_b);
        if (free_at_start_ >= 0) m.device_used = free_at_start_ - static_cast<int64_t>(free_b);
    } else {
        (void)cudaGetLastError();
    }
    m.weights_bytes = weights_bytes_;
    m.kv_bytes = kv_bytes_for(c_, n_ctx_, kv_type_);
    m.scratch_bytes = scratch_bytes_;
    // The context's host DRAM on an iGPU (driver, module images, streams), budgeted before load;
    // on the H200 the context took 322 MiB of device memory (docs/performance.md).
    m.context_estimate = 256 * MIB;
    return m;
}

bool cuda_device_available() { return cuda::device_count() > 0; }

std::unique_ptr<Backend> create_cuda_backend(const ModelConfig& config, const CudaOptions& options) {
    if (!cuda_device_available()) throw JllmError("cuda: no CUDA device is available");
    return std::make_unique<CudaBackend>(config, options);
}

}  // namespace jllm
