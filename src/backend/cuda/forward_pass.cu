// backend/cuda/forward_pass.cu — the CUDA forward pass: the CPU backend's per-layer order
// (backend/cpu/cpu_backend.cpp) with one kernel (or a few) per step, all on one stream:
//   embed -> per layer: rmsnorm -> Q,K,V matmuls -> bias/Q-K-norm/RoPE/KV store ->
//   attention -> W_o matmul (+= residual) -> rmsnorm -> gate/up matmul with SwiGLU ->
//   W_down matmul (+= residual); then the final rmsnorm and the logits of the requested rows.
// Batches of <= GEMV_MAX_TOKENS tokens run the dp4a GEMV on 8-bit activations (when every matrix
// is a quantized type; q8_path), larger ones the tensor-core GEMM; either way Q, K and V share a
// launch where its kernel takes their formats (qkv_groups). Nothing here allocates.
#include <cstdio>

#include "backend/cuda/cuda_backend_impl.cuh"
#include "backend/kv_quant.h"
#include "core/error.h"
#include "quant/quant_types.h"

namespace jllm {

const uint16_t* CudaBackend::to_gemm_f16(const float* x, int n_tok, int64_t cols, void* xq8) {
    uint16_t* xh = gemm_f16_input(n_tok);
    if (xh == nullptr) return nullptr;
    if (xq8 != nullptr) {
        cuda::launch_to_f16_q8k(x, n_tok, cols, xh, xq8, stream_);
    } else {
        cuda::launch_to_f16(x, static_cast<int64_t>(n_tok) * cols, xh, stream_);
    }
    return xh;
}

void CudaBackend::matmul(const DevWeight& w, const float* x, const uint16_t* xh, int n_tok, float* y, cuda::MatOut out,
                         const DevWeight* w2, const void* xq8) {
    cuda::launch_matmul(w.fmt(), w.data, w2 ? w2->data : nullptr, w.rows, w.cols, x, xh, n_tok, y, out, stream_,
                        gemm_work_, gemm_work_floats_, xq8);
}

void CudaBackend::gemv_q8(const DevWeight& w, int n_tok, float* y, cuda::MatOut out, const void* xq) {
    cuda::launch_gemv_q8(w.fmt(), w.data, nullptr, w.rows, w.cols, xq ? xq : xq_, n_tok, y, out, stream_);
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
    JLLM_ASSERT(host_weights_ != nullptr && !kv_.empty() && n_tokens >= 1 && n_tokens <= n_batch_);
    const int last = static_cast<int>(c_.n_layer) - 1;
    if (layer_end < 0) layer_end = last + 1;
    if (layer_begin == 0) {
        embed(tokens, tokens_dev, n_tokens);
        step("embed");
        tap("embd", -1, x_, n_tokens, c_.n_embd);
    }
    for (int il = layer_begin; il < layer_end; ++il) {
        layer(il, n_tokens, pos0, pos_dev, il == last && !tap_ ? out_first : 0);
    }
}

namespace {

// f(fmt[n], n, w[n], rows[n], y[n], cols) for each run of consecutive Q/K/V projections of one
// width whose formats one launch takes (joins(fmt, n)), longest first; ys: Q, K, V's outputs.
template <typename J, typename F>
void qkv_groups(const DevLayer& L, float* const* ys, J&& joins, F&& f) {
    const DevWeight* ws[3] = {&L.wq, &L.wk, &L.wv};
    const cuda::WeightFormat fmt[3] = {L.wq.fmt(), L.wk.fmt(), L.wv.fmt()};
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

}  // namespace

void CudaBackend::qkv_q8(const DevLayer& L, int n) {
    // One launch for all three in every layer of Q4_K_M's on tiles (V in Q6_K or not).
    float* const ys[3] = {q_, k_, v_};
    qkv_groups(L, ys, cuda::gemv_q8_multi_takes,
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
        uint16_t* hh = gemm_f16_input(n_tokens);  // the norm writes the GEMM's inputs too
        void* hq = s8_input(n_tokens, takes_s8(L.wq) || takes_s8(L.wk) || takes_s8(L.wv));
        cuda::launch_rmsnorm(x_, L.attn_norm.f32(), h_, hh, n_tokens, E, c_.rms_eps, stream_, hq);
        if (n_tokens > cuda::GEMV_MAX_TOKENS) {
            // Runs of one format in one GEMM grid (Q, K and V in Q4_K_M's Q4_K layers).
            auto one_format = [](const cuda::WeightFormat* f, int k) {
                return f[k - 1].type == f[0].type && f[k - 1].layout == f[0].layout;
            };
            float* const ys[3] = {q_, k_, v_};
            qkv_groups(L, ys, one_format, [&](const cuda::WeightFormat* fmt, int n_seg, const void* const* w,
                                          const int64_t* rows, float* const* y, int64_t cols) {
                cuda::launch_gemm_multi(fmt[0], n_seg, w, rows, cols, hh, n_tokens, y, stream_, gemm_work_,
                                        gemm_work_floats_, hq);
            });
        } else {
            matmul(L.wq, h_, hh, n_tokens, q_, cuda::MatOut::Store);
            matmul(L.wk, h_, hh, n_tokens, k_, cuda::MatOut::Store);
            matmul(L.wv, h_, hh, n_tokens, v_, cuda::MatOut::Store);
        }
    }
    step("norm + qkv");

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
    qp.k_rot_scale = kv_k_rotated(kv_type_, c_.head_dim) ? kv_rotation_scale(c_.head_dim) : 0.0f;
    qp.k_cache = kv.k;
    qp.v_cache = kv.v;
    qp.k_scale = kv.k_scale;
    qp.v_scale = kv.v_scale;
    // One token or a verification's few (decode_rows below): the attention folds the post in
    // (AttentionParams::post), unless a tap wants q/k/v.
    const bool post_in_attention = (n_tokens == 1 || q8) && !tap_;
    if (!post_in_attention) cuda::launch_qkv_post(qp, stream_);
    step("qkv_post");
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
    ap.work_floats = attn_work_floats_;
    ap.max_split = capture_splits_ > 0 ? capture_splits_ : max_split_;
    ap.choice = opt_.attention;
    ap.out_q8 = q8 ? xq_ : nullptr;
    ap.post = post_in_attention ? &qp : nullptr;
    // A few tokens (speculative decoding's verification): each query as a decode step, split over
    // the KV length like a step's (the prefill kernel gives each head one block, 7x a step at 4,096
    // positions on the H200), at its own position (pos_dev[t] in a graph), in one launch.
    ap.decode_rows = q8 && n_tokens > 1;
    cuda::launch_attention(ap, stream_);
    step("attention");
    tap("attn", il, att_, n_tokens, Q);

    // Rows [out_first, n_tokens) from here on. A subset takes the fp32 path: the attention wrote
    // the 8-bit activations of all rows.
    const int n = n_tokens - out_first;
    if (n == 0) return;
    float* x = x_ + out_first * E;
    const float* att = att_ + out_first * Q;
    if (out_first > 0) q8 = false;
    if (q8) {
        gemv_q8(L.wo, n, x, cuda::MatOut::Add);
    } else {
        void* aq = s8_input(n, takes_s8(L.wo));
        const uint16_t* ah = to_gemm_f16(att, n, Q, aq);
        matmul(L.wo, att, ah, n, x, cuda::MatOut::Add, nullptr, aq);
    }
    step("wo");
    tap("attn_res", il, x, n, E);
    const bool fused_ffn = L.ffn_fused();
    if (q8 && xq8_dec_ != nullptr && ffn_on_s8(L)) {
        // int8 tensor cores (CudaOptions::gemv_int8): the norm's act_q8k, the product writes
        // W_down's 8-bit input by halves (the split fixed per width: rows are steps' at any batch).
        cuda::launch_rmsnorm_q8(x, L.ffn_norm.f32(), h_tap, nullptr, n, E, c_.rms_eps, stream_, xq8_dec_);
        cuda::launch_gemv_s8(L.w_gate.data, L.w_up.data, L.w_gate.rows, E, xq8_dec_, n, cuda::gemv_s8_split(E), g_,
                             cuda::MatOut::SwiGLU, stream_, xq_ff_);
        step("norm + gate_up + quant");
        gemv_q8(L.w_down, n, x, cuda::MatOut::Add, xq_ff_);
    } else if (q8) {
        cuda::launch_rmsnorm_q8(x, L.ffn_norm.f32(), h_tap, xq_, n, E, c_.rms_eps, stream_);
        if (fused_ffn) {
            // its 8-bit copy by the product itself where it can (one token on tiled weights), by
            // halves where W_down's product reads it (tiles)
            cuda::launch_gemv_q8(L.w_gate.fmt(), L.w_gate.data, L.w_up.data, L.w_gate.rows, E, xq_, n, g_,
                                 cuda::MatOut::SwiGLU, stream_, xq_ff_, L.w_down.fmt().tiled());
        } else {
            gemv_q8(L.w_gate, n, g_, cuda::MatOut::Store);
            gemv_q8(L.w_up, n, u_, cuda::MatOut::Store);
            cuda::launch_swiglu(g_, u_, g_, static_cast<int64_t>(n) * c_.n_ff, stream_);
            cuda::launch_quantize_act(g_, n, c_.n_ff, xq_ff_, stream_);
        }
        step("norm + gate_up + quant");
        gemv_q8(L.w_down, n, x, cuda::MatOut::Add, xq_ff_);
    } else {
        uint16_t* hh = gemm_f16_input(n);
        void* hq = s8_input(n, takes_s8(L.w_gate) || takes_s8(L.w_up));
        cuda::launch_rmsnorm(x, L.ffn_norm.f32(), h_, hh, n, E, c_.rms_eps, stream_, hq);
        if (fused_ffn) {
            matmul(L.w_gate, h_, hh, n, g_, cuda::MatOut::SwiGLU, &L.w_up, hq);
        } else {  // mixed-type gate/up (some quant mixes): two products, then SwiGLU
            matmul(L.w_gate, h_, hh, n, g_, cuda::MatOut::Store, nullptr, hq);
            matmul(L.w_up, h_, hh, n, u_, cuda::MatOut::Store, nullptr, hq);
            cuda::launch_swiglu(g_, u_, g_, static_cast<int64_t>(n) * c_.n_ff, stream_);
        }
        step("norm + gate_up");
        void* gq = s8_input(n, takes_s8(L.w_down));
        const uint16_t* gh = to_gemm_f16(g_, n, c_.n_ff, gq);
        matmul(L.w_down, g_, gh, n, x, cuda::MatOut::Add, nullptr, gq);
    }
    step("down");
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
    step("final_norm");
}

void CudaBackend::logits_rows(int first, int n) {
    JLLM_ASSERT(n >= 1 && n <= LOGIT_ROWS);
    if (first == 0 && q8_path(n)) {  // final_norm(.., n) left these rows in xq_
        gemv_q8(output_, n, logits_dev_, cuda::MatOut::Store);
    } else {
        const float* h = h_ + first * c_.n_embd;
        matmul(output_, h, to_gemm_f16(h, n, c_.n_embd), n, logits_dev_, cuda::MatOut::Store);
    }
    step("logits");
}

void CudaBackend::logits_split() {
    if (logits_head_ == 0) {  // (set only where the q8 path serves one token)
        logits_rows(0, 1);
        return;
    }
    const int64_t V = output_.rows;
    const size_t head_bytes = static_cast<size_t>(logits_head_) * row_size(output_.type, output_.cols);
    cuda::launch_gemv_q8(output_.fmt(), output_.data, nullptr, logits_head_, output_.cols, xq_, 1, logits_dev_,
                         cuda::MatOut::Store, stream_);
    // An event record node of the graph (external: the host's copy stream waits for it).
    JLLM_CUDA_CHECK(cudaEventRecordWithFlags(logits_head_ev_, stream_, cudaEventRecordExternal));
    cuda::launch_gemv_q8(output_.fmt(), output_.data + head_bytes, nullptr, V - logits_head_, output_.cols, xq_, 1,
                         logits_dev_ + logits_head_, cuda::MatOut::Store, stream_);
    step("logits");
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

void CudaBackend::step_tail(StepTail tail, int k, bool masked) {
    if (masked) {
        JLLM_CUDA_CHECK(cudaMemcpyAsync(mask_dev_, mask_host_, mask_words_ * sizeof(uint32_t), cudaMemcpyHostToDevice,
                                        stream_));
        cuda::launch_apply_token_mask(logits_dev_, c_.n_vocab, mask_dev_, stream_);
        step("token mask");
    }
    if (tail == StepTail::Argmax) {
        cuda::launch_argmax(logits_dev_, c_.n_vocab, argmax_work_, argmax_dev_, stream_);
        step("argmax");
    } else if (tail == StepTail::TopK) {
        cuda::launch_topk(logits_dev_, c_.n_vocab, k, topk_work_, topk_vals_, topk_ids_, stream_);
        step("top-k");
    }
}

}  // namespace jllm
