// backend/cuda/attention.cu — causal grouped-query attention over the INT8 or FP16 KV cache.
//
// One warp per (query head, token, split). Keys are visited in tiles of 32 (one key per lane:
// the lane reads its key row with 16-byte loads and dots it with the query held in shared
// memory); an online softmax keeps the running max m and sum l; the V tile is then folded into
// the output, lane l owning dims l, l+32, ... (coalesced V reads). Prefill (many tokens) runs
// one split per (head, token). Decode over a long context splits the KV length into
// ATTN_SPLIT_KEYS-sized ranges, each warp writing its unnormalized (m, l, acc) to the work
// buffer, and kernel_attention_combine merges them. Scores: (q . k) * k_scale / sqrt(head_dim),
// as the CPU backend computes them.
#include <cmath>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"
#include "core/error.h"

namespace jllm {
namespace cuda {

namespace {

constexpr int MAX_HD = 256;
constexpr int MAX_DPL = MAX_HD / WARP;  // output dims per lane

// Keys of split s: [s * per, min(n_kv, (s + 1) * per)).
template <bool INT8>
__global__ void __launch_bounds__(WARP) kernel_attention(AttentionParams p, int n_split, int per_split) {
    __shared__ float qs[MAX_HD];
    const int h = blockIdx.x, t = blockIdx.y, s = blockIdx.z;
    const int lane = threadIdx.x;
    const int hd = p.head_dim, nd = hd / WARP;
    const int hk = h / (p.n_head / p.n_head_kv);
    const int n_kv = p.pos0 + t + 1;
    const int k_begin = s * per_split;
    const int k_end = min(n_kv, k_begin + per_split);
    const float* q = p.q + (static_cast<int64_t>(t) * p.n_head + h) * hd;
    for (int i = lane; i < hd; i += WARP) qs[i] = q[i];
    __syncwarp();
    const float inv_sqrt = 1.0f / sqrtf(static_cast<float>(hd));
    const int64_t kv_row = static_cast<int64_t>(p.n_head_kv) * hd;  // elements per position

    float m = -INFINITY, l = 0.0f;
    float acc[MAX_DPL];
#pragma unroll
    for (int i = 0; i < MAX_DPL; ++i) acc[i] = 0.0f;

    for (int base = k_begin; base < k_end; base += WARP) {
        const int j = base + lane;
        const bool valid = j < k_end;
        float sc = -INFINITY;
        float vscale = 1.0f;
        if (valid) {
            float dot = 0.0f;
            const int64_t off = j * kv_row + static_cast<int64_t>(hk) * hd;
            if (INT8) {
                const uint8_t* kr = static_cast<const uint8_t*>(p.k_cache) + off;
                for (int d0 = 0; d0 < hd; d0 += 16) {
                    const uint4 v = ld16(kr + d0);
#pragma unroll
                    for (int b = 0; b < 16; ++b) {
                        dot += qs[d0 + b] * static_cast<float>(static_cast<int8_t>(byte_of(v, b)));
                    }
                }
                const int64_t si = static_cast<int64_t>(j) * p.n_head_kv + hk;
                dot *= ldh(p.k_scale[si]);
                vscale = ldh(p.v_scale[si]);
            } else {
                const uint8_t* kr = static_cast<const uint8_t*>(p.k_cache) + off * 2;
                for (int d0 = 0; d0 < hd; d0 += 8) {
                    const uint4 v = ld16(kr + 2 * d0);
                    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
                    for (int b = 0; b < 4; ++b) {
                        dot += qs[d0 + 2 * b] * fp16_to_f32(static_cast<uint16_t>(w[b] & 0xFFFFu));
                        dot += qs[d0 + 2 * b + 1] * fp16_to_f32(static_cast<uint16_t>(w[b] >> 16));
                    }
                }
            }
            sc = dot * inv_sqrt;
        }
        const float m_new = fmaxf(m, warp_max(sc));  // finite: lane 0's key is always valid
        const float corr = expf(m - m_new);
        const float pr = valid ? expf(sc - m_new) : 0.0f;
        l = l * corr + warp_sum(pr);
        m = m_new;
#pragma unroll
        for (int i = 0; i < MAX_DPL; ++i) acc[i] *= corr;
        const float pv = pr * vscale;
        const int n_here = min(WARP, k_end - base);
        for (int jj = 0; jj < n_here; ++jj) {
            const float pj = __shfl_sync(0xffffffffu, pv, jj);
            const int64_t off = (base + jj) * kv_row + static_cast<int64_t>(hk) * hd;
#pragma unroll
            for (int i = 0; i < MAX_DPL; ++i) {
                if (i < nd) {
                    const int d = lane + WARP * i;
                    const float vv = INT8 ? static_cast<float>(static_cast<const int8_t*>(p.v_cache)[off + d])
                                          : fp16_to_f32(static_cast<const Half*>(p.v_cache)[off + d].bits);
                    acc[i] += pj * vv;
                }
            }
        }
    }

    if (n_split == 1) {
        float* out = p.out + (static_cast<int64_t>(t) * p.n_head + h) * hd;
        const float inv_l = 1.0f / l;
#pragma unroll
        for (int i = 0; i < MAX_DPL; ++i) {
            if (i < nd) out[lane + WARP * i] = acc[i] * inv_l;
        }
    } else {
        // work: [n_tok][n_head][max_split][head_dim + 2] = (acc..., m, l); an empty split
        // leaves m = -inf, l = 0.
        float* w = p.work + ((static_cast<int64_t>(t) * p.n_head + h) * p.max_split + s) * (hd + 2);
#pragma unroll
        for (int i = 0; i < MAX_DPL; ++i) {
            if (i < nd) w[lane + WARP * i] = acc[i];
        }
        if (lane == 0) {
            w[hd] = m;
            w[hd + 1] = l;
        }
    }
}

// One block of head_dim threads per (head, token).
__global__ void kernel_attention_combine(AttentionParams p, int n_split) {
    const int h = blockIdx.x, t = blockIdx.y, d = threadIdx.x;
    const int hd = p.head_dim;
    const float* w = p.work + (static_cast<int64_t>(t) * p.n_head + h) * p.max_split * (hd + 2);
    float mx = -INFINITY;
    for (int s = 0; s < n_split; ++s) mx = fmaxf(mx, w[s * (hd + 2) + hd]);
    float l = 0.0f, a = 0.0f;
    for (int s = 0; s < n_split; ++s) {
        const float* ws = w + s * (hd + 2);
        const float f = ws[hd + 1] > 0.0f ? expf(ws[hd] - mx) : 0.0f;
        l += ws[hd + 1] * f;
        a += ws[d] * f;
    }
    p.out[(static_cast<int64_t>(t) * p.n_head + h) * hd + d] = a / l;
}

}  // namespace

size_t attention_work_floats(int n_tok, int n_head, int head_dim, int max_split) {
    return static_cast<size_t>(n_tok) * n_head * max_split * (head_dim + 2);
}

void launch_attention(const AttentionParams& p, void* stream) {
    JLLM_ASSERT(p.n_tok >= 1 && p.pos0 >= 0 && p.n_head_kv >= 1 && p.n_head % p.n_head_kv == 0);
    JLLM_ASSERT(p.head_dim % WARP == 0 && p.head_dim <= MAX_HD);
    const int max_kv = p.pos0 + p.n_tok;
    int n_split = 1;
    if (p.n_tok == 1 && p.max_split > 1 && p.work != nullptr) {
        n_split = std::min(p.max_split, (max_kv + ATTN_SPLIT_KEYS - 1) / ATTN_SPLIT_KEYS);
    }
    const int per_split = (max_kv + n_split - 1) / n_split;
    const dim3 grid(static_cast<unsigned>(p.n_head), static_cast<unsigned>(p.n_tok), static_cast<unsigned>(n_split));
    if (p.kv_type == KvType::Int8) {
        kernel_attention<true><<<grid, WARP, 0, as_stream(stream)>>>(p, n_split, per_split);
    } else {
        kernel_attention<false><<<grid, WARP, 0, as_stream(stream)>>>(p, n_split, per_split);
    }
    JLLM_CUDA_LAUNCH_CHECK("kernel_attention");
    if (n_split > 1) {
        const dim3 cgrid(static_cast<unsigned>(p.n_head), static_cast<unsigned>(p.n_tok));
        kernel_attention_combine<<<cgrid, p.head_dim, 0, as_stream(stream)>>>(p, n_split);
        JLLM_CUDA_LAUNCH_CHECK("kernel_attention_combine");
    }
}

}  // namespace cuda
}  // namespace jllm
