// backend/cuda/attention.cu — causal grouped-query attention over the INT8 or FP16 KV cache.
//
// A block serves one KV head and a tile of QT query tokens: its warps are the group's query
// heads x the tile's tokens (warp w: head hk * group + w % group, token tile * QT + w / group),
// so each K/V tile, loaded once into shared memory with coalesced 16-byte loads, serves every
// query that reads that KV head. Keys go in tiles of 32: lane l scores key l against its warp's
// query (held in shared memory), an online softmax keeps the running max m and sum l, and the V
// tile is folded into the output, lane l owning dims l, l+32, ... Causality: each warp stops at
// its own token's last position; the block loads up to the furthest one.
// Decode over a long context splits the KV length into ATTN_SPLIT_KEYS-sized ranges (grid z);
// each warp writes its unnormalized (m, l, acc) to the work buffer and
// kernel_attention_combine merges them. Scores: (q . k) * k_scale / sqrt(head_dim), as the CPU
// backend computes them.
#include <algorithm>
#include <cmath>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"
#include "core/error.h"

namespace jllm {
namespace cuda {

namespace {

constexpr int MAX_HD = 256;
constexpr int MAX_DPL = MAX_HD / WARP;  // output dims per lane
constexpr int KT = 32;                  // keys per tile
constexpr int MAX_WARPS = 32;

// Shared memory of one block: q [warps][head_dim] f32 | K tile [KT][row + 16 pad] |
// V tile [KT][row] | k scales [KT] f32 | v scales [KT] f32. The K rows are padded by 16 bytes
// so the lanes' 16-byte reads of 32 different rows fall in different banks.
size_t attention_smem_bytes(int warps, int head_dim, bool int8) {
    const size_t row = static_cast<size_t>(head_dim) * (int8 ? 1 : 2);
    return static_cast<size_t>(warps) * head_dim * sizeof(float) + KT * (row + 16) + KT * row + 2 * KT * sizeof(float);
}

// Keys per split for a KV length of n_kv over at most max_split splits, and the splits used.
__host__ __device__ __forceinline__ void split_plan(int n_kv, int max_split, int* per_split, int* n_used) {
    int per = (n_kv + max_split - 1) / max_split;
    per = (per + KT - 1) / KT * KT;
    if (max_split > 1 && per < ATTN_MIN_SPLIT_KEYS) per = ATTN_MIN_SPLIT_KEYS;
    *per_split = per;
    *n_used = (n_kv + per - 1) / per;
}

// Keys of split s: [s * per_split, min(n_kv, (s + 1) * per_split)); qt tokens per block.
// n_split: the grid's splits (1: no split, write `out` directly).
template <bool INT8>
__global__ void __launch_bounds__(MAX_WARPS * WARP)
    kernel_attention(AttentionParams p, int n_split, int qt) {
    extern __shared__ __align__(16) uint8_t smem[];
    const int group = p.n_head / p.n_head_kv;
    const int hd = p.head_dim, nd = hd / WARP;
    const int row = hd * (INT8 ? 1 : 2);  // bytes of one cached head vector
    const int kstride = row + 16;
    const int n_warps = blockDim.x / WARP;
    float* qs = reinterpret_cast<float*>(smem);                            // [n_warps][hd]
    uint8_t* kt = smem + static_cast<size_t>(n_warps) * hd * sizeof(float);  // [KT][kstride]
    uint8_t* vt = kt + KT * kstride;                                         // [KT][row]
    float* ksc = reinterpret_cast<float*>(vt + KT * row);                    // [KT]
    float* vsc = ksc + KT;                                                   // [KT]

    const int hk = blockIdx.x, s = blockIdx.z;
    if (p.pos_dev) p.pos0 = *p.pos_dev;
    int per_split, n_used;
    split_plan(p.pos0 + p.n_tok, n_split, &per_split, &n_used);
    if (s >= n_used) return;  // block-uniform, before any barrier
    const int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
    const int h = hk * group + warp % group;
    const int t = blockIdx.y * qt + warp / group;
    const bool active = t < p.n_tok;
    const int k_begin = s * per_split;
    // this warp's keys, and the block's (its last token reaches furthest)
    const int k_end = active ? min(p.pos0 + t + 1, k_begin + per_split) : k_begin;
    const int t_last = min(p.n_tok - 1, static_cast<int>(blockIdx.y) * qt + qt - 1);
    const int k_end_block = min(p.pos0 + t_last + 1, k_begin + per_split);

    float* q_s = qs + warp * hd;
    if (active) {
        const float* q = p.q + (static_cast<int64_t>(t) * p.n_head + h) * hd;
        for (int i = lane; i < hd; i += WARP) q_s[i] = q[i];
    }
    const float inv_sqrt = 1.0f / sqrtf(static_cast<float>(hd));
    const uint8_t* kc = static_cast<const uint8_t*>(p.k_cache);
    const uint8_t* vc = static_cast<const uint8_t*>(p.v_cache);

    float m = -INFINITY, l = 0.0f;
    float acc[MAX_DPL];
#pragma unroll
    for (int i = 0; i < MAX_DPL; ++i) acc[i] = 0.0f;

    for (int base = k_begin; base < k_end_block; base += KT) {
        const int n_tile = min(KT, k_end_block - base);
        __syncthreads();  // the previous tile is consumed (and q_s is written, first time)
        const int units = row / 16;  // 16-byte units per row
        for (int u = threadIdx.x; u < n_tile * units; u += blockDim.x) {
            const int j = u / units, c = u % units;
            const int64_t off = (static_cast<int64_t>(base + j) * p.n_head_kv + hk) * row + c * 16;
            *reinterpret_cast<uint4*>(kt + j * kstride + c * 16) = ld16(kc + off);
            *reinterpret_cast<uint4*>(vt + j * row + c * 16) = ld16(vc + off);
        }
        if (INT8 && static_cast<int>(threadIdx.x) < n_tile) {
            const int64_t si = static_cast<int64_t>(base + threadIdx.x) * p.n_head_kv + hk;
            ksc[threadIdx.x] = ldh(p.k_scale[si]);
            vsc[threadIdx.x] = ldh(p.v_scale[si]);
        }
        __syncthreads();
        if (base >= k_end) continue;  // this warp's token ends before this tile (warp-uniform)

        const int n_here = min(KT, k_end - base);
        const bool valid = lane < n_here;
        float sc = -INFINITY;
        float vscale = 1.0f;
        if (valid) {
            const uint8_t* kr = kt + lane * kstride;
            float dot = 0.0f;
            if (INT8) {
                for (int d0 = 0; d0 < hd; d0 += 16) {
                    const uint4 v = *reinterpret_cast<const uint4*>(kr + d0);
#pragma unroll
                    for (int b = 0; b < 16; ++b) {
                        dot += q_s[d0 + b] * static_cast<float>(static_cast<int8_t>(byte_of(v, b)));
                    }
                }
                dot *= ksc[lane];
                vscale = vsc[lane];
            } else {
                for (int d0 = 0; d0 < hd; d0 += 8) {
                    const uint4 v = *reinterpret_cast<const uint4*>(kr + 2 * d0);
                    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
                    for (int b = 0; b < 4; ++b) {
                        dot += q_s[d0 + 2 * b] * fp16_to_f32(static_cast<uint16_t>(w[b] & 0xFFFFu));
                        dot += q_s[d0 + 2 * b + 1] * fp16_to_f32(static_cast<uint16_t>(w[b] >> 16));
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
        for (int jj = 0; jj < n_here; ++jj) {
            const float pj = __shfl_sync(0xffffffffu, pv, jj);
            const uint8_t* vr = vt + jj * row;
#pragma unroll
            for (int i = 0; i < MAX_DPL; ++i) {
                if (i < nd) {
                    const int d = lane + WARP * i;
                    const float vv = INT8 ? static_cast<float>(static_cast<int8_t>(vr[d]))
                                          : fp16_to_f32(reinterpret_cast<const uint16_t*>(vr)[d]);
                    acc[i] += pj * vv;
                }
            }
        }
    }
    if (!active) return;

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

// One block of head_dim threads per (head, token); with out_q8, warp w also quantizes dims
// 32w..32w+31 (one act_q8 block).
__global__ void kernel_attention_combine(AttentionParams p, int n_split) {
    const int h = blockIdx.x, t = blockIdx.y, d = threadIdx.x;
    const int hd = p.head_dim;
    if (p.pos_dev) p.pos0 = *p.pos_dev;
    int per_split, n_used;
    split_plan(p.pos0 + p.n_tok, n_split, &per_split, &n_used);
    const float* w = p.work + (static_cast<int64_t>(t) * p.n_head + h) * p.max_split * (hd + 2);
    float mx = -INFINITY;
    for (int s = 0; s < n_used; ++s) mx = fmaxf(mx, w[s * (hd + 2) + hd]);
    float l = 0.0f, a = 0.0f;
    for (int s = 0; s < n_used; ++s) {
        const float* ws = w + s * (hd + 2);
        const float f = ws[hd + 1] > 0.0f ? expf(ws[hd] - mx) : 0.0f;
        l += ws[hd + 1] * f;
        a += ws[d] * f;
    }
    const int64_t o = (static_cast<int64_t>(t) * p.n_head + h) * hd + d;
    const float v = a / l;
    p.out[o] = v;
    if (p.out_q8) {
        int8_t* q = static_cast<int8_t*>(p.out_q8);
        const int64_t width = static_cast<int64_t>(p.n_head) * hd;
        float4* sc = reinterpret_cast<float4*>(q + act_q8_scales_at(p.n_tok, width));
        quantize_block_warp(v, d % WARP, q + (o - d % WARP), sc + o / 32);
    }
}

}  // namespace

size_t attention_work_floats(int n_tok, int n_head, int head_dim, int max_split) {
    return static_cast<size_t>(n_tok) * n_head * max_split * (head_dim + 2);
}

void launch_attention(const AttentionParams& p, void* stream) {
    JLLM_ASSERT(p.n_tok >= 1 && p.pos0 >= 0 && p.n_head_kv >= 1 && p.n_head % p.n_head_kv == 0);
    JLLM_ASSERT(p.head_dim % WARP == 0 && p.head_dim <= MAX_HD);
    const int group = p.n_head / p.n_head_kv;
    if (group > MAX_WARPS) throw JllmError(strfmt("cuda: attention supports at most %d query heads per KV head", MAX_WARPS));
    // Splits in the grid: graph mode (pos0 only known on the device) sizes the grid for
    // max_split and the kernels skip what the position does not need; otherwise the plan is
    // made here.
    int n_split = 1;
    const bool can_split = p.n_tok == 1 && p.max_split > 1 && p.work != nullptr;
    if (p.pos_dev != nullptr) {
        JLLM_ASSERT_MSG(p.n_tok == 1, "attention: device-side position is for single-token decode");
        n_split = can_split ? p.max_split : 1;
    } else if (can_split) {
        int per = 0, used = 0;
        split_plan(p.pos0 + p.n_tok, p.max_split, &per, &used);
        n_split = used > 1 ? p.max_split : 1;
    }
    // Query tokens per block: up to 16 warps of group heads x tokens.
    const int qt = std::max(1, std::min(p.n_tok, 16 / group));
    const int warps = group * qt;
    const bool int8 = p.kv_type == KvType::Int8;
    const size_t smem = attention_smem_bytes(warps, p.head_dim, int8);
    const dim3 grid(static_cast<unsigned>(p.n_head_kv), static_cast<unsigned>((p.n_tok + qt - 1) / qt),
                    static_cast<unsigned>(n_split));
    auto launch = [&](auto kernel) {
        if (smem > 48 * 1024) {  // beyond the default dynamic limit: opt in (SM 8.7 and 9.0 allow more)
            JLLM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 static_cast<int>(smem)));
        }
        kernel<<<grid, warps * WARP, smem, as_stream(stream)>>>(p, n_split, qt);
    };
    if (int8) launch(kernel_attention<true>);
    else launch(kernel_attention<false>);
    JLLM_CUDA_LAUNCH_CHECK("kernel_attention");
    if (n_split > 1) {
        const dim3 cgrid(static_cast<unsigned>(p.n_head), static_cast<unsigned>(p.n_tok));
        kernel_attention_combine<<<cgrid, p.head_dim, 0, as_stream(stream)>>>(p, n_split);
        JLLM_CUDA_LAUNCH_CHECK("kernel_attention_combine");
    } else if (p.out_q8 != nullptr) {
        launch_quantize_act(p.out, p.n_tok, static_cast<int64_t>(p.n_head) * p.head_dim, p.out_q8, stream);
    }
}

}  // namespace cuda
}  // namespace jllm
