// tests/support/cuda_ops_ref.cpp — the scalar CPU twins of the CUDA kernels (cuda_ops.h), the
// oracles of tests/cuda/ops. They follow the CPU backend's definitions (backend/cpu/): weights
// dequantized by quant/quant_ref.h, RMSNorm, RoPE (rope_apply_ref), INT8 KV quantization and
// attention; sums in double where the kernel's order differs from any fixed order.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/cpu/rope.h"
#include "backend/cpu/select.h"
#include "backend/cuda/cuda_ops.h"
#include "core/error.h"
#include "quant/quant_blocks.h"
#include "quant/quant_ref.h"

namespace jllm {
namespace cuda {

float round_f16_sat(float v) { return to_f32(to_half(std::max(-65504.0f, std::min(65504.0f, v)))); }

namespace {

// Row r's weights as kernel_gemm_small's half2 decoder forms them (gemm_small_ref).
void small_gemm_row(GgmlType type, const uint8_t* row, int64_t cols, float* dst) {
    // One rounding of an exact value to fp16, as __hfma2 / __hmul2 round: to float by round-to-odd
    // (exact, or the odd neighbour), then to fp16, is the same as rounding once.
    auto h = [](double v) {
        float f = static_cast<float>(v);
        if (static_cast<double>(f) != v) {
            uint32_t b;
            std::memcpy(&b, &f, sizeof b);
            if ((b & 1u) == 0) f = std::nextafter(f, v > static_cast<double>(f) ? HUGE_VALF : -HUGE_VALF);
        }
        return to_f32(to_half(f));
    };
    for (int64_t b = 0; b < cols / 256; ++b) {
        float* o = dst + b * 256;
        if (type == GgmlType::Q4_K) {
            const BlockQ4_K& k = reinterpret_cast<const BlockQ4_K*>(row)[b];
            for (int j = 0; j < 8; ++j) {
                uint8_t sc, mn;
                get_scale_min_k4(j, k.scales, &sc, &mn);
                const double dl = h(to_f32(k.d) * static_cast<float>(sc)), ml = h(to_f32(k.dmin) * static_cast<float>(mn));
                for (int l = 0; l < 32; ++l) {
                    const int q = (k.qs[(j / 2) * 32 + l] >> (4 * (j % 2))) & 0xF;
                    o[32 * j + l] = h(q * dl - ml);
                }
            }
        } else {
            JLLM_ASSERT(type == GgmlType::Q6_K);
            const BlockQ6_K& k = reinterpret_cast<const BlockQ6_K*>(row)[b];
            for (int e = 0; e < 256; ++e) {
                const int lo = (k.ql[(e / 128) * 64 + e % 64] >> (4 * ((e % 128) / 64))) & 0xF;
                const int hi = (k.qh[(e / 128) * 32 + e % 32] >> (2 * ((e % 128) / 32))) & 3;
                const double dl = h(to_f32(k.d) * static_cast<float>(k.scales[e / 16]));
                o[e] = h(((lo | (hi << 4)) - 32) * dl);
            }
        }
    }
}

// Y = W X with the kernels' epilogues, sums in double; with f16 the weights and activations are
// first rounded as the tensor-core GEMM rounds them (small: the weights as kernel_gemm_small's
// decoder forms them).
void matmul_ref_impl(GgmlType type, const void* w, const void* w2, int64_t rows, int64_t cols, const float* x,
                     int n_tok, float* y, MatOut out, bool f16, bool small = false) {
    const TypeTraits& tt = type_traits(type);
    const size_t rb = row_size(type, cols);
    std::vector<float> xr(x, x + static_cast<size_t>(n_tok) * cols), row(static_cast<size_t>(cols)),
        row2(static_cast<size_t>(cols));
    if (f16) {
        for (float& v : xr) v = round_f16_sat(v);
    }
    auto load_row = [&](const void* m, int64_t r, std::vector<float>& dst) {
        if (small) {
            small_gemm_row(type, static_cast<const uint8_t*>(m) + r * rb, cols, dst.data());
            return;
        }
        tt.to_float(static_cast<const uint8_t*>(m) + r * rb, dst.data(), cols);
        if (f16) {
            for (float& v : dst) v = round_f16_sat(v);
        }
    };
    for (int64_t r = 0; r < rows; ++r) {
        load_row(w, r, row);
        if (out == MatOut::SwiGLU) load_row(w2, r, row2);
        for (int t = 0; t < n_tok; ++t) {
            const float* xt = xr.data() + static_cast<int64_t>(t) * cols;
            double s = 0.0, s2 = 0.0;
            for (int64_t i = 0; i < cols; ++i) s += static_cast<double>(row[i]) * xt[i];
            if (out == MatOut::SwiGLU) {
                for (int64_t i = 0; i < cols; ++i) s2 += static_cast<double>(row2[i]) * xt[i];
            }
            float& o = y[static_cast<int64_t>(t) * rows + r];
            const float g = static_cast<float>(s);
            if (out == MatOut::Store) o = g;
            else if (out == MatOut::Add) o += g;
            else o = g / (1.0f + std::exp(-g)) * static_cast<float>(s2);
        }
    }
}

}  // namespace

void matmul_ref(GgmlType type, const void* w, const void* w2, int64_t rows, int64_t cols, const float* x,
                int n_tok, float* y, MatOut out) {
    matmul_ref_impl(type, w, w2, rows, cols, x, n_tok, y, out, false);
}

void gemm_f16_ref(GgmlType type, const void* w, const void* w2, int64_t rows, int64_t cols, const float* x,
                  int n_tok, float* y, MatOut out) {
    matmul_ref_impl(type, w, w2, rows, cols, x, n_tok, y, out, true);
}

void gemm_small_ref(GgmlType type, const void* w, const void* w2, int64_t rows, int64_t cols, const float* x,
                    int n_tok, float* y, MatOut out) {
    JLLM_ASSERT(type == GgmlType::Q4_K || type == GgmlType::Q6_K);
    matmul_ref_impl(type, w, w2, rows, cols, x, n_tok, y, out, true, true);
}

void gemm_ref(WeightFormat fmt, const void* w, const void* w2, int64_t rows, int64_t cols, const float* x, int n_tok,
              float* y, MatOut out) {
    (gemm_takes_small(fmt, n_tok, out) ? gemm_small_ref : gemm_f16_ref)(fmt.type, w, w2, rows, cols, x, n_tok, y, out);
}

void quantize_act_ref(const float* x, int n_tok, int64_t cols, void* xq, bool halves) {
    int8_t* q = static_cast<int8_t*>(xq);
    float* sc = reinterpret_cast<float*>(static_cast<uint8_t*>(xq) + act_q8_scale_offset(n_tok, cols));
    const int64_t nb = static_cast<int64_t>(n_tok) * (cols / 32);
    const int span = halves ? 16 : 32;  // values sharing a scale
    for (int64_t b = 0; b < nb; ++b) {
        float d[2];
        int sum[2] = {0, 0};
        for (int h0 = 0; h0 < 32; h0 += span) {
            float amax = 0.0f;
            for (int i = h0; i < h0 + span; ++i) amax = std::max(amax, std::fabs(x[b * 32 + i]));
            const float dh = amax / 127.0f;
            const float id = dh > 0.0f ? 1.0f / dh : 0.0f;
            for (int i = h0; i < h0 + span; ++i) {
                const float v = std::nearbyint(x[b * 32 + i] * id);
                const int qi = static_cast<int>(std::max(-127.0f, std::min(127.0f, v)));
                q[b * 32 + i] = static_cast<int8_t>(qi);
                sum[i / 16] += qi;
            }
            d[h0 / 16] = dh;
            if (!halves) d[1] = dh;
        }
        sc[4 * b] = d[0];
        sc[4 * b + 1] = d[0] * static_cast<float>(sum[0]);
        sc[4 * b + 2] = d[1];
        sc[4 * b + 3] = d[1] * static_cast<float>(sum[1]);
    }
}

void quantize_q8k_ref(const float* x, int n_tok, int64_t cols, void* xq) {
    JLLM_ASSERT(cols % 256 == 0);
    int8_t* q = static_cast<int8_t*>(xq);
    uint8_t* rec = static_cast<uint8_t*>(xq) + act_q8k_records_at(n_tok, cols);
    const int64_t nb = static_cast<int64_t>(n_tok) * (cols / 256);
    for (int64_t b = 0; b < nb; ++b) {
        float v[256];
        float amax = 0.0f;
        for (int i = 0; i < 256; ++i) {
            v[i] = round_f16_sat(x[b * 256 + i]);
            amax = std::max(amax, std::fabs(v[i]));
        }
        const float d = amax / 127.0f;
        const float id = d > 0.0f ? 1.0f / d : 0.0f;
        int sums[8] = {};
        for (int i = 0; i < 256; ++i) {
            const int qi = static_cast<int>(std::max(-127.0f, std::min(127.0f, std::nearbyint(v[i] * id))));
            q[b * 256 + i] = static_cast<int8_t>(qi);
            sums[i / 32] += qi;
        }
        uint8_t* r = rec + b * 48;
        std::memset(r, 0, 48);
        Half* h = reinterpret_cast<Half*>(r);
        for (int c = 0; c < 4; ++c) {
            for (int k = 0; k < 2; ++k) {
                const int s = sums[2 * c + k];
                const int hi = static_cast<int>(std::floor(static_cast<double>(s) / 64.0));
                h[4 * c + k] = to_half(static_cast<float>(hi));
                h[4 * c + 2 + k] = to_half(static_cast<float>(s - 64 * hi));
            }
        }
        std::memcpy(r + 32, &d, sizeof d);
    }
}

namespace {

// The int8 kernels' term of one 256-column block of a Q4_K row against act_q8k block a (its
// record rc): v = fma(-dmin, msum, d * float(isum)) and the block's scale d_x in *da, which the
// kernels add as fma(d_x, v, acc) (gemm_s8.cu, gemv_s8.cu).
float s8_block_v(const BlockQ4_K& B, const int8_t* a, const uint8_t* rc, float* da) {
    const Half* hl = reinterpret_cast<const Half*>(rc);
    int64_t isum = 0, msum = 0;
    for (int j = 0; j < 8; ++j) {
        uint8_t sc, mn;
        get_scale_min_k4(j, B.scales, &sc, &mn);
        int dot = 0;
        for (int k = 0; k < 32; ++k) {
            const int code = (B.qs[32 * (j / 2) + k] >> (4 * (j % 2))) & 0xF;
            dot += code * a[32 * j + k];
        }
        isum += static_cast<int64_t>(sc) * dot;
        const int hi = static_cast<int>(to_f32(hl[4 * (j / 2) + j % 2]));
        const int lo = static_cast<int>(to_f32(hl[4 * (j / 2) + 2 + j % 2]));
        msum += static_cast<int64_t>(mn) * (64 * hi + lo);
    }
    std::memcpy(da, rc + 32, sizeof *da);
    return std::fmaf(-to_f32(B.dmin), static_cast<float>(msum),
                     to_f32(B.d) * static_cast<float>(static_cast<int32_t>(isum)));
}

// Row r of Q4_K matrix m (rb bytes a row) for token t of act_q8k xq as the int8 kernels form it:
// k_split parts (blocks k, k + k_split, .. each added in order from zero), then the parts added in
// order. abs_sum (optional): the sum of the blocks' |d_x * v|.
float s8_row_dot(const void* m, size_t rb, int64_t r, int t, int64_t cols, int n_tok, const void* xq, int k_split,
                 float* abs_sum) {
    const int64_t nb = cols / 256;
    const int8_t* q = static_cast<const int8_t*>(xq) + static_cast<int64_t>(t) * cols;
    const uint8_t* rec = static_cast<const uint8_t*>(xq) + act_q8k_records_at(n_tok, cols) + t * nb * 48;
    const BlockQ4_K* blk = reinterpret_cast<const BlockQ4_K*>(static_cast<const uint8_t*>(m) + r * rb);
    float total = 0.0f, mag = 0.0f;
    for (int k = 0; k < k_split; ++k) {
        float acc = 0.0f;
        for (int64_t b = k; b < nb; b += k_split) {
            float da;
            const float v = s8_block_v(blk[b], q + b * 256, rec + b * 48, &da);
            acc = std::fmaf(da, v, acc);
            mag += std::fabs(da * v);
        }
        total = k == 0 ? acc : total + acc;
    }
    if (abs_sum != nullptr) *abs_sum = mag;
    return total;
}

void s8_product_ref(const void* w, const void* w2, int64_t rows, int64_t cols, const void* xq, int n_tok,
                    int k_split, float* y, MatOut out, float* abs_sum) {
    JLLM_ASSERT(cols % 256 == 0 && k_split >= 1 && (out != MatOut::SwiGLU || w2 != nullptr));
    const size_t rb = row_size(GgmlType::Q4_K, cols);
    for (int t = 0; t < n_tok; ++t) {
        for (int64_t r = 0; r < rows; ++r) {
            float* as = abs_sum != nullptr ? abs_sum + static_cast<int64_t>(t) * rows + r : nullptr;
            const float g = s8_row_dot(w, rb, r, t, cols, n_tok, xq, k_split, as);
            float& o = y[static_cast<int64_t>(t) * rows + r];
            if (out == MatOut::SwiGLU) {
                const float u = s8_row_dot(w2, rb, r, t, cols, n_tok, xq, k_split, nullptr);
                o = g / (1.0f + std::exp(-g)) * u;
            } else if (out == MatOut::Add) {
                o += g;
            } else {
                o = g;
            }
        }
    }
}

}  // namespace

void gemm_s8_ref(const void* w, const void* w2, int64_t rows, int64_t cols, const void* xq, int n_tok, float* y,
                 MatOut out, float* abs_sum) {
    s8_product_ref(w, w2, rows, cols, xq, n_tok, 1, y, out, abs_sum);
}

void gemv_s8_ref(const void* w, const void* w2, int64_t rows, int64_t cols, const void* xq, int n_tok, int k_split,
                 float* y, MatOut out) {
    s8_product_ref(w, w2, rows, cols, xq, n_tok, k_split, y, out, nullptr);
}

void gemv_q8_ref(GgmlType type, const void* w, const void* w2, int64_t rows, int64_t cols, const void* xq,
                 int n_tok, float* y, MatOut out) {
    // The activations as the kernel sees them: d * q.
    const int8_t* q = static_cast<const int8_t*>(xq);
    const float* sc = reinterpret_cast<const float*>(static_cast<const uint8_t*>(xq) + act_q8_scale_offset(n_tok, cols));
    std::vector<float> x(static_cast<size_t>(n_tok) * cols);
    for (size_t i = 0; i < x.size(); ++i) x[i] = sc[4 * (i / 32) + (i % 32 < 16 ? 0 : 2)] * static_cast<float>(q[i]);
    matmul_ref(type, w, w2, rows, cols, x.data(), n_tok, y, out);
}

void swiglu_ref(const float* g, const float* u, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
}

void embed_ref(GgmlType type, const void* table, int64_t n_vocab, int64_t n_embd, const int32_t* tokens, int n_tok,
               float* out) {
    const size_t rb = row_size(type, n_embd);
    for (int t = 0; t < n_tok; ++t) {
        float* o = out + static_cast<int64_t>(t) * n_embd;
        if (tokens[t] < 0 || tokens[t] >= n_vocab) {
            std::fill(o, o + n_embd, NAN);
            continue;
        }
        type_traits(type).to_float(static_cast<const uint8_t*>(table) + tokens[t] * rb, o, n_embd);
    }
}

void rmsnorm_ref(const float* x, const float* w, float* y, int n_rows, int64_t n, float eps) {
    for (int r = 0; r < n_rows; ++r) {
        const float* xr = x + r * n;
        double ss = 0.0;
        for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(xr[i]) * xr[i];
        const float scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
        for (int64_t i = 0; i < n; ++i) y[r * n + i] = xr[i] * scale * w[i];
    }
}

namespace {

void quantize_kv_int8_ref(const float* x, int64_t n, int8_t* q, Half* scale) {
    float amax = 0.0f;
    for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
    const Half d16 = to_half(amax / 127.0f);
    const float d = to_f32(d16);
    const float id = d > 0.0f ? 1.0f / d : 0.0f;
    for (int64_t i = 0; i < n; ++i) {
        const float v = std::nearbyint(x[i] * id);
        q[i] = static_cast<int8_t>(std::max(-127.0f, std::min(127.0f, v)));
    }
    *scale = d16;
}

// x <- H x / sqrt(n) through the matrix itself, H[i][j] = (-1)^popcount(i & j), in double
// (independent of the butterfly the backends run).
void hadamard_ref(float* x, int n) {
    std::vector<double> y(static_cast<size_t>(n), 0.0);
    for (int i = 0; i < n; ++i) {
        for (int j = 0; j < n; ++j) y[static_cast<size_t>(i)] += (__builtin_popcount(i & j) % 2 ? -1.0 : 1.0) * x[j];
    }
    const double s = 1.0 / std::sqrt(static_cast<double>(n));
    for (int i = 0; i < n; ++i) x[i] = static_cast<float>(y[static_cast<size_t>(i)] * s);
}

}  // namespace

void qkv_post_ref(const QkvPostParams& p) {
    const int hd = p.head_dim;
    const int64_t q_dim = static_cast<int64_t>(p.n_head) * hd, kv_dim = static_cast<int64_t>(p.n_head_kv) * hd;
    const RopeStyle style = p.neox ? RopeStyle::NeoX : RopeStyle::Normal;
    for (int t = 0; t < p.n_tok; ++t) {
        const int pos = p.pos0 + t;
        for (int kind = 0; kind < 3; ++kind) {
            const int nh = kind == 0 ? p.n_head : p.n_head_kv;
            float* base = kind == 0 ? p.q + t * q_dim : (kind == 1 ? p.k : p.v) + t * kv_dim;
            const float* bias = kind == 0 ? p.bq : kind == 1 ? p.bk : p.bv;
            const float* nw = kind == 0 ? p.q_norm : kind == 1 ? p.k_norm : nullptr;
            for (int h = 0; h < nh; ++h) {
                float* v = base + h * hd;
                if (bias) {
                    for (int i = 0; i < hd; ++i) v[i] += bias[h * hd + i];
                }
                if (nw) rmsnorm_ref(v, nw, v, 1, hd, p.eps);
                if (kind != 2) rope_apply_ref(v, p.n_rot, style, p.inv_freq, pos);
                if (kind != 2 && p.k_rot_scale > 0.0f) hadamard_ref(v, hd);
                if (kind == 0) continue;
                const int64_t off = (static_cast<int64_t>(pos) * p.n_head_kv + h) * hd;
                if (p.kv_type == KvType::Int8) {
                    int8_t* dst = static_cast<int8_t*>(kind == 1 ? p.k_cache : p.v_cache) + off;
                    Half* sc = (kind == 1 ? p.k_scale : p.v_scale) + static_cast<int64_t>(pos) * p.n_head_kv + h;
                    quantize_kv_int8_ref(v, hd, dst, sc);
                } else {
                    Half* dst = static_cast<Half*>(kind == 1 ? p.k_cache : p.v_cache) + off;
                    for (int i = 0; i < hd; ++i) dst[i] = to_half(v[i]);
                }
            }
        }
    }
}

void attention_ref(const AttentionParams& p) {
    const int hd = p.head_dim;
    const int group = p.n_head / p.n_head_kv;
    const int64_t kv_row = static_cast<int64_t>(p.n_head_kv) * hd;
    const bool int8 = p.kv_type == KvType::Int8;
    const float inv_sqrt = 1.0f / std::sqrt(static_cast<float>(hd));
    std::vector<double> sc;
    for (int t = 0; t < p.n_tok; ++t) {
        const int n_kv = p.pos0 + t + 1;
        sc.assign(static_cast<size_t>(n_kv), 0.0);
        for (int h = 0; h < p.n_head; ++h) {
            const int hk = h / group;
            const float* q = p.q + (static_cast<int64_t>(t) * p.n_head + h) * hd;
            double mx = -INFINITY;
            for (int j = 0; j < n_kv; ++j) {
                const int64_t off = j * kv_row + static_cast<int64_t>(hk) * hd;
                double s = 0.0;
                for (int d = 0; d < hd; ++d) {
                    const float kv = int8 ? static_cast<float>(static_cast<const int8_t*>(p.k_cache)[off + d])
                                          : to_f32(static_cast<const Half*>(p.k_cache)[off + d]);
                    s += static_cast<double>(q[d]) * kv;
                }
                if (int8) s *= to_f32(p.k_scale[static_cast<int64_t>(j) * p.n_head_kv + hk]);
                s *= inv_sqrt;
                sc[static_cast<size_t>(j)] = s;
                mx = std::max(mx, s);
            }
            double sum = 0.0;
            for (int j = 0; j < n_kv; ++j) {
                sc[static_cast<size_t>(j)] = std::exp(sc[static_cast<size_t>(j)] - mx);
                sum += sc[static_cast<size_t>(j)];
            }
            float* out = p.out + (static_cast<int64_t>(t) * p.n_head + h) * hd;
            for (int d = 0; d < hd; ++d) {
                double a = 0.0;
                for (int j = 0; j < n_kv; ++j) {
                    const int64_t off = j * kv_row + static_cast<int64_t>(hk) * hd;
                    double pj = sc[static_cast<size_t>(j)] / sum;
                    float vv;
                    if (int8) {
                        pj *= to_f32(p.v_scale[static_cast<int64_t>(j) * p.n_head_kv + hk]);
                        vv = static_cast<float>(static_cast<const int8_t*>(p.v_cache)[off + d]);
                    } else {
                        vv = to_f32(static_cast<const Half*>(p.v_cache)[off + d]);
                    }
                    a += pj * vv;
                }
                out[d] = static_cast<float>(a);
            }
        }
    }
}

int32_t argmax_ref(const float* x, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; ++i) {
        if (x[i] > x[best]) best = i;
    }
    return static_cast<int32_t>(best);
}

void apply_token_mask_ref(float* x, int64_t n, const uint32_t* mask) {
    for (int64_t i = 0; i < n; ++i) {
        if (((mask[i >> 5] >> (i & 31)) & 1u) == 0) x[i] = -INFINITY;
    }
}

void topk_ref(const float* x, int64_t n, int k, float* vals, int32_t* ids) {
    select_top_k(x, n, k, nullptr, ids, vals);
}

}  // namespace cuda
}  // namespace jllm
