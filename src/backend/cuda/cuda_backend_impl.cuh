// backend/cuda/cuda_backend_impl.cuh — the CUDA backend's class, shared by the files that
// implement it (included by .cu files only):
//   cuda_backend.cu     construction, buffers (allocate), forward(), forward_select(), warm-up
//   forward_pass.cu     the layers: one kernel (or a few) per step of the CPU backend's order
//   weights_upload.cu   bind_weights: weights copied (Q4_K/Q6_K re-tiled) or mapped in place
//   graph_cache.cu      CUDA graphs: the decode step's per (splits, tail), the other forwards' per layer
//   kv_transfer.cu      read_kv / write_kv in the canonical layout
//   step_marks.cu       per-step profiling and the synchronizing error check (CudaOptions)
// Every kernel runs on one stream (stream_); a decode step's logits also use copy_stream_.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/cuda_options.h"
#include "core/error.h"
#include "model/model_config.h"
#include "model/model_weights.h"

namespace jllm {

// A weight as the kernels see it: device pointer, type, shape.
struct DevWeight {
    const uint8_t* data = nullptr;  // device (or mapped) pointer, null if absent
    GgmlType type = GgmlType::F32;
    int64_t cols = 0, rows = 0;     // [rows][cols]
    cuda::WeightLayout layout = cuda::WeightLayout::Rows;  // of the device bytes (copied Q4_K/Q6_K: tiles)
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
    void* k = nullptr;  // [n_ctx][n_head_kv][head_dim] int8 (or fp16)
    void* v = nullptr;
    Half* k_scale = nullptr;  // [n_ctx][n_head_kv] (INT8 only)
    Half* v_scale = nullptr;
};

// What a decode step runs after its logits: nothing (the logits are copied out), the argmax, or
// the top k.
enum class StepTail { None, Logits, Argmax, TopK };  // None: the logits stay on the device

class CudaBackend final : public Backend {
public:
    CudaBackend(const ModelConfig& c, const CudaOptions& options);
    ~CudaBackend() override;

    const char* name() const override { return "cuda"; }
    std::string device_description() const override;
    void bind_weights(const ModelWeights& weights, WeightPlacement placement) override;
    void allocate(int n_ctx, int n_batch, KvType kv_type) override;
    void forward(const int32_t* tokens, int n_tokens, int pos0, LogitsMode mode, float* logits) override;
    // Up to GEMV_MAX_TOKENS on the dp4a path: the one-token GEMVs' sums in their order (the tiled
    // launch's warps per group and 8-bit copy: gemv_q8_tiled) and each query as a decode step
    // (AttentionParams::decode_rows). Larger batches take the fp16 GEMM and the prefill attention
    // (within their bounds, not bit for bit); without the dp4a path, one token.
    int exact_rows() const override { return use_q8_ ? cuda::GEMV_MAX_TOKENS : 1; }
    bool forward_select(int32_t token, int pos, const TokenSelection& sel, int32_t* ids, float* vals) override;
    void pin_host_buffer(void* p, size_t bytes) override;
    void warm_up(int top_k) override;
    void truncate_kv(int n_pos) override { JLLM_ASSERT(n_pos >= 0 && n_pos <= n_ctx_); }
    void read_kv(int pos0, int n_pos, KvBlob& out) const override;
    void write_kv_view(int pos0, const KvView& in) override;
    BackendMemory memory() const override;
    void set_tap(ActivationTap tap, void* ctx) override {
        tap_ = tap;
        tap_ctx_ = ctx;
    }

    // For the tests' seams (tests/support): graphs held, and the decode step's first logits copy.
    int graph_count() const {
        return static_cast<int>(decode_graphs_.size() + fwd_graphs_.size() + verify_graphs_.size());
    }
    int64_t logits_head() const { return logits_head_; }

private:
    static constexpr int LOGIT_ROWS = 32;  // logits computed per pass in LogitsMode::All
    // Decode graphs kept at most (split counts x tails); past that the cache starts again.
    static constexpr size_t MAX_DECODE_GRAPHS = 32;

    void* alloc(size_t bytes);
    void tap(const char* name, int il, const float* dev, int64_t n_tokens, int64_t width);

    // ---- forward_pass.cu
    // The GEMM's fp16 input buffer when n_tok takes the GEMM (null otherwise); the products that
    // share an input read it from there.
    uint16_t* gemm_f16_input(int n_tok) const { return n_tok > cuda::GEMV_MAX_TOKENS ? xh_ : nullptr; }
    // The int8 GEMM's input buffer (act_q8k) when a product of this batch on it runs on int8
    // tensor cores (`takes`: takes_s8 of one of its matrices; a batch past the GEMV of at least
    // CudaOptions::gemm_int8_min_tokens); null otherwise. The kernel that writes the batch's fp16
    // input (the RMSNorm, to_gemm_f16) writes it too.
    void* s8_input(int n_tok, bool takes) const {
        return takes && n_tok >= opt_.gemm_int8_min_tokens && gemm_f16_input(n_tok) != nullptr ? xq8_ : nullptr;
    }
    // x [n_tok][cols] converted into gemm_f16_input(n_tok), for an input no kernel wrote in fp16;
    // into xq8 (s8_input's) as act_q8k too where not null.
    const uint16_t* to_gemm_f16(const float* x, int n_tok, int64_t cols, void* xq8 = nullptr);
    bool takes_s8(const DevWeight& w) const { return xq8_ != nullptr && cuda::gemm_takes_s8(w.fmt()); }
    // xh: to_gemm_f16(x, ..) (the GEMM's input when n_tok takes it); xq8: s8_input's, written.
    void matmul(const DevWeight& w, const float* x, const uint16_t* xh, int n_tok, float* y, cuda::MatOut out,
                const DevWeight* w2 = nullptr, const void* xq8 = nullptr);
    // The dp4a GEMV of one matrix (Store or Add) on the 8-bit activations in xq (default xq_).
    void gemv_q8(const DevWeight& w, int n_tok, float* y, cuda::MatOut out, const void* xq = nullptr);
    // Enqueues the layers for n_tokens tokens already in tokens_dev (device) at positions
    // pos0.. (read from pos_dev on the device when it is not null: graph capture).
    // Past its attention the last layer runs for rows [out_first, n_tokens) only (those whose
    // logits are asked for; all while a tap watches). Layers [layer_begin, layer_end) only (all
    // when layer_end < 0); the embedding with layer 0.
    void run_layers(const int32_t* host_tokens, const int32_t* tokens_dev, int n_tokens, int pos0, const int* pos_dev,
                    int out_first = 0, int layer_begin = 0, int layer_end = -1);
    void layer(int il, int n_tokens, int pos0, const int* pos_dev, int out_first);
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
    // The sampling kernels after a decode step's logits (k: a topk_bucket).
    void step_tail(StepTail tail, int k, bool masked);
    // The 8-bit-activation (dp4a GEMV) path serves batches of up to GEMV_MAX_TOKENS tokens.
    bool q8_path(int n_tokens) const { return use_q8_ && n_tokens <= cuda::GEMV_MAX_TOKENS; }
    // A layer whose gate / up the int8 GEMV can take on that path: both tiled Q4_K (one fused
    // product), and W_down tiled (its dp4a GEMV reads the product's 8-bit copy by halves).
    static bool ffn_on_s8(const DevLayer& l) {
        return l.ffn_fused() && cuda::gemm_takes_s8(l.w_gate.fmt()) && l.w_down.fmt().tiled() && l.w_gate.rows % 32 == 0;
    }

    // ---- graph_cache.cu
    bool graph_usable() const;
    // One decode step (token at pos, logits into logits_dev_, then the tail) by graph replay;
    // false if the graph could not be captured (then graphs stay off).
    bool decode_graph(int32_t token, int pos, StepTail tail, int k);
    // A verification forward (speculative decoding: 2 .. GEMV_MAX_TOKENS tokens at pos.., every
    // row's logits into logits_dev_) by graph replay, one graph per (tokens, split count): tokens
    // and positions in step_dev_ + 2. False if the graph could not be captured.
    bool verify_graph(const int32_t* tokens, int n_tokens, int pos);
    bool masked_tail_graph(StepTail tail, int k);
    // One decode step up to the logits in logits_dev_ and the tail's results (the graph when
    // usable), nothing copied back.
    void decode_on_device(int32_t token, int pos, StepTail tail, int k, const TokenSelection& sel);
    void release_graphs();
    // Enqueues what enqueue() launches on stream_ as one graph (fwd_graphs_[key]: captured now,
    // the cached executable updated in place when the shapes match, else instantiated anew), or
    // launches it directly when graphs are off or the capture fails.
    void run_as_graph(int64_t key, const std::function<void()>& enqueue);
    // What enqueue() launches on stream_, captured into a graph (the caller destroys it); null when
    // the capture fails (graphs off from then on, a warning naming what was captured).
    cudaGraph_t capture(const char* what, const std::function<void()>& enqueue);
    // graph instantiated (the graph itself is left to the caller); null when that fails (graphs off
    // from then on, a warning).
    cudaGraphExec_t instantiate(cudaGraph_t graph, const char* what);
    // capture() then instantiate(), the graph itself released: the executable, or null (graphs off).
    cudaGraphExec_t capture_exec(const char* what, const std::function<void()>& enqueue);
    // A graph's node count and node types (FNV-1a): an executable is updated only from a graph of
    // the same shape (cudaGraphExecUpdate refuses others; kernels and their arguments may differ).
    static uint64_t graph_shape(cudaGraph_t graph);
    // The decode-attention splits a step at `pos` runs: those pos + 1 keys need, rounded up to a
    // power of two (one graph per count, not one for the whole context's).
    int graph_splits(int pos) const;
    // The top-k tail computes the k' >= k best, k' a power of two (at most TOPK_MAX and n_vocab):
    // their first k are the k best in the same order, so one graph per bucket serves every k.
    int topk_bucket(int k) const;

    // ---- step_marks.cu
    // After each step of the forward pass (name: a string literal): its profile event
    // (CudaOptions::profile) and the synchronizing error check (CudaOptions::sync_check).
    void step(const char* name);
    void prof_collect();  // after a synchronization
    void prof_report() const;

    ModelConfig c_;
    CudaOptions opt_;
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

    const ModelWeights* host_weights_ = nullptr;  // the mapped file's tensors (bind_weights)
    DevWeight token_embd_, output_norm_, output_;
    std::vector<DevLayer> layers_;
    float* inv_freq_ = nullptr;     // [n_rot / 2]
    std::vector<float> embd_host_;  // [n_batch][n_embd], host fallback for embedding types without a kernel

    int n_ctx_ = 0, n_batch_ = 1;
    int max_split_ = 1;     // decode-attention splits of the whole context
    int split_keys_ = 1;    // fewest keys per decode-attention split
    KvType kv_type_ = KvType::Int8;
    std::vector<DevKv> kv_;  // [n_layer]
    // Activations, fp32, [n_batch][width]:
    float* x_ = nullptr;    // [n_batch][n_embd] the residual stream
    float* h_ = nullptr;    // [n_batch][n_embd] a norm's output
    float* q_ = nullptr;    // [n_batch][n_head * head_dim]
    float* k_ = nullptr;    // [n_batch][n_head_kv * head_dim]
    float* v_ = nullptr;    // [n_batch][n_head_kv * head_dim]
    float* att_ = nullptr;  // [n_batch][n_head * head_dim] attention output
    float* g_ = nullptr;    // [n_batch][n_ff] gate (the SwiGLU product's output)
    float* u_ = nullptr;    // [n_batch][n_ff] up, where gate and up differ in type (else null)
    float* logits_dev_ = nullptr;  // [LOGIT_ROWS][n_vocab]
    uint16_t* xh_ = nullptr;  // [n_batch][max(n_embd, n_head * head_dim, n_ff)] fp16: the GEMM's input
    float* attn_work_ = nullptr;   // [min(n_batch, 4)][n_head][max_split_][head_dim + 2]: decode splits'
                                   // partial results (a verification's queries: one row each), or a
                                   // split prefill's ([n_tok][n_head][splits][head_dim + 2])
    size_t attn_work_floats_ = 0;
    int32_t* tokens_dev_ = nullptr;  // [n_batch]
    int32_t* argmax_dev_ = nullptr;  // [1]
    void* argmax_work_ = nullptr;  // argmax_work_bytes(), zero between calls
    float* topk_work_ = nullptr;   // topk_work_floats(n_vocab, k_max): launch_topk's rounds
    float* topk_vals_ = nullptr;   // [k_max] the k best logits, best first
    int32_t* topk_ids_ = nullptr;  // [k_max] their ids
    void* xq_ = nullptr;     // act_q8 of [GEMV_MAX_TOKENS][max(n_embd, n_head * head_dim, n_ff)]: 8-bit activations
    void* xq_ff_ = nullptr;  // act_q8 of [GEMV_MAX_TOKENS][n_ff]: the SwiGLU output's 8-bit copy (ffn_down's input)
    void* xq8_ = nullptr;  // act_q8k of [n_batch][max(n_embd, q_dim, n_ff)]: the int8 GEMM's input (null: not used)
    // act_q8k of [GEMV_MAX_TOKENS][n_embd]: the int8 GEMV's input, the FFN norm's (null: no layer's
    // gate / up takes it, CudaOptions::gemv_int8 off).
    void* xq8_dec_ = nullptr;
    float* gemm_work_ = nullptr;  // [gemm_work_floats_] split-K partial sums of prefill GEMMs with small grids
    size_t gemm_work_floats_ = 0;
    bool use_q8_ = false;  // every matrix has a dp4a GEMV
    int64_t scratch_bytes_ = 0;

    // CUDA-graph replay of the single-token decode step: token and position live in step_dev_
    // (copied from the pinned step_host_ by the graph's first node).
    // A verification forward's graph reads its tokens and positions after them (verify_graph).
    static constexpr int STEP_WORDS = 2 + 2 * cuda::GEMV_MAX_TOKENS;
    int32_t* step_dev_ = nullptr;   // [STEP_WORDS] token, position; verification tokens, positions
    int32_t* step_host_ = nullptr;  // [STEP_WORDS] pinned
    // A decode step's token mask (TokenSelection::allowed): copied into the pinned mask_host_ by
    // forward_select, to mask_dev_ by the graph's node, applied to the logits before the tail.
    uint32_t* mask_dev_ = nullptr;   // [mask_words_]
    uint32_t* mask_host_ = nullptr;  // [mask_words_] pinned
    size_t mask_words_ = 0;
    // KV snapshots in and out (kv_transfer.cu) pass through two pinned buffers, allocated on the
    // first transfer: the host copy of one chunk overlaps the DMA of the other (pageable copies of
    // each part ran at ~1.4 GB/s on the H200).
    static constexpr size_t KV_STAGE_BYTES = 8u << 20;
    uint8_t* kv_stage_[2] = {nullptr, nullptr};
    cudaEvent_t kv_stage_ev_[2] = {nullptr, nullptr};
    void ensure_kv_stage() const;
    // One graph per attention split count (graph_splits): a step runs the splits its position
    // needs (rounded up to a power of two), not those of the whole context.
    std::map<std::tuple<int, StepTail, int>, cudaGraphExec_t> decode_graphs_;  // (splits, tail, k)
    // A masked step is two graphs: the decode through the logits (tail None), then, once the host
    // has the mask, this tail: the mask's copy, the mask, the selection.
    std::map<std::pair<StepTail, int>, cudaGraphExec_t> masked_tails_;  // (tail, k)
    std::map<std::pair<int, int>, cudaGraphExec_t> verify_graphs_;      // (tokens, splits)
    int capture_splits_ = 0;  // the split count of the decode graph being captured (0: none)
    // Executables of the other forwards (captured per call, updated in place when the call's
    // graph has the same shape): one per layer (the last per logits mode), one for the logits
    // rows of LogitsMode::All.
    struct FwdGraph {
        cudaGraphExec_t exec = nullptr;
        uint64_t shape = 0;  // graph_shape() of the graph it was made from
    };
    std::map<int64_t, FwdGraph> fwd_graphs_;
    std::vector<void*> pinned_;  // host buffers registered by pin_host_buffer
    bool graph_failed_ = false;

    ActivationTap tap_ = nullptr;
    void* tap_ctx_ = nullptr;
    std::vector<float> tap_buf_;

    // CudaOptions::profile: an event after every step (step()); the time between consecutive
    // events is summed per step name and printed when the backend is destroyed.
    struct ProfMark {
        const char* name;
        cudaEvent_t ev;
    };
    std::vector<cudaEvent_t> prof_pool_;
    std::vector<ProfMark> prof_marks_;
    std::map<std::string, std::pair<double, long>> prof_sum_;  // name -> (ms, count)
};

}  // namespace jllm
