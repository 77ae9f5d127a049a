// backend/cuda/cuda_backend.cu — the CUDA forward pass: the CPU backend's per-layer order
// (backend/cpu/cpu_backend.cpp) with one kernel (or a few) per step, all on one stream:
//   embed -> per layer: rmsnorm -> Q,K,V matmuls -> bias/Q-K-norm/RoPE/KV store ->
//   attention -> W_o matmul (+= residual) -> rmsnorm -> gate/up matmul with SwiGLU ->
//   W_down matmul (+= residual); then the final rmsnorm and the logits of the requested rows.
// Batches of <= GEMV_MAX_TOKENS tokens run the dp4a GEMV on 8-bit activations (when every matrix
// is a quantized type; q8_path), larger ones the tensor-core GEMM; either way Q, K and V share a
// launch where its kernel takes their formats (qkv_groups). A single-token decode step is
// captured as a CUDA graph and replayed (token and position in step_dev_), one graph per
// decode-attention split count (the splits the position needs, rounded up to a power of two)
// and per tail (logits, on-GPU argmax or top-k). Every other forward is captured too, one graph
// per layer (each executable updated in place from one call to the next): on the H200 the replayed
// decode graphs run ~6% slower for the rest of the process once two kernels have been launched
// outside a graph (docs/gpu_speed_notes.md, row 82), so no kernel is launched outside one.
//
// Device buffers (allocate()):
//   KV, per layer: k, v [n_ctx][n_head_kv][head_dim] int8 (or fp16); k_scale, v_scale
//   [n_ctx][n_head_kv] fp16 (INT8 only) — the canonical layout, so read_kv/write_kv are copies.
//   Activations [n_batch][width]: x, h [n_embd], q, att [n_head*head_dim], k, v
//   [n_head_kv*head_dim], g [n_ff] (and u [n_ff] when gate and up differ in type); logits
//   [LOGIT_ROWS][n_vocab]; tokens [n_batch] int32; attention split work
//   [n_head][max_split][head_dim + 2]; 8-bit activations for GEMV_MAX_TOKENS rows; split-K work
//   of the GEMM; top-k work and results; the step words (token, position).
// Nothing is allocated in forward().
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>
#include <tuple>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/cpu/rope.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "core/error.h"
#include "core/log.h"
#include "model/model_config.h"
#include "model/model_weights.h"

namespace jllm {

namespace {

using cuda::MatOut;
using cuda::WeightLayout;

// The value of measurement knob `name` (an environment variable), or nullptr when it is unset or
// empty; a value outside `allowed` is an error.
const char* env_knob(const char* name, std::initializer_list<const char*> allowed) {
    const char* v = std::getenv(name);
    if (v == nullptr || v[0] == '\0') return nullptr;
    std::string list;
    for (const char* a : allowed) {
        if (std::strcmp(v, a) == 0) return v;
        list += (list.empty() ? "" : ", ") + std::string(a);
    }
    throw JllmError(strfmt("%s: '%s' is not one of %s", name, v, list.c_str()));
}

constexpr int LOGIT_ROWS = 32;  // logits computed per pass in LogitsMode::All

size_t align256(size_t n) { return (n + 255) & ~static_cast<size_t>(255); }

// A weight as the kernels see it: device pointer, type, shape.
struct DevWeight {
    const uint8_t* data = nullptr;  // device (or mapped) pointer, null if absent
    GgmlType type = GgmlType::F32;
    int64_t cols = 0, rows = 0;
    WeightLayout layout = WeightLayout::Rows;  // of the device bytes (copied Q4_K/Q6_K matrices: tiles)
    const uint8_t* host = nullptr;  // the mapped file's bytes (host fallbacks)
    const float* f32() const { return reinterpret_cast<const float*>(data); }
    cuda::WeightFormat fmt() const { return {type, layout}; }
};

struct DevLayer {
    DevWeight attn_norm, wq, wk, wv, bq, bk, bv, q_norm, k_norm, wo, ffn_norm, w_gate, w_up, w_down;
    // Gate and up in one SwiGLU product (same type and layout); else two products and launch_swiglu.
    bool ffn_fused() const { return w_gate.type == w_up.type && w_gate.layout == w_up.layout; }
};

struct DevKv {
    void* k = nullptr;  // [n_ctx][n_head_kv][head_dim]
    void* v = nullptr;
    Half* k_scale = nullptr;  // [n_ctx][n_head_kv]
    Half* v_scale = nullptr;
};

// What a decode step runs after its logits: nothing (the logits are copied out), the argmax, or
// the top k.
enum class StepTail { Logits, Argmax, TopK };

class CudaBackend final : public Backend {
public:
    CudaBackend(const ModelConfig& c, int device) : c_(c), device_(device) {
        JLLM_CUDA_CHECK(cudaSetDevice(device));
        JLLM_CUDA_CHECK(cudaGetDeviceProperties(&prop_, device));
        cuda::fit_thread_stack();  // before free_at_start_: the stack's reservation is the context's
        JLLM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
        JLLM_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
        JLLM_CUDA_CHECK(cudaEventCreateWithFlags(&logits_head_ev_, cudaEventDisableTiming));
        size_t free_b = 0, total_b = 0;
        if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) free_at_start_ = static_cast<int64_t>(free_b);
        else (void)cudaGetLastError();
        // JLLM_CUDA_GRAPH=0: no graphs; every kernel launched on the stream (for comparisons).
        const char* graph_env = std::getenv("JLLM_CUDA_GRAPH");
        graphs_off_ = graph_env != nullptr && std::strcmp(graph_env, "0") == 0;
        const char* prof = std::getenv("JLLM_CUDA_PROFILE");
        prof_on_ = prof != nullptr && std::strcmp(prof, "0") != 0 && prof[0] != '\0';
        // JLLM_CUDA_ATTN_KERNEL=simt: the fp32 SIMT attention kernels only (no tensor-core
        // prefill, no INT8 decode kernel), for comparisons.
        if (const char* ak = env_knob("JLLM_CUDA_ATTN_KERNEL", {"auto", "simt"})) {
            cuda::set_attention_kernel(std::strcmp(ak, "simt") == 0 ? cuda::AttnKernel::Simt : cuda::AttnKernel::Auto);
        }
        // JLLM_CUDA_ATTN_WARPS=1|2|4: warps per block (and 32 x warps keys per chunk and at least
        // per split) of the INT8 decode-attention kernel, for the depth benchmark.
        if (const char* aw = env_knob("JLLM_CUDA_ATTN_WARPS", {"1", "2", "4"})) {
            cuda::set_attention_decode_warps(std::atoi(aw));
        }
        if (c_.head_dim % 32 != 0 || c_.head_dim > 256) {
            throw JllmError(strfmt("cuda: head_dim %lld is not supported (a multiple of 32, at most 256)",
                                   static_cast<long long>(c_.head_dim)));
        }
    }

    ~CudaBackend() override {
        // Errors cannot propagate from a destructor; a failing free here is not actionable.
        (void)cudaSetDevice(device_);
        if (stream_) (void)cudaStreamSynchronize(stream_);
        release_graph();
        prof_report();
        for (cudaEvent_t e : prof_pool_) (void)cudaEventDestroy(e);
        if (step_host_) (void)cudaFreeHost(step_host_);
        for (void* p : allocations_) (void)cudaFree(p);
        if (registered_) (void)cudaHostUnregister(registered_);
        for (void* p : pinned_) (void)cudaHostUnregister(p);
        if (logits_head_ev_) (void)cudaEventDestroy(logits_head_ev_);
        if (copy_stream_) (void)cudaStreamDestroy(copy_stream_);
        if (stream_) (void)cudaStreamDestroy(stream_);
    }

    const char* name() const override { return "cuda"; }
    std::string device_description() const override {
        return strfmt("%s (SM %d.%d, %.1f GiB%s), weights %s", prop_.name, prop_.major, prop_.minor,
                      static_cast<double>(prop_.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0),
                      prop_.integrated ? ", integrated" : "", mapped_ ? "mapped" : "copied");
    }

    void bind_weights(const ModelWeights& weights, WeightPlacement placement) override;
    void allocate(int n_ctx, int n_batch, KvType kv_type) override;
    void forward(const int32_t* tokens, int n_tokens, int pos0, LogitsMode mode, float* logits) override;
    void pin_host_buffer(void* p, size_t bytes) override;
    void warm_up(int top_k) override;
    void truncate_kv(int n_pos) override { JLLM_ASSERT(n_pos >= 0 && n_pos <= n_ctx_); }
    void read_kv(int pos0, int n_pos, KvBlob& out) const override;
    void write_kv(int pos0, const KvBlob& in) override;
    BackendMemory memory() const override;

    void set_tap(ActivationTap tap, void* ctx) {
        tap_ = tap;
        tap_ctx_ = ctx;
    }
    int32_t forward_argmax(int32_t token, int pos);
    int64_t logits_head() const { return logits_head_; }
    int graph_count() const { return static_cast<int>(graphs_.size() + fwd_graphs_.size()); }
    // One decode step up to the logits in logits_dev_ and the tail's results (the graph when
    // usable), nothing copied back.
    void decode_on_device(int32_t token, int pos, StepTail tail, int k);
    void forward_topk(int32_t token, int pos, int k, int32_t* ids, float* vals);

private:
    void* alloc(size_t bytes) {
        void* p = nullptr;
        JLLM_CUDA_CHECK(cudaMalloc(&p, bytes == 0 ? 1 : bytes));
        allocations_.push_back(p);
        return p;
    }
    void tap(const char* name, int il, const float* dev, int64_t n_tokens, int64_t width);
    // The GEMM's fp16 input buffer when n_tok takes the GEMM (null otherwise); the products that
    // share an input read it from there.
    uint16_t* gemm_in(int n_tok) const { return n_tok > cuda::GEMV_MAX_TOKENS ? xh_ : nullptr; }
    // x [n_tok][cols] converted into gemm_in(n_tok), for an input no kernel wrote in fp16.
    const uint16_t* gemm_input(const float* x, int n_tok, int64_t cols) {
        uint16_t* xh = gemm_in(n_tok);
        if (xh != nullptr) cuda::launch_to_f16(x, static_cast<int64_t>(n_tok) * cols, xh, stream_);
        return xh;
    }
    // xh: gemm_input(x, ..) (the GEMM's input when n_tok takes it).
    void matmul(const DevWeight& w, const float* x, const uint16_t* xh, int n_tok, float* y, MatOut out,
                const DevWeight* w2 = nullptr) {
        cuda::launch_matmul(w.fmt(), w.data, w2 ? w2->data : nullptr, w.rows, w.cols, x, xh, n_tok, y, out, stream_,
                            gemm_work_, gemm_work_floats_);
    }
    // Enqueues the layers for n_tokens tokens already in tokens_dev (device) at positions
    // pos0.. (read from pos_dev on the device when it is not null: graph capture).
    // Past its attention the last layer runs for rows [out_first, n_tokens) only (those whose
    // logits are asked for; all while a tap watches). Layers [layer_begin, layer_end) only (all
    // when layer_end < 0); the embedding with layer 0.
    void run_layers(const int32_t* host_tokens, const int32_t* tokens_dev, int n_tokens, int pos0, const int* pos_dev,
                    int out_first = 0, int layer_begin = 0, int layer_end = -1);
    void layer(int il, int n_tokens, int pos0, const int* pos_dev, int out_first);
    // f(fmt[n], n, w[n], rows[n], y[n], cols) for each run of consecutive Q/K/V projections of one
    // width whose formats one launch takes (joins(fmt, n)), longest first.
    template <typename J, typename F>
    void qkv_groups(const DevLayer& L, J&& joins, F&& f);
    void qkv_q8(const DevLayer& L, int n_tokens);
    void embed(const int32_t* host_tokens, const int32_t* tokens_dev, int n_tokens);
    // Final norm of rows [first, first + n) of x into rows [0, n) of h.
    void final_norm(int first, int n);
    // Logits of rows [first, first + n) of h (n <= LOGIT_ROWS) into logits_dev_.
    void logits_rows(int first, int n);
    // One decode step's logits as logits_rows(0, 1), in two products (rows [0, logits_head_) and
    // the rest, each row's bits the same) with logits_head_ev_ recorded between them.
    void logits_split();
    // A decode step's logits to the host (after logits_split): the two copies, both streams done.
    void copy_logits(float* logits);
    // The 8-bit-activation (dp4a GEMV) path serves batches of up to GEMV_MAX_TOKENS tokens.
    bool q8_path(int n_tokens) const { return use_q8_ && n_tokens <= cuda::GEMV_MAX_TOKENS; }
    bool graph_usable() const;
    // One decode step (token at pos, logits into logits_dev_, then the tail) by graph replay;
    // false if the graph could not be captured (then graphs stay off).
    bool decode_graph(int32_t token, int pos, StepTail tail, int k);
    void release_graph();
    // Enqueues what enqueue() launches on stream_ as one graph (fwd_graphs_[key]: captured now,
    // the cached executable updated in place when the shapes match, else instantiated anew), or
    // launches it directly when graphs are off or the capture fails.
    template <typename F>
    void run_as_graph(int64_t key, F&& enqueue);
    // What enqueue() launches on stream_, captured into a graph (the caller destroys it); null when
    // the capture fails (graphs off from then on, a warning naming what was captured).
    template <typename F>
    cudaGraph_t capture(const char* what, F&& enqueue);
    // graph instantiated (the graph itself is left to the caller); null when that fails (graphs off
    // from then on, a warning).
    cudaGraphExec_t instantiate(cudaGraph_t graph, const char* what);
    // A graph's node count and node types (FNV-1a): an executable is updated only from a graph of
    // the same shape (cudaGraphExecUpdate refuses others; kernels and their arguments may differ).
    static uint64_t graph_shape(cudaGraph_t graph);
    // The sampling kernels after a decode step's logits (k: a topk_bucket).
    void step_tail(StepTail tail, int k);
    // The top-k tail computes the k' >= k best, k' a power of two (at most TOPK_MAX and n_vocab):
    // their first k are the k best in the same order, so one graph per bucket serves every k.
    int topk_bucket(int k) const {
        int b = 1;
        while (b < k) b *= 2;
        return static_cast<int>(std::min<int64_t>({b, cuda::TOPK_MAX, c_.n_vocab}));
    }
    // Decode graphs kept at most (split counts x tails); past that the cache starts again.
    static constexpr size_t MAX_DECODE_GRAPHS = 32;

    ModelConfig c_;
    int device_ = 0;
    cudaDeviceProp prop_{};
    cudaStream_t stream_ = nullptr;
    // A decode step's logits reach the host in two copies: rows [0, logits_head_) on copy_stream_
    // as soon as the graph's event logits_head_ev_ says they are computed, while the GPU computes
    // the rest (logits_split), then the rest on stream_.
    cudaStream_t copy_stream_ = nullptr;
    cudaEvent_t logits_head_ev_ = nullptr;
    int64_t logits_head_ = 0;  // 0: one product, one copy
    std::vector<void*> allocations_;
    void* registered_ = nullptr;  // host range registered for zero-copy reads
    bool mapped_ = false;
    int64_t weights_bytes_ = 0;
    int64_t free_at_start_ = -1;  // device free bytes once the context and stream existed

    const ModelWeights* hw_ = nullptr;
    DevWeight token_embd_, output_norm_, output_;
    std::vector<DevLayer> layers_;
    float* inv_freq_ = nullptr;  // [n_rot / 2]
    std::vector<float> embd_host_;  // [n_batch][n_embd], host fallback for embedding types without a kernel

    int n_ctx_ = 0, n_batch_ = 1, max_split_ = 1;
    KvType kv_type_ = KvType::Int8;
    std::vector<DevKv> kv_;
    float *x_ = nullptr, *h_ = nullptr, *q_ = nullptr, *k_ = nullptr, *v_ = nullptr, *att_ = nullptr, *g_ = nullptr,
          *u_ = nullptr;
    float* logits_dev_ = nullptr;
    uint16_t* xh_ = nullptr;  // the GEMM's fp16 input, [n_batch][max(n_embd, q_dim, n_ff)]
    float* attn_work_ = nullptr;
    int32_t* tokens_dev_ = nullptr;
    int32_t* argmax_dev_ = nullptr;
    void* argmax_work_ = nullptr;  // launch_argmax's, zero between calls
    float* topk_work_ = nullptr;  // launch_topk's work, then the k values and ids
    float* topk_vals_ = nullptr;
    int32_t* topk_ids_ = nullptr;
    void* xq_ = nullptr;  // 8-bit activations, act_q8 layout, up to GEMV_MAX_TOKENS rows
    void* xq_ff_ = nullptr;  // the SwiGLU output's 8-bit copy (ffn_down's input), as xq_
    float* gemm_work_ = nullptr;  // split-K partial sums of prefill GEMMs with small grids
    size_t gemm_work_floats_ = 0;
    bool use_q8_ = false;  // every matrix has a dp4a GEMV
    // The dp4a GEMV of one matrix (Store or Add) on the 8-bit activations in xq (default xq_).
    void gemv_q8(const DevWeight& w, int n_tok, float* y, MatOut out, const void* xq = nullptr) {
        cuda::launch_gemv_q8(w.fmt(), w.data, nullptr, w.rows, w.cols, xq ? xq : xq_, n_tok, y, out, stream_);
    }
    int64_t scratch_bytes_ = 0;

    // CUDA-graph replay of the single-token decode step: token and position live in step_dev_
    // (copied from the pinned step_host_ by the graph's first node).
    int32_t* step_dev_ = nullptr;
    int32_t* step_host_ = nullptr;
    // One graph per attention split count (graph_splits): a step runs the splits its position
    // needs (rounded up to a power of two), not those of the whole context.
    std::map<std::tuple<int, StepTail, int>, cudaGraphExec_t> graphs_;  // (splits, tail, k)
    int graph_splits_ = 0;  // the split count of the graph being captured (0: none)
    // Executables of the other forwards (captured per call, updated in place when the call's
    // graph has the same shape): one per layer (the last per logits mode), one for the logits
    // rows of LogitsMode::All.
    struct FwdGraph {
        cudaGraphExec_t exec = nullptr;
        uint64_t shape = 0;  // graph_shape() of the graph it was made from
    };
    std::map<int64_t, FwdGraph> fwd_graphs_;
    bool graphs_off_ = false;   // JLLM_CUDA_GRAPH=0
    std::vector<void*> pinned_;  // host buffers registered by pin_host_buffer
    int split_keys_ = 1;    // fewest keys per decode-attention split
    bool graph_failed_ = false;
    int graph_splits(int pos) const {
        const int need = (pos + split_keys_) / split_keys_;  // the splits pos + 1 keys need (>= 1)
        int b = 1;
        while (b < need && b < max_split_) b *= 2;
        return std::min(b, max_split_);
    }

    ActivationTap tap_ = nullptr;
    void* tap_ctx_ = nullptr;
    std::vector<float> tap_buf_;

    // JLLM_CUDA_PROFILE=1: an event after every step of the forward pass (graphs off); the time
    // between consecutive events is summed per step name and printed when the backend is
    // destroyed. Shows where the time goes; costs a few microseconds per step.
    struct ProfMark {
        const char* name;
        cudaEvent_t ev;
    };
    bool prof_on_ = false;
    std::vector<cudaEvent_t> prof_pool_;
    std::vector<ProfMark> prof_marks_;
    std::map<std::string, std::pair<double, long>> prof_sum_;  // name -> (ms, count)
    void prof(const char* name) {
        if (!prof_on_) return;
        if (prof_marks_.size() == prof_pool_.size()) {
            cudaEvent_t e = nullptr;
            JLLM_CUDA_CHECK(cudaEventCreate(&e));
            prof_pool_.push_back(e);
        }
        cudaEvent_t e = prof_pool_[prof_marks_.size()];
        JLLM_CUDA_CHECK(cudaEventRecord(e, stream_));
        prof_marks_.push_back({name, e});
    }
    void prof_collect();  // after a synchronization
    void prof_report() const;
};

void CudaBackend::prof_collect() {
    if (!prof_on_) return;
    for (size_t i = 1; i < prof_marks_.size(); ++i) {
        float ms = 0.0f;
        JLLM_CUDA_CHECK(cudaEventElapsedTime(&ms, prof_marks_[i - 1].ev, prof_marks_[i].ev));
        auto& a = prof_sum_[prof_marks_[i].name];
        a.first += ms;
        a.second += 1;
    }
    prof_marks_.clear();
}

void CudaBackend::prof_report() const {
    if (!prof_on_ || prof_sum_.empty()) return;
    std::vector<std::pair<std::string, std::pair<double, long>>> v(prof_sum_.begin(), prof_sum_.end());
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
    double total = 0.0;
    for (const auto& e : v) total += e.second.first;
    std::fprintf(stderr, "[cuda profile] %-22s %10s %8s %10s %6s\n", "step", "total ms", "count", "avg us", "share");
    for (const auto& e : v) {
        std::fprintf(stderr, "[cuda profile] %-22s %10.3f %8ld %10.2f %5.1f%%\n", e.first.c_str(), e.second.first,
                     e.second.second, 1e3 * e.second.first / static_cast<double>(e.second.second),
                     100.0 * e.second.first / total);
    }
}

void CudaBackend::bind_weights(const ModelWeights& weights, WeightPlacement placement) {
    JLLM_CUDA_CHECK(cudaSetDevice(device_));
    hw_ = &weights;
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
        if (!mapped_ && cuda::tiles_fit(w.type, w.rows, w.cols)) d.layout = WeightLayout::Tiles;  // as copied above
        return d;
    };
    token_embd_ = bind(weights.token_embd);
    output_norm_ = bind(weights.output_norm);
    output_ = bind(weights.output);
    // The first three quarters of the vocabulary's copy (~14 us of ~18 for 152k logits on the
    // H200) under the last quarter's product.
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

void CudaBackend::allocate(int n_ctx, int n_batch, KvType kv_type) {
    JLLM_ASSERT(hw_ != nullptr && n_ctx >= 1);
    JLLM_CUDA_CHECK(cudaSetDevice(device_));
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
    release_graph();  // it points into the buffers being replaced
    // Decode attention splits: one split per attention_split_keys keys of the context (a 32-key
    // tile, or a chunk of the INT8 decode kernel) up to ATTN_MAX_SPLIT of them;
    // JLLM_CUDA_ATTN_SPLITS=N caps them lower (longer splits, fewer partial results to combine),
    // a measurement knob for the depth benchmark.
    int split_cap = cuda::ATTN_MAX_SPLIT;
    if (const char* v = std::getenv("JLLM_CUDA_ATTN_SPLITS"); v != nullptr && v[0] != '\0') {
        char* end = nullptr;
        const long n = std::strtol(v, &end, 10);
        if (end == v || *end != '\0' || n < 1 || n > cuda::ATTN_MAX_SPLIT) {
            throw JllmError(strfmt("JLLM_CUDA_ATTN_SPLITS: '%s' is not a whole number in 1..%d", v,
                                   cuda::ATTN_MAX_SPLIT));
        }
        split_cap = static_cast<int>(n);
    }
    split_keys_ = cuda::attention_split_keys(kv_type_, static_cast<int>(c_.n_head), static_cast<int>(c_.n_head_kv),
                                             static_cast<int>(c_.head_dim));
    max_split_ = std::min(split_cap, std::max(1, (n_ctx + split_keys_ - 1) / split_keys_));
    attn_work_ = fbuf(cuda::attention_work_floats(1, static_cast<int>(c_.n_head), static_cast<int>(c_.head_dim),
                                                  max_split_));
    tokens_dev_ = static_cast<int32_t*>(alloc(B * sizeof(int32_t)));
    argmax_dev_ = static_cast<int32_t*>(alloc(sizeof(int32_t)));
    argmax_work_ = alloc(cuda::argmax_work_bytes());
    JLLM_CUDA_CHECK(cudaMemset(argmax_work_, 0, cuda::argmax_work_bytes()));
    step_dev_ = static_cast<int32_t*>(alloc(2 * sizeof(int32_t)));
    const int k_max = static_cast<int>(std::min<int64_t>(cuda::TOPK_MAX, c_.n_vocab));
    topk_work_ = fbuf(cuda::topk_work_floats(c_.n_vocab, k_max));
    topk_vals_ = fbuf(static_cast<size_t>(k_max));
    topk_ids_ = static_cast<int32_t*>(alloc(static_cast<size_t>(k_max) * sizeof(int32_t)));
    if (!step_host_) JLLM_CUDA_CHECK(cudaMallocHost(&step_host_, 2 * sizeof(int32_t)));
    const size_t xq_ff_bytes = use_q8_ ? cuda::act_q8_bytes(cuda::GEMV_MAX_TOKENS, c_.n_ff) : 0;
    const size_t xq_bytes = use_q8_ ? cuda::act_q8_bytes(cuda::GEMV_MAX_TOKENS, widest) + xq_ff_bytes : 0;
    if (use_q8_) {
        xq_ = alloc(xq_bytes - xq_ff_bytes);
        xq_ff_ = alloc(xq_ff_bytes);
    }
    if (!cuda::embed_type_supported(token_embd_.type) || c_.n_embd % 32 != 0) embd_host_.assign(B * c_.n_embd, 0.0f);
    scratch_bytes_ = static_cast<int64_t>(floats * sizeof(float) + B * sizeof(int32_t) + 3 * sizeof(int32_t) + cuda::argmax_work_bytes() + xq_bytes + xh_bytes);
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

void CudaBackend::embed(const int32_t* tokens, const int32_t* tokens_dev, int n_tokens) {
    const int64_t E = c_.n_embd;
    if (embd_host_.empty()) {
        cuda::launch_embed(token_embd_.fmt(), token_embd_.data, token_embd_.rows, E, tokens_dev, n_tokens, x_, stream_);
        return;
    }
    // Host fallback for a type without an embedding kernel: dequantize the rows on the host.
    const ToFloatFn to_float = type_traits(token_embd_.type).to_float;
    const size_t rb = row_size(token_embd_.type, E);
    for (int t = 0; t < n_tokens; ++t) {
        to_float(token_embd_.host + static_cast<size_t>(tokens[t]) * rb, embd_host_.data() + t * E, E);
    }
    JLLM_CUDA_CHECK(cudaMemcpyAsync(x_, embd_host_.data(), static_cast<size_t>(n_tokens) * E * sizeof(float),
                                    cudaMemcpyHostToDevice, stream_));
    JLLM_CUDA_CHECK(cudaStreamSynchronize(stream_));  // embd_host_ is reused by the next call
}

void CudaBackend::run_layers(const int32_t* tokens, const int32_t* tokens_dev, int n_tokens, int pos0,
                             const int* pos_dev, int out_first, int layer_begin, int layer_end) {
    JLLM_ASSERT(hw_ != nullptr && !kv_.empty() && n_tokens >= 1 && n_tokens <= n_batch_);
    const int last = static_cast<int>(c_.n_layer) - 1;
    if (layer_end < 0) layer_end = last + 1;
    if (layer_begin == 0) {
        embed(tokens, tokens_dev, n_tokens);
        prof("embed");
        tap("embd", -1, x_, n_tokens, c_.n_embd);
    }
    for (int il = layer_begin; il < layer_end; ++il) {
        layer(il, n_tokens, pos0, pos_dev, il == last && !tap_ ? out_first : 0);
    }
}

template <typename J, typename F>
void CudaBackend::qkv_groups(const DevLayer& L, J&& joins, F&& f) {
    const DevWeight* ws[3] = {&L.wq, &L.wk, &L.wv};
    const cuda::WeightFormat fmt[3] = {L.wq.fmt(), L.wk.fmt(), L.wv.fmt()};
    float* ys[3] = {q_, k_, v_};
    for (int i = 0; i < 3;) {
        int j = i + 1;
        while (j < 3 && ws[j]->cols == ws[i]->cols && joins(fmt + i, j + 1 - i)) ++j;
        const void* w[3] = {};
        int64_t rows[3] = {};
        float* y[3] = {};
        for (int k = i; k < j; ++k) {
            w[k - i] = ws[k]->data;
            rows[k - i] = ws[k]->rows;
            y[k - i] = ys[k];
        }
        f(fmt + i, j - i, w, rows, y, ws[i]->cols);
        i = j;
    }
}

void CudaBackend::qkv_q8(const DevLayer& L, int n) {
    // One launch for all three in every layer of Q4_K_M's on tiles (V in Q6_K or not).
    qkv_groups(L, cuda::gemv_q8_multi_takes,
               [&](const cuda::WeightFormat* fmt, int n_seg, const void* const* w, const int64_t* rows, float* const* y,
                   int64_t cols) { cuda::launch_gemv_q8_multi(fmt, n_seg, w, rows, y, cols, xq_, n, stream_); });
}

void CudaBackend::layer(int il, int n_tokens, int pos0, const int* pos_dev, int out_first) {
    const int64_t E = c_.n_embd, Q = c_.q_dim(), KV = c_.kv_dim();
    const DevLayer& L = layers_[static_cast<size_t>(il)];
    DevKv& kv = kv_[static_cast<size_t>(il)];
    bool q8 = q8_path(n_tokens);
    float* h_tap = tap_ ? h_ : nullptr;  // the q8 path writes fp32 norms only for the tap
    if (q8) {
        cuda::launch_rmsnorm_q8(x_, L.attn_norm.f32(), h_tap, xq_, n_tokens, E, c_.rms_eps, stream_);
        qkv_q8(L, n_tokens);
    } else {
        uint16_t* hh = gemm_in(n_tokens);  // the norm writes the GEMM's input too
        cuda::launch_rmsnorm(x_, L.attn_norm.f32(), h_, hh, n_tokens, E, c_.rms_eps, stream_);
        if (n_tokens > cuda::GEMV_MAX_TOKENS) {
            // Runs of one format in one GEMM grid (Q, K and V in Q4_K_M's Q4_K layers).
            auto one_format = [](const cuda::WeightFormat* f, int k) {
                return f[k - 1].type == f[0].type && f[k - 1].layout == f[0].layout;
            };
            qkv_groups(L, one_format, [&](const cuda::WeightFormat* fmt, int n_seg, const void* const* w,
                                          const int64_t* rows, float* const* y, int64_t cols) {
                cuda::launch_gemm_multi(fmt[0], n_seg, w, rows, cols, hh, n_tokens, y, stream_, gemm_work_,
                                        gemm_work_floats_);
            });
        } else {
            matmul(L.wq, h_, hh, n_tokens, q_, MatOut::Store);
            matmul(L.wk, h_, hh, n_tokens, k_, MatOut::Store);
            matmul(L.wv, h_, hh, n_tokens, v_, MatOut::Store);
        }
    }
    prof("norm + qkv");

    cuda::QkvPostParams qp;
    qp.q = q_;
    qp.k = k_;
    qp.v = v_;
    qp.bq = L.bq.f32();
    qp.bk = L.bk.f32();
    qp.bv = L.bv.f32();
    qp.q_norm = L.q_norm.f32();
    qp.k_norm = L.k_norm.f32();
    qp.inv_freq = inv_freq_;
    qp.n_rot = static_cast<int>(c_.n_rot);
    qp.neox = c_.recipe->rope_style == RopeStyle::NeoX;
    qp.n_tok = n_tokens;
    qp.pos0 = pos0;
    qp.pos_dev = pos_dev;
    qp.n_head = static_cast<int>(c_.n_head);
    qp.n_head_kv = static_cast<int>(c_.n_head_kv);
    qp.head_dim = static_cast<int>(c_.head_dim);
    qp.eps = c_.rms_eps;
    qp.kv_type = kv_type_;
    qp.k_cache = kv.k;
    qp.v_cache = kv.v;
    qp.k_scale = kv.k_scale;
    qp.v_scale = kv.v_scale;
    // One token: the attention folds the post in (AttentionParams::post), unless a tap wants q/k/v.
    const bool post_in_attention = n_tokens == 1 && !tap_;
    if (!post_in_attention) cuda::launch_qkv_post(qp, stream_);
    prof("qkv_post");
    tap("q", il, q_, n_tokens, Q);
    tap("k", il, k_, n_tokens, KV);
    tap("v", il, v_, n_tokens, KV);

    cuda::AttentionParams ap;
    ap.q = q_;
    ap.out = att_;
    ap.k_cache = kv.k;
    ap.v_cache = kv.v;
    ap.k_scale = kv.k_scale;
    ap.v_scale = kv.v_scale;
    ap.kv_type = kv_type_;
    ap.n_tok = n_tokens;
    ap.pos0 = pos0;
    ap.pos_dev = pos_dev;
    ap.n_head = qp.n_head;
    ap.n_head_kv = qp.n_head_kv;
    ap.head_dim = qp.head_dim;
    ap.work = attn_work_;
    ap.max_split = graph_splits_ > 0 ? graph_splits_ : max_split_;
    ap.out_q8 = q8 ? xq_ : nullptr;
    ap.post = post_in_attention ? &qp : nullptr;
    cuda::launch_attention(ap, stream_);
    prof("attention");
    tap("attn", il, att_, n_tokens, Q);

    // Rows [out_first, n_tokens) from here on. A subset takes the fp32 path: the attention wrote
    // the 8-bit activations of all rows.
    const int n = n_tokens - out_first;
    if (n == 0) return;
    float* x = x_ + out_first * E;
    const float* att = att_ + out_first * Q;
    if (out_first > 0) q8 = false;
    if (q8) {
        gemv_q8(L.wo, n, x, MatOut::Add);
    } else {
        matmul(L.wo, att, gemm_input(att, n, Q), n, x, MatOut::Add);
    }
    prof("wo");
    tap("attn_res", il, x, n, E);
    const bool fused_ffn = L.ffn_fused();
    if (q8) {
        cuda::launch_rmsnorm_q8(x, L.ffn_norm.f32(), h_tap, xq_, n, E, c_.rms_eps, stream_);
        if (fused_ffn) {
            // its 8-bit copy by the product itself where it can (one token on tiled weights), by
            // halves where W_down's product reads it (tiles)
            cuda::launch_gemv_q8(L.w_gate.fmt(), L.w_gate.data, L.w_up.data, L.w_gate.rows, E, xq_, n, g_,
                                 MatOut::SwiGLU, stream_, xq_ff_, L.w_down.fmt().tiled());
        } else {
            gemv_q8(L.w_gate, n, g_, MatOut::Store);
            gemv_q8(L.w_up, n, u_, MatOut::Store);
            cuda::launch_swiglu(g_, u_, g_, static_cast<int64_t>(n) * c_.n_ff, stream_);
            cuda::launch_quantize_act(g_, n, c_.n_ff, xq_ff_, stream_);
        }
        prof("norm + gate_up + quant");
        gemv_q8(L.w_down, n, x, MatOut::Add, xq_ff_);
    } else {
        uint16_t* hh = gemm_in(n);
        cuda::launch_rmsnorm(x, L.ffn_norm.f32(), h_, hh, n, E, c_.rms_eps, stream_);
        if (fused_ffn) {
            matmul(L.w_gate, h_, hh, n, g_, MatOut::SwiGLU, &L.w_up);
        } else {  // mixed-type gate/up (some quant mixes): two products, then SwiGLU
            matmul(L.w_gate, h_, hh, n, g_, MatOut::Store);
            matmul(L.w_up, h_, hh, n, u_, MatOut::Store);
            cuda::launch_swiglu(g_, u_, g_, static_cast<int64_t>(n) * c_.n_ff, stream_);
        }
        prof("norm + gate_up");
        matmul(L.w_down, g_, gemm_input(g_, n, c_.n_ff), n, x, MatOut::Add);
    }
    prof("down");
    tap("out", il, x, n, E);
}

void CudaBackend::final_norm(int first, int n) {
    const int64_t E = c_.n_embd;
    if (q8_path(n)) {
        cuda::launch_rmsnorm_q8(x_ + first * E, output_norm_.f32(), tap_ ? h_ : nullptr, xq_, n, E, c_.rms_eps,
                                stream_);
    } else {
        cuda::launch_rmsnorm(x_ + first * E, output_norm_.f32(), h_, nullptr, n, E, c_.rms_eps, stream_);
    }
    tap("final_norm", -1, h_, n, E);
    prof("final_norm");
}

void CudaBackend::logits_rows(int first, int n) {
    JLLM_ASSERT(n >= 1 && n <= LOGIT_ROWS);
    if (first == 0 && q8_path(n)) {  // final_norm(.., n) left these rows in xq_
        gemv_q8(output_, n, logits_dev_, MatOut::Store);
    } else {
        const float* h = h_ + first * c_.n_embd;
        matmul(output_, h, gemm_input(h, n, c_.n_embd), n, logits_dev_, MatOut::Store);
    }
    prof("logits");
}

void CudaBackend::logits_split() {
    if (logits_head_ == 0) {  // (set only where the q8 path serves one token)
        logits_rows(0, 1);
        return;
    }
    const int64_t V = output_.rows;
    const size_t head_bytes = static_cast<size_t>(logits_head_) * row_size(output_.type, output_.cols);
    cuda::launch_gemv_q8(output_.fmt(), output_.data, nullptr, logits_head_, output_.cols, xq_, 1, logits_dev_,
                         MatOut::Store, stream_);
    // An event record node of the graph (external: the host's copy stream waits for it).
    JLLM_CUDA_CHECK(cudaEventRecordWithFlags(logits_head_ev_, stream_, cudaEventRecordExternal));
    cuda::launch_gemv_q8(output_.fmt(), output_.data + head_bytes, nullptr, V - logits_head_, output_.cols, xq_, 1,
                         logits_dev_ + logits_head_, MatOut::Store, stream_);
    prof("logits");
}

void CudaBackend::copy_logits(float* logits) {
    const int64_t V = c_.n_vocab;
    const int64_t head = logits_head_;
    if (head > 0) {
        JLLM_CUDA_CHECK(cudaStreamWaitEvent(copy_stream_, logits_head_ev_, 0));
        JLLM_CUDA_CHECK(cudaMemcpyAsync(logits, logits_dev_, static_cast<size_t>(head) * sizeof(float),
                                        cudaMemcpyDeviceToHost, copy_stream_));
    }
    JLLM_CUDA_CHECK(cudaMemcpyAsync(logits + head, logits_dev_ + head, static_cast<size_t>(V - head) * sizeof(float),
                                    cudaMemcpyDeviceToHost, stream_));
    if (head > 0) JLLM_CUDA_CHECK(cudaStreamSynchronize(copy_stream_));
}

bool CudaBackend::graph_usable() const {
    return use_q8_ && embd_host_.empty() && !tap_ && !graph_failed_ && !graphs_off_ && !prof_on_ &&
           !cuda::sync_check_enabled();
}

void CudaBackend::release_graph() {
    for (auto& g : graphs_) (void)cudaGraphExecDestroy(g.second);
    graphs_.clear();
    for (auto& g : fwd_graphs_) (void)cudaGraphExecDestroy(g.second.exec);
    fwd_graphs_.clear();
}

void CudaBackend::step_tail(StepTail tail, int k) {
    if (tail == StepTail::Argmax) {
        cuda::launch_argmax(logits_dev_, c_.n_vocab, argmax_work_, argmax_dev_, stream_);
        prof("argmax");
    } else if (tail == StepTail::TopK) {
        cuda::launch_topk(logits_dev_, c_.n_vocab, k, topk_work_, topk_vals_, topk_ids_, stream_);
        prof("top-k");
    }
}

bool CudaBackend::decode_graph(int32_t token, int pos, StepTail tail, int k) {
    const int splits = graph_splits(pos);
    const auto key = std::make_tuple(splits, tail, tail == StepTail::TopK ? k : 0);
    if (graphs_.count(key) == 0 && graphs_.size() >= MAX_DECODE_GRAPHS) {
        // Bounded memory whatever mix of positions and sampling a long-lived server sees.
        for (auto& g : graphs_) (void)cudaGraphExecDestroy(g.second);
        graphs_.clear();
    }
    auto it = graphs_.find(key);
    if (it == graphs_.end()) {
        graph_splits_ = splits;
        cudaGraph_t graph = capture("decode", [&] {
            JLLM_CUDA_CHECK(cudaMemcpyAsync(step_dev_, step_host_, 2 * sizeof(int32_t), cudaMemcpyHostToDevice, stream_));
            run_layers(nullptr, step_dev_, 1, 0, step_dev_ + 1);
            final_norm(0, 1);
            if (tail == StepTail::Logits) logits_split();
            else logits_rows(0, 1);
            step_tail(tail, k);
        });
        graph_splits_ = 0;
        if (graph == nullptr) return false;
        cudaGraphExec_t exec = instantiate(graph, "decode");
        (void)cudaGraphDestroy(graph);
        if (exec == nullptr) return false;
        it = graphs_.emplace(key, exec).first;
    }
    // The previous step has completed (forward() synchronizes), so the pinned words are free.
    step_host_[0] = token;
    step_host_[1] = pos;
    JLLM_CUDA_CHECK(cudaGraphLaunch(it->second, stream_));
    return true;
}

template <typename F>
cudaGraph_t CudaBackend::capture(const char* what, F&& enqueue) {
    cudaGraph_t graph = nullptr;
    JLLM_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    try {
        enqueue();
    } catch (const std::exception& e) {
        (void)cudaStreamEndCapture(stream_, &graph);
        if (graph) (void)cudaGraphDestroy(graph);
        (void)cudaGetLastError();
        log_msg(LogLevel::Warn, "cuda: %s graph capture failed (%s); running without graphs", what, e.what());
        graph_failed_ = true;
        return nullptr;
    }
    JLLM_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
    return graph;
}

cudaGraphExec_t CudaBackend::instantiate(cudaGraph_t graph, const char* what) {
    cudaGraphExec_t exec = nullptr;
    const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
    if (e == cudaSuccess) return exec;
    (void)cudaGetLastError();
    log_msg(LogLevel::Warn, "cuda: %s graph instantiation failed (%s); running without graphs", what,
            cudaGetErrorName(e));
    graph_failed_ = true;
    return nullptr;
}

template <typename F>
void CudaBackend::run_as_graph(int64_t key, F&& enqueue) {
    if (!graph_usable()) {
        enqueue();
        return;
    }
    cudaGraph_t graph = capture("forward", enqueue);
    if (graph == nullptr) {
        enqueue();
        return;
    }
    const uint64_t shape = graph_shape(graph);
    auto it = fwd_graphs_.find(key);
    bool ready = false;
    if (it != fwd_graphs_.end()) {
        cudaGraphExecUpdateResultInfo info{};
        ready = shape != 0 && it->second.shape == shape && cudaGraphExecUpdate(it->second.exec, graph, &info) == cudaSuccess;
        if (!ready) {
            (void)cudaGetLastError();
            (void)cudaGraphExecDestroy(it->second.exec);
            fwd_graphs_.erase(it);
        }
    }
    if (!ready) {
        cudaGraphExec_t exec = instantiate(graph, "forward");
        if (exec == nullptr) {
            (void)cudaGraphDestroy(graph);
            enqueue();
            return;
        }
        it = fwd_graphs_.emplace(key, FwdGraph{exec, shape}).first;
    }
    (void)cudaGraphDestroy(graph);
    JLLM_CUDA_CHECK(cudaGraphLaunch(it->second.exec, stream_));
}

uint64_t CudaBackend::graph_shape(cudaGraph_t graph) {
    // 0 (never a computed shape in practice) when the graph cannot be read: no update is tried.
    size_t n = 0;
    if (cudaGraphGetNodes(graph, nullptr, &n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    std::vector<cudaGraphNode_t> nodes(n);
    if (n > 0 && cudaGraphGetNodes(graph, nodes.data(), &n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    uint64_t h = 1469598103934665603ull;
    auto mix = [&h](uint64_t v) {
        h ^= v;
        h *= 1099511628211ull;
    };
    mix(n);
    for (cudaGraphNode_t node : nodes) {
        cudaGraphNodeType t{};
        if (cudaGraphNodeGetType(node, &t) != cudaSuccess) {
            (void)cudaGetLastError();
            return 0;
        }
        mix(static_cast<uint64_t>(t));
    }
    return h;
}

void CudaBackend::forward(const int32_t* tokens, int n_tokens, int pos0, LogitsMode mode, float* logits) {
    JLLM_CUDA_CHECK(cudaSetDevice(device_));
    JLLM_ASSERT(hw_ != nullptr && !kv_.empty() && n_tokens >= 1 && n_tokens <= n_batch_);
    JLLM_ASSERT(pos0 >= 0 && pos0 + n_tokens <= n_ctx_);
    for (int t = 0; t < n_tokens; ++t) JLLM_ASSERT(tokens[t] >= 0 && tokens[t] < token_embd_.rows);
    const int64_t V = c_.n_vocab;
    if (n_tokens == 1 && mode != LogitsMode::None && graph_usable() &&
        decode_graph(tokens[0], pos0, StepTail::Logits, 0)) {
        copy_logits(logits);
        JLLM_CUDA_CHECK(cudaStreamSynchronize(stream_));
        return;
    }
    prof("start");
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
        run_as_graph(key, [&] {
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
    prof("logits to host");
    JLLM_CUDA_CHECK(cudaStreamSynchronize(stream_));
    prof_collect();
}

void CudaBackend::pin_host_buffer(void* p, size_t bytes) {
    if (p == nullptr || bytes == 0) return;
    JLLM_CUDA_CHECK(cudaSetDevice(device_));
    const cudaError_t e = cudaHostRegister(p, bytes, cudaHostRegisterDefault);
    if (e == cudaSuccess) {
        pinned_.push_back(p);
    } else {
        (void)cudaGetLastError();  // the copies stay pageable
        log_msg(LogLevel::Debug, "cuda: host buffer not pinned (%s)", cudaGetErrorName(e));
    }
}

void CudaBackend::decode_on_device(int32_t token, int pos, StepTail tail, int k) {
    if (graph_usable() && decode_graph(token, pos, tail, k)) return;
    prof("start");
    JLLM_CUDA_CHECK(cudaMemcpyAsync(tokens_dev_, &token, sizeof token, cudaMemcpyHostToDevice, stream_));
    run_layers(&token, tokens_dev_, 1, pos, nullptr);
    final_norm(0, 1);
    logits_rows(0, 1);
    step_tail(tail, k);
}

void CudaBackend::warm_up(int top_k) {
    // JLLM_CUDA_WARMUP=0 skips it (to measure what a first request pays without it).
    if (const char* v = std::getenv("JLLM_CUDA_WARMUP"); v != nullptr && std::strcmp(v, "0") == 0) return;
    JLLM_ASSERT(hw_ != nullptr && !kv_.empty());
    // A prompt's prefill (the GEMM path and its per-layer graphs), a decode step returning logits,
    // and the greedy and top-k (the sampling's default k) decode graphs, at positions 0 .. n + 2.
    const int n = std::min({n_batch_, n_ctx_ - 3, 16});
    if (n < 1) return;
    std::vector<int32_t> toks(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) toks[static_cast<size_t>(i)] = static_cast<int32_t>(i % token_embd_.rows);
    std::vector<float> logits(static_cast<size_t>(c_.n_vocab));
    forward(toks.data(), n, 0, LogitsMode::Last, logits.data());
    forward(toks.data(), 1, n, LogitsMode::Last, logits.data());
    (void)forward_argmax(toks[0], n + 1);
    const int k = static_cast<int>(std::min<int64_t>({top_k, cuda::TOPK_MAX, c_.n_vocab}));
    if (k < 1) return;
    std::vector<int32_t> ids(static_cast<size_t>(k));
    std::vector<float> vals(static_cast<size_t>(k));
    forward_topk(toks[0], n + 2, k, ids.data(), vals.data());
}

int32_t CudaBackend::forward_argmax(int32_t token, int pos) {
    JLLM_CUDA_CHECK(cudaSetDevice(device_));
    JLLM_ASSERT(hw_ != nullptr && !kv_.empty() && pos >= 0 && pos < n_ctx_);
    JLLM_ASSERT(token >= 0 && token < token_embd_.rows);
    decode_on_device(token, pos, StepTail::Argmax, 1);
    int32_t id = 0;
    JLLM_CUDA_CHECK(cudaMemcpyAsync(&id, argmax_dev_, sizeof id, cudaMemcpyDeviceToHost, stream_));
    JLLM_CUDA_CHECK(cudaStreamSynchronize(stream_));
    prof_collect();
    return id;
}

void CudaBackend::forward_topk(int32_t token, int pos, int k, int32_t* ids, float* vals) {
    JLLM_CUDA_CHECK(cudaSetDevice(device_));
    JLLM_ASSERT(hw_ != nullptr && !kv_.empty() && pos >= 0 && pos < n_ctx_);
    JLLM_ASSERT(token >= 0 && token < token_embd_.rows);
    JLLM_ASSERT(k >= 1 && k <= cuda::TOPK_MAX && k <= c_.n_vocab);
    decode_on_device(token, pos, StepTail::TopK, topk_bucket(k));
    JLLM_CUDA_CHECK(cudaMemcpyAsync(vals, topk_vals_, static_cast<size_t>(k) * sizeof(float), cudaMemcpyDeviceToHost,
                                    stream_));
    JLLM_CUDA_CHECK(cudaMemcpyAsync(ids, topk_ids_, static_cast<size_t>(k) * sizeof(int32_t), cudaMemcpyDeviceToHost,
                                    stream_));
    JLLM_CUDA_CHECK(cudaStreamSynchronize(stream_));
    prof_collect();
}

void CudaBackend::read_kv(int pos0, int n_pos, KvBlob& out) const {
    JLLM_ASSERT(pos0 >= 0 && n_pos >= 0 && pos0 + n_pos <= n_ctx_);
    JLLM_CUDA_CHECK(cudaSetDevice(device_));
    JLLM_CUDA_CHECK(cudaStreamSynchronize(stream_));
    const size_t elt = kv_type_ == KvType::Int8 ? 1 : 2;
    const size_t row = static_cast<size_t>(c_.kv_dim()) * elt;
    const size_t srow = static_cast<size_t>(c_.n_head_kv) * sizeof(Half);
    const bool int8 = kv_type_ == KvType::Int8;
    const size_t per_layer = 2 * n_pos * row + (int8 ? 2 * n_pos * srow : 0);
    out.type = kv_type_;
    out.n_pos = n_pos;
    out.bytes.resize(per_layer * kv_.size());
    uint8_t* p = out.bytes.data();
    auto get = [&](const void* base, size_t offset, size_t n) {
        JLLM_CUDA_CHECK(cudaMemcpy(p, static_cast<const uint8_t*>(base) + offset, n, cudaMemcpyDeviceToHost));
        p += n;
    };
    for (const DevKv& l : kv_) {
        get(l.k, pos0 * row, n_pos * row);
        if (int8) get(l.k_scale, pos0 * srow, n_pos * srow);
        get(l.v, pos0 * row, n_pos * row);
        if (int8) get(l.v_scale, pos0 * srow, n_pos * srow);
    }
}

void CudaBackend::write_kv(int pos0, const KvBlob& in) {
    if (in.type != kv_type_) throw JllmError("kv: snapshot KV type differs from the cache's");
    const int n_pos = in.n_pos;
    if (pos0 < 0 || n_pos < 0 || pos0 + n_pos > n_ctx_) throw JllmError("kv: snapshot does not fit the context");
    JLLM_CUDA_CHECK(cudaSetDevice(device_));
    JLLM_CUDA_CHECK(cudaStreamSynchronize(stream_));
    const size_t elt = kv_type_ == KvType::Int8 ? 1 : 2;
    const size_t row = static_cast<size_t>(c_.kv_dim()) * elt;
    const size_t srow = static_cast<size_t>(c_.n_head_kv) * sizeof(Half);
    const bool int8 = kv_type_ == KvType::Int8;
    const size_t per_layer = 2 * n_pos * row + (int8 ? 2 * n_pos * srow : 0);
    if (in.bytes.size() != per_layer * kv_.size()) throw JllmError("kv: snapshot size does not match the model");
    const uint8_t* p = in.bytes.data();
    auto put = [&](void* base, size_t offset, size_t n) {
        JLLM_CUDA_CHECK(cudaMemcpy(static_cast<uint8_t*>(base) + offset, p, n, cudaMemcpyHostToDevice));
        p += n;
    };
    for (DevKv& l : kv_) {
        put(l.k, pos0 * row, n_pos * row);
        if (int8) put(l.k_scale, pos0 * srow, n_pos * srow);
        put(l.v, pos0 * row, n_pos * row);
        if (int8) put(l.v_scale, pos0 * srow, n_pos * srow);
    }
}

BackendMemory CudaBackend::memory() const {
    BackendMemory m;
    m.unified = prop_.integrated != 0;
    size_t free_b = 0, total_b = 0;
    if (cudaSetDevice(device_) == cudaSuccess && cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
        m.device_total = static_cast<int64_t>(total_b);
        m.device_free = static_cast<int64_t>(free_b);
        if (free_at_start_ >= 0) m.device_used = free_at_start_ - static_cast<int64_t>(free_b);
    } else {
        (void)cudaGetLastError();
    }
    m.weights_bytes = weights_bytes_;
    m.kv_bytes = kv_bytes_for(c_, n_ctx_, kv_type_);
    m.scratch_bytes = scratch_bytes_;
    return m;
}

CudaBackend& as_cuda(Backend& backend) {
    CudaBackend* b = dynamic_cast<CudaBackend*>(&backend);
    JLLM_ASSERT_MSG(b != nullptr, "not a CUDA backend");
    return *b;
}

}  // namespace

bool cuda_device_available() { return cuda::device_count() > 0; }

std::unique_ptr<Backend> create_cuda_backend(const ModelConfig& config, int device) {
    if (!cuda_device_available()) throw JllmError("cuda: no CUDA device is available");
    return std::make_unique<CudaBackend>(config, device);
}

void cuda_backend_set_tap(Backend& backend, ActivationTap tap, void* ctx) { as_cuda(backend).set_tap(tap, ctx); }

int cuda_backend_graph_count(const Backend& backend) {
    const CudaBackend* b = dynamic_cast<const CudaBackend*>(&backend);
    JLLM_ASSERT_MSG(b != nullptr, "not a CUDA backend");
    return b->graph_count();
}

int64_t cuda_backend_logits_head(const Backend& backend) {
    const CudaBackend* b = dynamic_cast<const CudaBackend*>(&backend);
    JLLM_ASSERT_MSG(b != nullptr, "not a CUDA backend");
    return b->logits_head();
}

int32_t cuda_backend_forward_argmax(Backend& backend, int32_t token, int pos) {
    return as_cuda(backend).forward_argmax(token, pos);
}

void cuda_backend_forward_topk(Backend& backend, int32_t token, int pos, int k, int32_t* ids, float* vals) {
    as_cuda(backend).forward_topk(token, pos, k, ids, vals);
}

}  // namespace jllm
