// backend/cpu/cpu_backend.cpp — the CPU forward pass for every architecture recipe (llama,
// qwen2, qwen3), batched prefill and single-token decode, INT8 or FP16 KV cache.
//
// Per layer: h = rmsnorm(x) * attn_norm; q,k,v = h W{q,k,v} (+ bias); [qwen3: per-head rmsnorm
// of q and k]; RoPE on q and k [INT8 cache: both rotated]; k,v stored at their positions; causal grouped-query attention;
// x += attn W_o; h = rmsnorm(x) * ffn_norm; x += (silu(h W_gate) * (h W_up)) W_down.
// Then rmsnorm(x) * output_norm and the logits of the requested rows.
//
// KV cache (the canonical layout, so snapshots are plain copies): per layer
//   k, v: [n_ctx][n_head_kv][head_dim] int8 (or fp16)
//   k_scale, v_scale: [n_ctx][n_head_kv] fp16 (INT8 only): x = q * scale, symmetric, per
//   position and head, quantized after RoPE; INT8 keys (and the queries) Walsh-Hadamard rotated
//   after RoPE where the head is a power of two (backend/kv_quant.h kv_k_rotated).
// All buffers are carved in allocate() from two pools sized by backend/cpu/cpu_pool_plan.h (one
// allocation each: KVCachePool, ScratchPool); forward() allocates nothing.
#include "backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cpu/attn_dot.h"
#include "backend/cpu/cpu_pool_plan.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/rope.h"
#include "backend/cpu/select.h"
#include "backend/kv_quant.h"
#include "core/error.h"
#include "core/fp16.h"
#include "core/memory_pool.h"
#include "core/thread_pool.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "quant/quant_types.h"

namespace jllm {

namespace {

MatmulWeight as_matmul(const WeightTensor& w) {
    MatmulWeight m;
    m.data = w.data;
    m.type = w.type;
    m.n_in = w.cols;
    m.n_out = w.rows;
    return m;
}

void rmsnorm_row(const float* x, const float* w, float* y, int64_t n, float eps) {
    double ss = 0.0;
    for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
    const float scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale * w[i];
}

struct LayerKv {
    PoolArray<uint8_t> k, v;   // [n_ctx][n_head_kv][head_dim] int8 or fp16
    PoolArray<Half> k_scale, v_scale;  // [n_ctx][n_head_kv] (INT8 only)
};

class CpuBackend final : public Backend {
public:
    CpuBackend(const ModelConfig& c, const CpuOptions& o)
        : c_(c), pool_(o.n_threads), simd_(o.simd), attn_(attn_dot_kernels(o.simd)) {}

    const char* name() const override { return "cpu"; }
    std::string device_description() const override {
        return strfmt("CPU, %d threads, %s", pool_.n_threads(), simd_level_name(simd_));
    }

    void bind_weights(const ModelWeights& weights, WeightPlacement) override {
        w_ = &weights;
        inv_freq_ = rope_inv_freq(c_, weights.rope_freqs.present()
                                          ? reinterpret_cast<const float*>(weights.rope_freqs.data)
                                          : nullptr);
    }

    void allocate(int n_ctx, int n_batch, KvType kv_type) override {
        JLLM_ASSERT(w_ != nullptr);
        n_ctx_ = n_ctx;
        n_batch_ = std::max(1, n_batch);
        kv_type_ = kv_type;
        const size_t per_pos = static_cast<size_t>(c_.kv_dim());
        const size_t elt = kv_type == KvType::Int8 ? 1 : 2;
        // Both pools are zero-filled at reserve(), so every page is touched here, not in forward().
        kv_pool_.reserve(static_cast<size_t>(cpu_kv_pool_bytes(c_, n_ctx, kv_type)));
        kv_.assign(static_cast<size_t>(c_.n_layer), LayerKv{});
        for (LayerKv& l : kv_) {
            l.k.bind(kv_pool_, static_cast<size_t>(n_ctx) * per_pos * elt);
            if (kv_type == KvType::Int8) l.k_scale.bind(kv_pool_, static_cast<size_t>(n_ctx) * c_.n_head_kv);
            l.v.bind(kv_pool_, static_cast<size_t>(n_ctx) * per_pos * elt);
            if (kv_type == KvType::Int8) l.v_scale.bind(kv_pool_, static_cast<size_t>(n_ctx) * c_.n_head_kv);
        }
        const int64_t mm = cpu_matmul_scratch_bytes(*w_, n_batch_);
        scratch_pool_.reserve(static_cast<size_t>(cpu_scratch_pool_bytes(c_, n_ctx, n_batch_, pool_.n_threads(), mm)));
        const size_t B = static_cast<size_t>(n_batch_);
        x_.bind(scratch_pool_, B * c_.n_embd);
        h_.bind(scratch_pool_, B * c_.n_embd);
        q_.bind(scratch_pool_, B * c_.q_dim());
        k_.bind(scratch_pool_, B * c_.kv_dim());
        v_.bind(scratch_pool_, B * c_.kv_dim());
        att_.bind(scratch_pool_, B * c_.q_dim());
        g_.bind(scratch_pool_, B * c_.n_ff);
        u_.bind(scratch_pool_, B * c_.n_ff);
        rope_cs_.bind(scratch_pool_, B * static_cast<size_t>(c_.n_rot));
        mm_scratch_.bind(scratch_pool_, static_cast<size_t>(mm) + 64);
        select_logits_.bind(scratch_pool_, static_cast<size_t>(c_.n_vocab));
        const size_t nth = static_cast<size_t>(pool_.n_threads());
        const size_t tq = static_cast<size_t>(attn_tile_queries(c_));
        tile_scores_.bind(scratch_pool_, nth * tq * static_cast<size_t>(n_ctx));
        tile_q_.bind(scratch_pool_, nth * tq * static_cast<size_t>(c_.head_dim + 2));
        tile_row_.bind(scratch_pool_, nth * static_cast<size_t>(ATTN_KCHUNK * c_.head_dim));
        tile_ptrs_.assign(nth * tq, nullptr);
        scratch_bytes_ = static_cast<int64_t>(scratch_pool_.capacity());
    }

    // Every batch: a row's dot products (quant_dot.h: the same integer sums and float order at any
    // batch size) and its attention over its own keys are those of its one-token step.
    int exact_rows() const override { return std::numeric_limits<int>::max(); }
    void forward(const int32_t* tokens, int n_tokens, int pos0, LogitsMode mode, float* logits) override {
        (void)forward_pass(tokens, n_tokens, pos0, mode, logits, nullptr);
    }
    bool forward_select(int32_t token, int pos, const TokenSelection& sel, int32_t* ids, float* vals) override {
        return forward_select_last(&token, 1, pos, sel, ids, vals);
    }
    // The mask is asked for after the layers, before the output layer, which then computes only
    // the rows of the mask's non-zero words.
    bool forward_select_last(const int32_t* tokens, int n_tokens, int pos0, const TokenSelection& sel, int32_t* ids,
                             float* vals) override {
        if (sel.k < 1 || sel.k > SELECT_MAX_K || sel.k > c_.n_vocab) return false;
        const uint32_t* mask = forward_pass(tokens, n_tokens, pos0, LogitsMode::Last, select_logits_.data(), &sel);
        select_top_k(select_logits_.data(), c_.n_vocab, sel.k, mask, ids, vals);
        return true;
    }

    void truncate_kv(int n_pos) override { JLLM_ASSERT(n_pos >= 0 && n_pos <= n_ctx_); }

    void read_kv(int pos0, int n_pos, KvBlob& out) const override;
    void write_kv_view(int pos0, const KvView& in) override;

    BackendMemory memory() const override {
        BackendMemory m;
        m.unified = true;
        m.weights_bytes = 0;  // read in place from the mapped file
        m.kv_bytes = kv_bytes_for(c_, n_ctx_, kv_type_);
        m.scratch_bytes = scratch_bytes_;
        return m;
    }

    void set_tap(ActivationTap tap, void* ctx) override {
        tap_ = tap;
        tap_ctx_ = ctx;
    }

private:
    void tap(const char* name, int il, const float* data, int64_t n_tokens, int64_t width) {
        if (!tap_) return;
        char buf[64];
        if (il >= 0) std::snprintf(buf, sizeof buf, "l%d.%s", il, name);
        else std::snprintf(buf, sizeof buf, "%s", name);
        tap_(tap_ctx_, buf, data, n_tokens, width);
    }
    void matmul(const WeightTensor& w, const float* x, int64_t n_tokens, float* y,
                const uint32_t* row_blocks = nullptr) {
        matmul_cpu(pool_, as_matmul(w), x, n_tokens, y, align64(mm_scratch_.data()), mm_scratch_.size() - 64, simd_,
                   row_blocks);
    }
    // forward(); with `sel` (Last only) its mask is asked for after the layers and the output
    // layer runs over the mask's blocks. Returns that mask (null: none, or every token).
    const uint32_t* forward_pass(const int32_t* tokens, int n_tokens, int pos0, LogitsMode mode, float* logits,
                                 const TokenSelection* sel);
    void attention(int il, int n_tokens, int pos0);
    void store_kv(int il, int n_tokens, int pos0);
    // f(t) for every token of a batch; row work is independent per token, so splitting it over
    // the pool changes nothing in the results. Fewer than 4 tokens (decode) run inline.
    template <class F>
    void for_tokens(int n_tokens, F&& f) {
        if (n_tokens < 4) {
            for (int t = 0; t < n_tokens; ++t) f(t);
            return;
        }
        pool_.parallel_for(n_tokens, [&](int64_t b, int64_t e, int) {
            for (int64_t t = b; t < e; ++t) f(static_cast<int>(t));
        });
    }

    ModelConfig c_;
    const ModelWeights* w_ = nullptr;
    ThreadPool pool_;
    SimdLevel simd_;              // every kernel's level (CpuOptions::simd)
    const AttnDotKernels& attn_;  // attn_dot_kernels(simd_)
    std::vector<float> inv_freq_;
    int n_ctx_ = 0, n_batch_ = 1;
    KvType kv_type_ = KvType::Int8;
    KVCachePool kv_pool_;      // every LayerKv slice
    ScratchPool scratch_pool_;  // every activation buffer below
    std::vector<LayerKv> kv_;
    // activations, [n_batch][width]
    PoolArray<float> x_, h_, q_, k_, v_, att_, g_, u_;
    PoolArray<float> rope_cs_;  // [n_batch][n_rot]: cos, sin of each token's RoPE angles (rope_angles)
    PoolArray<uint8_t> mm_scratch_;
    PoolArray<float> select_logits_;  // [n_vocab]: forward_select's logits
    // attention tiles (attention())
    PoolArray<float> tile_scores_;  // [n_threads][ATTN_TILE * group][n_ctx]
    PoolArray<float> tile_q_;       // [n_threads][ATTN_TILE * group][head_dim + 2]: queries, row max, sum
    PoolArray<float> tile_row_;     // [n_threads][ATTN_KCHUNK][head_dim] K or V rows in f32
    std::vector<float*> tile_ptrs_;  // [n_threads][ATTN_TILE * group]
    int64_t scratch_bytes_ = 0;
    ActivationTap tap_ = nullptr;
    void* tap_ctx_ = nullptr;
};

void CpuBackend::store_kv(int il, int n_tokens, int pos0) {
    LayerKv& l = kv_[static_cast<size_t>(il)];
    const int64_t hd = c_.head_dim, nkv = c_.n_head_kv, kvd = c_.kv_dim();
    for_tokens(n_tokens, [&](int t) {
        const int64_t pos = pos0 + t;
        for (int64_t h = 0; h < nkv; ++h) {
            const float* ks = k_.data() + t * kvd + h * hd;
            const float* vs = v_.data() + t * kvd + h * hd;
            const size_t off = static_cast<size_t>(pos * kvd + h * hd);
            if (kv_type_ == KvType::Int8) {
                const size_t so = static_cast<size_t>(pos * nkv + h);
                quantize_kv_int8(ks, hd, reinterpret_cast<int8_t*>(l.k.data()) + off, &l.k_scale[so]);
                quantize_kv_int8(vs, hd, reinterpret_cast<int8_t*>(l.v.data()) + off, &l.v_scale[so]);
            } else {
                Half* kd = reinterpret_cast<Half*>(l.k.data()) + off;
                Half* vd = reinterpret_cast<Half*>(l.v.data()) + off;
                for (int64_t d = 0; d < hd; ++d) {
                    kd[d] = to_half(ks[d]);
                    vd[d] = to_half(vs[d]);
                }
            }
        }
    });
}


// Causal grouped-query attention, prefill and decode alike: one task = one KV head x a tile of
// up to ATTN_TILE query tokens, i.e. all group * tile queries that read that KV head. Each K and
// V row is converted to f32 once per task and used by every query of the tile (four at a time).
// A query's arithmetic does not depend on its tile (attn_dot.h), so a prompt prefilled at once
// and the same tokens decoded one by one give identical results. Scores and softmax in f32;
// with FP16 KV the queries and probabilities are rounded to fp16 first, as the reference
// engines' half-precision products do.
void CpuBackend::attention(int il, int n_tokens, int pos0) {
    const LayerKv& l = kv_[static_cast<size_t>(il)];
    const int64_t hd = c_.head_dim, nh = c_.n_head, nkv = c_.n_head_kv, kvd = c_.kv_dim(), qd = c_.q_dim();
    const int64_t group = nh / nkv;
    const int64_t tq_max = attn_tile_queries(c_);
    const int64_t n_tiles = (n_tokens + ATTN_TILE - 1) / ATTN_TILE;
    const float inv_sqrt = 1.0f / std::sqrt(static_cast<float>(hd));
    const bool int8 = kv_type_ == KvType::Int8;
    const AttnDotKernels& ak = attn_;
    pool_.parallel_for(nkv * n_tiles, [&](int64_t b, int64_t e, int tid) {
        float* sc = tile_scores_.data() + static_cast<size_t>(tid) * tq_max * n_ctx_;  // [nq][n_ctx]
        float* qb = tile_q_.data() + static_cast<size_t>(tid) * tq_max * (hd + 2);     // [nq][hd]
        float* mx = qb + tq_max * hd;                                                   // [nq] running max
        float* sum = mx + tq_max;                                                       // [nq]
        float* row = tile_row_.data() + static_cast<size_t>(tid) * ATTN_KCHUNK * hd;    // [KCHUNK][hd]
        float** qp = tile_ptrs_.data() + static_cast<size_t>(tid) * tq_max;
        for (int64_t task = b; task < e; ++task) {
            const int64_t hk = task % nkv, tile = task / nkv;
            const int64_t t0 = tile * ATTN_TILE, t1 = std::min<int64_t>(n_tokens, t0 + ATTN_TILE);
            const int64_t nq = (t1 - t0) * group;  // query qi = (t - t0) * group + g, head hk*group+g
            for (int64_t qi = 0; qi < nq; ++qi) {
                const int64_t t = t0 + qi / group, h = hk * group + qi % group;
                const float* q = q_.data() + t * qd + h * hd;
                float* dst = qb + qi * hd;
                if (int8) {
                    std::memcpy(dst, q, static_cast<size_t>(hd) * sizeof(float));
                } else {
                    for (int64_t d = 0; d < hd; ++d) dst[d] = to_f32(to_half(q[d]));
                }
                qp[qi] = dst;
            }
            const int64_t n_end = pos0 + t1;  // the last query sees positions [0, n_end)
            auto load_row = [&](const PoolArray<uint8_t>& kvbuf, const PoolArray<Half>& scales, int64_t j, float* dst) {
                const size_t off = static_cast<size_t>(j * kvd + hk * hd);
                if (int8) {
                    ak.row_i8(reinterpret_cast<const int8_t*>(kvbuf.data()) + off,
                              to_f32(scales[static_cast<size_t>(j * nkv + hk)]), dst, hd);
                } else {
                    ak.row_f16(reinterpret_cast<const Half*>(kvbuf.data()) + off, dst, hd);
                }
            };
            // first query index that may see position j (causal: t >= j - pos0)
            auto first_query = [&](int64_t j) {
                const int64_t t_min = std::max<int64_t>(t0, j - pos0);
                return (t_min - t0) * group;
            };
            // scores, transposed: sc[j * nq + qi] (contiguous per key position); each query's
            // running max is updated as its scores are made (max is exact: order-free)
            for (int64_t qi = 0; qi < nq; ++qi) {
                mx[qi] = -INFINITY;
                sum[qi] = 0.0f;
            }
            for (int64_t j = 0; j < n_end; ++j) {
                load_row(l.k, l.k_scale, j, row);
                float* sj = sc + j * nq;
                const int64_t q0 = first_query(j);
                int64_t qi = q0;
                for (; qi + 4 <= nq; qi += 4) {
                    ak.dot4_f32(qp + qi, row, hd, sj + qi);
                    for (int k = 0; k < 4; ++k) sj[qi + k] *= inv_sqrt;
                }
                for (; qi < nq; ++qi) sj[qi] = ak.dot1_f32(qp[qi], row, hd) * inv_sqrt;
                ak.max_f32(sj + q0, mx + q0, nq - q0);
            }
            // softmax of every query at once over its causal range
            for (int64_t j = 0; j < n_end; ++j) {
                const int64_t q0 = first_query(j);
                ak.exp_sum_f32(sc + j * nq + q0, mx + q0, sum + q0, nq - q0);
            }
            for (int64_t qi = 0; qi < nq; ++qi) sum[qi] = 1.0f / sum[qi];
            for (int64_t j = 0; j < n_end; ++j) {
                float* sj = sc + j * nq;
                const int64_t q0 = first_query(j);
                ak.mul_f32(sj + q0, sum + q0, nq - q0);
                if (!int8) {
                    for (int64_t qi = q0; qi < nq; ++qi) sj[qi] = to_f32(to_half(sj[qi]));
                }
            }
            for (int64_t qi = 0; qi < nq; ++qi) {
                const int64_t t = t0 + qi / group, h = hk * group + qi % group;
                float* out = att_.data() + t * qd + h * hd;
                std::fill(out, out + hd, 0.0f);
                qp[qi] = out;
            }
            // P.V by chunks of keys: each query's output accumulates the chunk's keys in order
            // (the same per-element FMA sequence as one key at a time)
            for (int64_t j0 = 0; j0 < n_end; j0 += ATTN_KCHUNK) {
                const int64_t j1 = std::min<int64_t>(n_end, j0 + ATTN_KCHUNK);
                for (int64_t j = j0; j < j1; ++j) load_row(l.v, l.v_scale, j, row + (j - j0) * hd);
                for (int64_t qi = first_query(j0); qi < nq; ++qi) {
                    const int64_t jq = std::min<int64_t>(j1, pos0 + t0 + qi / group + 1);  // keys it sees
                    ak.pv_f32(sc + j0 * nq + qi, nq, row, jq - j0, qp[qi], hd);
                }
            }
        }
    });
}

const uint32_t* CpuBackend::forward_pass(const int32_t* tokens, int n_tokens, int pos0, LogitsMode mode, float* logits,
                                         const TokenSelection* sel) {
    JLLM_ASSERT(w_ != nullptr && n_tokens >= 1 && n_tokens <= n_batch_);
    JLLM_ASSERT(pos0 >= 0 && pos0 + n_tokens <= n_ctx_);
    const int64_t E = c_.n_embd, Q = c_.q_dim(), KV = c_.kv_dim(), F = c_.n_ff, hd = c_.head_dim;
    const WeightTensor& emb = w_->token_embd;
    const ToFloatFn emb_to_float = type_traits(emb.type).to_float;
    for (int t = 0; t < n_tokens; ++t) {
        const int32_t id = tokens[t];
        JLLM_ASSERT(id >= 0 && id < emb.rows);
        emb_to_float(emb.data + static_cast<size_t>(id) * emb.row_bytes, x_.data() + t * E, E);
    }
    tap("embd", -1, x_.data(), n_tokens, E);
    for (int t = 0; t < n_tokens; ++t) rope_angles(c_.n_rot, inv_freq_.data(), pos0 + t, rope_cs_.data() + t * c_.n_rot);

    for (int il = 0; il < static_cast<int>(c_.n_layer); ++il) {
        const LayerWeights& L = w_->layers[static_cast<size_t>(il)];
        const float* an = reinterpret_cast<const float*>(L.attn_norm.data);
        for_tokens(n_tokens, [&](int t) { rmsnorm_row(x_.data() + t * E, an, h_.data() + t * E, E, c_.rms_eps); });

        const MatmulWeight qkv[3] = {as_matmul(L.wq), as_matmul(L.wk), as_matmul(L.wv)};
        float* const ys[3] = {q_.data(), k_.data(), v_.data()};
        matmul_multi_cpu(pool_, qkv, 3, h_.data(), n_tokens, ys, align64(mm_scratch_.data()),
                         mm_scratch_.size() - 64, simd_);
        if (L.bq.present()) {
            const float* bq = reinterpret_cast<const float*>(L.bq.data);
            const float* bk = reinterpret_cast<const float*>(L.bk.data);
            const float* bv = reinterpret_cast<const float*>(L.bv.data);
            for (int t = 0; t < n_tokens; ++t) {
                for (int64_t i = 0; i < Q; ++i) q_[t * Q + i] += bq[i];
                for (int64_t i = 0; i < KV; ++i) k_[t * KV + i] += bk[i];
                for (int64_t i = 0; i < KV; ++i) v_[t * KV + i] += bv[i];
            }
        }
        if (L.q_norm.present()) {
            const float* qn = reinterpret_cast<const float*>(L.q_norm.data);
            const float* kn = reinterpret_cast<const float*>(L.k_norm.data);
            for_tokens(n_tokens, [&](int t) {
                for (int64_t h = 0; h < c_.n_head; ++h) {
                    float* p = q_.data() + t * Q + h * hd;
                    rmsnorm_row(p, qn, p, hd, c_.rms_eps);
                }
                for (int64_t h = 0; h < c_.n_head_kv; ++h) {
                    float* p = k_.data() + t * KV + h * hd;
                    rmsnorm_row(p, kn, p, hd, c_.rms_eps);
                }
            });
        }
        for_tokens(n_tokens, [&](int t) {
            const float* cs = rope_cs_.data() + t * c_.n_rot;
            for (int64_t h = 0; h < c_.n_head; ++h) rope_apply_cs(q_.data() + t * Q + h * hd, c_.n_rot, c_.recipe->rope_style, cs);
            for (int64_t h = 0; h < c_.n_head_kv; ++h) rope_apply_cs(k_.data() + t * KV + h * hd, c_.n_rot, c_.recipe->rope_style, cs);
            if (kv_k_rotated(kv_type_, hd)) {  // INT8 keys and their queries rotated (kv_quant.h)
                for (int64_t h = 0; h < c_.n_head; ++h) hadamard_rotate(q_.data() + t * Q + h * hd, hd);
                for (int64_t h = 0; h < c_.n_head_kv; ++h) hadamard_rotate(k_.data() + t * KV + h * hd, hd);
            }
        });
        tap("q", il, q_.data(), n_tokens, Q);
        tap("k", il, k_.data(), n_tokens, KV);
        tap("v", il, v_.data(), n_tokens, KV);
        store_kv(il, n_tokens, pos0);
        attention(il, n_tokens, pos0);
        tap("attn", il, att_.data(), n_tokens, Q);
        // Past its attention (which stored this layer's K/V for every token) the last layer's
        // output is read only by the logits: it runs for the rows whose logits are wanted (the
        // last for LogitsMode::Last, none for None), unless a tap watches every row.
        const int r0 = il + 1 < c_.n_layer || tap_ || mode == LogitsMode::All
                           ? 0
                           : (mode == LogitsMode::Last ? n_tokens - 1 : n_tokens);
        const int nr = n_tokens - r0;
        if (nr == 0) break;
        float* x = x_.data() + r0 * E;
        matmul(L.wo, att_.data() + r0 * Q, nr, h_.data());
        for (int64_t i = 0; i < static_cast<int64_t>(nr) * E; ++i) x[i] += h_[i];
        tap("attn_res", il, x, nr, E);

        const float* fn = reinterpret_cast<const float*>(L.ffn_norm.data);
        for_tokens(nr, [&](int t) { rmsnorm_row(x + t * E, fn, h_.data() + t * E, E, c_.rms_eps); });
        const MatmulWeight gu[2] = {as_matmul(L.w_gate), as_matmul(L.w_up)};
        float* const gys[2] = {g_.data(), u_.data()};
        matmul_multi_cpu(pool_, gu, 2, h_.data(), nr, gys, align64(mm_scratch_.data()), mm_scratch_.size() - 64,
                         simd_);
        for_tokens(nr, [&](int t) {
            for (int64_t i = t * F; i < (t + 1) * F; ++i) {
                const float g = g_[i];
                g_[i] = g / (1.0f + std::exp(-g)) * u_[i];
            }
        });
        matmul(L.w_down, g_.data(), nr, h_.data());
        for (int64_t i = 0; i < static_cast<int64_t>(nr) * E; ++i) x[i] += h_[i];
        tap("out", il, x, nr, E);
    }

    if (mode == LogitsMode::None) return nullptr;
    const float* on = reinterpret_cast<const float*>(w_->output_norm.data);
    const int first = mode == LogitsMode::Last ? n_tokens - 1 : 0;
    const int n_out = n_tokens - first;
    for (int t = 0; t < n_out; ++t) rmsnorm_row(x_.data() + (first + t) * E, on, h_.data() + t * E, E, c_.rms_eps);
    tap("final_norm", -1, h_.data(), n_out, E);
    const uint32_t* rows = sel != nullptr ? sel->mask_now() : nullptr;  // once, after the layers
    matmul(w_->output, h_.data(), n_out, logits, rows);
    return rows;
}

void CpuBackend::read_kv(int pos0, int n_pos, KvBlob& out) const {
    JLLM_ASSERT(pos0 >= 0 && n_pos >= 0 && pos0 + n_pos <= n_ctx_);
    const KvRowBytes rb = kv_row_bytes(c_, kv_type_);
    out.type = kv_type_;
    out.n_pos = n_pos;
    kv_blob_resize(out, rb.layer(n_pos) * kv_.size());
    uint8_t* dst = out.bytes.data();
    auto append = [&](const uint8_t* base, size_t row) {
        std::memcpy(dst, base + pos0 * row, static_cast<size_t>(n_pos) * row);
        dst += static_cast<size_t>(n_pos) * row;
    };
    for (const LayerKv& l : kv_) {
        append(l.k.data(), rb.row);
        if (rb.scale_row) append(reinterpret_cast<const uint8_t*>(l.k_scale.data()), rb.scale_row);
        append(l.v.data(), rb.row);
        if (rb.scale_row) append(reinterpret_cast<const uint8_t*>(l.v_scale.data()), rb.scale_row);
    }
}

void CpuBackend::write_kv_view(int pos0, const KvView& in) {
    check_kv_blob(in, c_, kv_type_, pos0, n_ctx_);
    const KvRowBytes rb = kv_row_bytes(c_, kv_type_);
    const size_t n = static_cast<size_t>(in.n_pos);
    for (size_t l = 0; l < kv_.size(); ++l) {
        LayerKv& k = kv_[l];
        std::memcpy(k.k.data() + pos0 * rb.row, kv_view_part(in, rb, static_cast<int64_t>(l), 0), n * rb.row);
        std::memcpy(k.v.data() + pos0 * rb.row, kv_view_part(in, rb, static_cast<int64_t>(l), 2), n * rb.row);
        if (rb.scale_row) {
            std::memcpy(reinterpret_cast<uint8_t*>(k.k_scale.data()) + pos0 * rb.scale_row,
                        kv_view_part(in, rb, static_cast<int64_t>(l), 1), n * rb.scale_row);
            std::memcpy(reinterpret_cast<uint8_t*>(k.v_scale.data()) + pos0 * rb.scale_row,
                        kv_view_part(in, rb, static_cast<int64_t>(l), 3), n * rb.scale_row);
        }
    }
}

}  // namespace

std::unique_ptr<Backend> create_cpu_backend(const ModelConfig& config, const CpuOptions& options) {
    return std::make_unique<CpuBackend>(config, options);
}

}  // namespace jllm
