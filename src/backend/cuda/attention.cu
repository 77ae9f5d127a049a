// backend/cuda/attention.cu — causal grouped-query attention over the INT8 or FP16 KV cache.
//
// A block serves one KV head and a tile of QT query tokens: its warps are the group's query
// heads x the tile's tokens (warp w: head hk * group + w % group, token tile * QT + w / group),
// so each K/V tile, loaded once into shared memory with coalesced 16-byte loads, serves every
// query that reads that KV head. Keys go in tiles of 32: lane l scores key l against its warp's
// query (held in shared memory), an online softmax keeps the running max m and sum l, and the V
// tile is folded into the output, lane l owning dims l, l+32, ... Causality: each warp stops at
// its own token's last position; the block loads up to the furthest one.
// Decode splits the KV length into up to max_split ranges (grid z) of >= ATTN_MIN_SPLIT_KEYS keys
// (>= one chunk, 32 x warps keys, for the group-shared INT8 decode kernel below); each split
// writes its unnormalized (m, l, acc) per head to the work buffer and kernel_attention_combine
// merges them. Scores: (q . k) * k_scale / sqrt(head_dim), as the CPU backend computes them.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/qkv_post.cuh"
#include "core/error.h"

namespace jllm {
namespace cuda {

namespace {

AttnKernel g_attn_kernel = AttnKernel::Auto;
int g_decode_warps = ATTN_DECODE_WARPS_DEFAULT;  // warps per block of the group-shared decode kernel

constexpr int MAX_HD = 256;
constexpr int MAX_DPL = MAX_HD / WARP;  // output dims per lane
constexpr int KT = 32;                  // keys per tile
constexpr int MAX_WARPS = 32;
constexpr int ATTN_MAX_SPLIT_GRID = 1024;  // splits a combine block can weigh (shared memory)

// Shared memory of one block: q [warps][head_dim] | K tile [KT][head_dim + 4] | V tile
// [KT][head_dim] | k scales [KT] | v scales [KT], all f32. The cached K/V bytes are converted
// to f32 once when the tile is loaded (not once per query head and token that reads them). The
// K rows are padded by 4 floats so the lanes' 16-byte reads of 32 different rows fall in
// different banks.
size_t attention_smem_bytes(int warps, int head_dim, bool /*int8*/) {
    const size_t hd = static_cast<size_t>(head_dim);
    return (static_cast<size_t>(warps) * hd + KT * (hd + 4) + KT * hd + 2 * KT) * sizeof(float);
}

// Keys per split for a KV length of n_kv over at most max_split splits of at least min_keys keys
// (a multiple of 32), and the splits used.
__host__ __device__ __forceinline__ void split_plan(int n_kv, int max_split, int min_keys, int* per_split,
                                                   int* n_used) {
    int per = (n_kv + max_split - 1) / max_split;
    per = (per + KT - 1) / KT * KT;
    if (max_split > 1 && per < min_keys) per = min_keys;
    *per_split = per;
    *n_used = (n_kv + per - 1) / per;
}

// The warp's result for query head h of token t over split s (lane l holds dims l, l + 32, ...):
// without a split the normalized output; else (acc..., m, l) into the work buffer
// [n_tok][n_head][max_split][head_dim + 2] (an empty split leaves m = -inf, l = 0).
__device__ __forceinline__ void store_warp_result(const AttentionParams& p, int t, int h, int s, int n_split,
                                                  const float (&acc)[MAX_DPL], float m, float l, int lane) {
    const int hd = p.head_dim, nd = hd / WARP;
    if (n_split == 1) {
        float* out = p.out + (static_cast<int64_t>(t) * p.n_head + h) * hd;
        const float inv_l = 1.0f / l;
#pragma unroll
        for (int i = 0; i < MAX_DPL; ++i) {
            if (i < nd) out[lane + WARP * i] = acc[i] * inv_l;
        }
    } else {
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

// Keys of split s: [s * per_split, min(n_kv, (s + 1) * per_split)); qt tokens per block.
// n_split: the grid's splits (1: no split, write `out` directly).
template <bool INT8>
__global__ void __launch_bounds__(MAX_WARPS * WARP)
    kernel_attention(AttentionParams p, int n_split, int qt) {
    extern __shared__ __align__(16) uint8_t smem[];
    const int group = p.n_head / p.n_head_kv;
    const int hd = p.head_dim, nd = hd / WARP;
    const int row = hd * (INT8 ? 1 : 2);  // bytes of one cached head vector
    const int kstride = hd + 4;           // floats
    const int n_warps = blockDim.x / WARP;
    float* qs = reinterpret_cast<float*>(smem);  // [n_warps][hd]
    float* kt = qs + n_warps * hd;               // [KT][kstride]
    float* vt = kt + KT * kstride;               // [KT][hd]
    float* ksc = vt + KT * hd;                   // [KT]
    float* vsc = ksc + KT;                       // [KT]

    const int hk = blockIdx.x, s = blockIdx.z;
    if (p.pos_dev) p.pos0 = *p.pos_dev;
    int per_split, n_used;
    split_plan(p.pos0 + p.n_tok, n_split, ATTN_MIN_SPLIT_KEYS, &per_split, &n_used);
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
        if (INT8 && static_cast<int>(threadIdx.x) < n_tile) {  // scales first: their loads overlap the tile's
            const int64_t si = static_cast<int64_t>(base + threadIdx.x) * p.n_head_kv + hk;
            ksc[threadIdx.x] = ldh(p.k_scale[si]);
            vsc[threadIdx.x] = ldh(p.v_scale[si]);
        }
        // Two units per thread per round, both loads issued before either is converted.
        const int total = n_tile * units;
        for (int u0 = threadIdx.x; u0 < total; u0 += 2 * blockDim.x) {
            uint4 kv[2], vv[2];
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                const int u = u0 + r * static_cast<int>(blockDim.x);
                if (u < total) {
                    const int64_t off = (static_cast<int64_t>(base + u / units) * p.n_head_kv + hk) * row + (u % units) * 16;
                    kv[r] = ld16(kc + off);
                    vv[r] = ld16(vc + off);
                }
            }
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                const int u = u0 + r * static_cast<int>(blockDim.x);
                if (u >= total) continue;
                const int j = u / units, c = u % units;
                constexpr int EPU = INT8 ? 16 : 8;  // elements per 16-byte unit
                float* kd = kt + j * kstride + c * EPU;
                float* vd = vt + j * hd + c * EPU;
#pragma unroll
                for (int e = 0; e < EPU; e += 4) {
                    float4 kf, vf;
                    if (INT8) {
                        kf = make_float4(static_cast<int8_t>(byte_of(kv[r], e)), static_cast<int8_t>(byte_of(kv[r], e + 1)),
                                         static_cast<int8_t>(byte_of(kv[r], e + 2)),
                                         static_cast<int8_t>(byte_of(kv[r], e + 3)));
                        vf = make_float4(static_cast<int8_t>(byte_of(vv[r], e)), static_cast<int8_t>(byte_of(vv[r], e + 1)),
                                         static_cast<int8_t>(byte_of(vv[r], e + 2)),
                                         static_cast<int8_t>(byte_of(vv[r], e + 3)));
                    } else {
                        const uint32_t kw[4] = {kv[r].x, kv[r].y, kv[r].z, kv[r].w};
                        const uint32_t vw[4] = {vv[r].x, vv[r].y, vv[r].z, vv[r].w};
                        const int w0 = e / 2;
                        kf = make_float4(fp16_to_f32(static_cast<uint16_t>(kw[w0] & 0xFFFFu)),
                                         fp16_to_f32(static_cast<uint16_t>(kw[w0] >> 16)),
                                         fp16_to_f32(static_cast<uint16_t>(kw[w0 + 1] & 0xFFFFu)),
                                         fp16_to_f32(static_cast<uint16_t>(kw[w0 + 1] >> 16)));
                        vf = make_float4(fp16_to_f32(static_cast<uint16_t>(vw[w0] & 0xFFFFu)),
                                         fp16_to_f32(static_cast<uint16_t>(vw[w0] >> 16)),
                                         fp16_to_f32(static_cast<uint16_t>(vw[w0 + 1] & 0xFFFFu)),
                                         fp16_to_f32(static_cast<uint16_t>(vw[w0 + 1] >> 16)));
                    }
                    *reinterpret_cast<float4*>(kd + e) = kf;
                    *reinterpret_cast<float4*>(vd + e) = vf;
                }
            }
        }
        __syncthreads();
        if (base >= k_end) continue;  // this warp's token ends before this tile (warp-uniform)

        const int n_here = min(KT, k_end - base);
        const bool valid = lane < n_here;
        float sc = -INFINITY;
        float vscale = 1.0f;
        if (valid) {
            const float* kr = kt + lane * kstride;
            float dot = 0.0f;
            for (int d0 = 0; d0 < hd; d0 += 4) {
                const float4 kv = *reinterpret_cast<const float4*>(kr + d0);
                const float4 qv = *reinterpret_cast<const float4*>(q_s + d0);
                dot += qv.x * kv.x + qv.y * kv.y + qv.z * kv.z + qv.w * kv.w;
            }
            if (INT8) {
                dot *= ksc[lane];
                vscale = vsc[lane];
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
            const float* vr = vt + jj * hd;
#pragma unroll
            for (int i = 0; i < MAX_DPL; ++i) {
                if (i < nd) acc[i] += pj * vr[lane + WARP * i];
            }
        }
    }
    if (!active) return;

    store_warp_result(p, t, h, s, n_split, acc, m, l, lane);
}

// Decode (one token) over the INT8 cache with the keys spread over the warps and the group's
// query heads sharing each key's conversion: block = (KV head, split) of W warps; the split goes
// through in chunks of 32 W keys, warp w taking keys 32 w .. 32 w + 31 of a chunk. A chunk's K
// and V rows are copied raw into shared memory by cp.async. Each warp keeps an online softmax
// (m, l) and an accumulator per head over its own keys, with the int8 -> number work of a key
// done once for all G heads; the warps' states meet in shared memory at the end (reusing the
// K/V area); the result is the normalized output without a split, else (acc, m, l) per split
// for the combine, as the other kernels write it. The scores and the weighted V sum run either
// on tensor cores (head_dim 128 and 256: GsMma) or on the fp32 units (head_dim 64: GsSimt).
constexpr int GS_MAX_WARPS = 4;

// int8 -> f32 without the conversion unit: with the sign bit of every byte flipped (x = word ^
// 0x80808080), 0x4B0000bb is the float 2^23 + bb exactly, and bb = b + 128.
template <int I>
__device__ __forceinline__ float i8_to_f32(uint32_t x) {
    return __uint_as_float(__byte_perm(x, 0x4B000000u, 0x7440 | I)) - 8388736.0f;
}
// The four int8 of word w (raw) into f[0..3].
__device__ __forceinline__ void i8x4_to_f32(uint32_t w, float* f) {
    const uint32_t x = w ^ 0x80808080u;
    f[0] = i8_to_f32<0>(x);
    f[1] = i8_to_f32<1>(x);
    f[2] = i8_to_f32<2>(x);
    f[3] = i8_to_f32<3>(x);
}
// Two int8 of x (sign bits flipped) as a half2, low half first: SEL 0x4140 takes bytes 0 and 1,
// 0x4342 bytes 2 and 3. 0x64bb is the half 1024 + bb exactly (bb = b + 128); minus 1152 is b.
template <uint32_t SEL>
__device__ __forceinline__ uint32_t i8x2_to_h2(uint32_t x) {
    const uint32_t bits = __byte_perm(x, 0x64646464u, SEL);
    const __half2 h = __hsub2(*reinterpret_cast<const __half2*>(&bits), __half2half2(__ushort_as_half(0x6480)));
    return *reinterpret_cast<const uint32_t*>(&h);
}

// A warp's merge row per head (acc [HD], m, l), padded so every row starts 16-byte aligned.
__host__ __device__ constexpr int gs_merge_stride(int hd) { return hd + 4; }
// Query heads rounded up to 4 (the probabilities' row in shared memory, read as float4s).
__host__ __device__ constexpr int gs_pad4(int g) { return (g + 3) / 4 * 4; }
// The tensor-core variant serves head_dim 128 and 256 (whole 64-byte groups per row and at
// least eight 16-byte units, which its swizzle permutes).
__host__ __device__ constexpr bool gs_mma(int head_dim) { return head_dim % 128 == 0; }

// Shared memory: K and V chunks [chunk][RS] bytes, their scales [chunk] f32 each, the queries
// [G][HD] f32, then the probabilities: [chunk][pad4(G)] f32 (SIMT) or [G][chunk] fp16 (MMA).
size_t attention_decode_gs_smem_bytes(int warps, int group, int head_dim) {
    const size_t chunk = static_cast<size_t>(warps) * WARP, hd = static_cast<size_t>(head_dim);
    const size_t common = 2 * chunk * sizeof(float) + group * hd * sizeof(float);
    if (gs_mma(head_dim)) return 2 * chunk * hd + common + group * chunk * sizeof(uint16_t);
    return 2 * chunk * (hd + 16) + common + chunk * gs_pad4(group) * sizeof(float);
}

// fp32 scores and V (head_dim 64): K rows padded by 16 bytes so the lanes' 16-byte reads of
// different keys fall in different banks. Lane l converts key l's row once and scores it against
// all G query heads (f32 queries in shared memory, read as broadcasts); for V, lane l owns the
// DPL consecutive dims l DPL .., converts a key's DPL values once and folds them into all G heads
// with the key's weights (V scale folded in), which the scoring lanes left in shared memory.
template <int G, int DPL>
struct GsSimt {
    static constexpr int HD = DPL * WARP, RS = HD + 16, GP = gs_pad4(G), UNITS = HD / 16;
    float m[G], l[G], acc[G][DPL];

    __device__ static int unit_at(int /*row*/, int c) { return c; }

    __device__ void init() {
#pragma unroll
        for (int g = 0; g < G; ++g) {
            m[g] = -INFINITY;
            l[g] = 0.0f;
#pragma unroll
            for (int d = 0; d < DPL; ++d) acc[g][d] = 0.0f;
        }
    }

    // The warp's keys of this chunk (n_keys in the chunk, at least key 32 warp).
    __device__ void chunk(const int8_t* ks, const int8_t* vs, const float* ksc, const float* vsc, const float* q_s,
                          void* p_area, int warp, int n_keys, float inv_sqrt, int lane) {
        float* p_s = static_cast<float*>(p_area);
        // Scores of key j against the G heads: two partial sums per head (shorter chains).
        const int j = WARP * warp + lane;
        const bool valid = j < n_keys;
        float sc[G];
        {
            float d0[G], d1[G];
#pragma unroll
            for (int g = 0; g < G; ++g) d0[g] = d1[g] = 0.0f;
            if (valid) {
                const int8_t* kr = ks + j * RS;
#pragma unroll
                for (int c = 0; c < UNITS; ++c) {
                    const uint4 kv = *reinterpret_cast<const uint4*>(kr + c * 16);
                    float kf[16];
                    i8x4_to_f32(kv.x, kf);
                    i8x4_to_f32(kv.y, kf + 4);
                    i8x4_to_f32(kv.z, kf + 8);
                    i8x4_to_f32(kv.w, kf + 12);
#pragma unroll
                    for (int g = 0; g < G; ++g) {
                        float& d = (c & 1) ? d1[g] : d0[g];
#pragma unroll
                        for (int e = 0; e < 4; ++e) {
                            const float4 qv = *reinterpret_cast<const float4*>(q_s + g * HD + c * 16 + 4 * e);
                            d = fmaf(qv.x, kf[4 * e], d);
                            d = fmaf(qv.y, kf[4 * e + 1], d);
                            d = fmaf(qv.z, kf[4 * e + 2], d);
                            d = fmaf(qv.w, kf[4 * e + 3], d);
                        }
                    }
                }
            }
            const float kscale = valid ? ksc[j] * inv_sqrt : 0.0f;
#pragma unroll
            for (int g = 0; g < G; ++g) sc[g] = (d0[g] + d1[g]) * kscale;
        }
        // Online softmax per head over this warp's keys (key 32 w, lane 0, is valid: m stays finite).
        const float vscale = valid ? vsc[j] : 0.0f;
        float* pw = p_s + j * GP;
#pragma unroll
        for (int g = 0; g < G; ++g) {
            const float m_new = fmaxf(m[g], warp_max(valid ? sc[g] : -INFINITY));
            const float corr = expf(m[g] - m_new);
            const float pr = valid ? expf(sc[g] - m_new) : 0.0f;
            l[g] = l[g] * corr + warp_sum(pr);
            m[g] = m_new;
#pragma unroll
            for (int d = 0; d < DPL; ++d) acc[g][d] *= corr;
            pw[g] = pr * vscale;
        }
        __syncwarp();
        // V: lane owns dims lane * DPL ..; key by key, weights of the G heads as broadcasts.
        const int nj = min(WARP, n_keys - WARP * warp);
        const int8_t* vbase = vs + (WARP * warp) * RS + lane * DPL;
        const float* pbase = p_s + (WARP * warp) * GP;
#pragma unroll 4
        for (int jj = 0; jj < nj; ++jj) {
            float vf[DPL];
            if constexpr (DPL == 2) {
                const uint32_t x = static_cast<uint32_t>(*reinterpret_cast<const uint16_t*>(vbase + jj * RS)) ^ 0x8080u;
                vf[0] = i8_to_f32<0>(x);
                vf[1] = i8_to_f32<1>(x);
            } else {
#pragma unroll
                for (int wd = 0; wd < DPL / 4; ++wd) {
                    i8x4_to_f32(reinterpret_cast<const uint32_t*>(vbase + jj * RS)[wd], vf + 4 * wd);
                }
            }
            float pj[GP];
#pragma unroll
            for (int g4 = 0; g4 < GP / 4; ++g4) {
                const float4 pv = *reinterpret_cast<const float4*>(pbase + jj * GP + 4 * g4);
                pj[4 * g4] = pv.x;
                pj[4 * g4 + 1] = pv.y;
                pj[4 * g4 + 2] = pv.z;
                pj[4 * g4 + 3] = pv.w;
            }
#pragma unroll
            for (int g = 0; g < G; ++g) {
#pragma unroll
                for (int d = 0; d < DPL; ++d) acc[g][d] = fmaf(pj[g], vf[d], acc[g][d]);
            }
        }
    }

    // This warp's (acc, m, l) per head into mg [warps][G][gs_merge_stride(HD)].
    __device__ void write(float* mg, int warp, int lane) const {
#pragma unroll
        for (int g = 0; g < G; ++g) {
            float* row = mg + (warp * G + g) * gs_merge_stride(HD);
#pragma unroll
            for (int d = 0; d < DPL; ++d) row[lane * DPL + d] = acc[g][d];
            if (lane == 0) {
                row[HD] = m[g];
                row[HD + 1] = l[g];
            }
        }
    }
};

// Tensor-core scores and V (head_dim 128, 256; mma.sync m16n8k16, fp16 inputs, fp32 sums; up to
// four query heads). Lane (g, t) = (lane / 4, lane % 4). K and V are exact in fp16 (int8). Each
// query, divided by its head's largest magnitude, is split into two fp16 parts (hi + lo: ~22
// bits, so the scores are as exact as fp32's), which the scores' B takes as columns h and 4 + h:
// one mma gives both, and lanes t and t ^ 2 add them. The probabilities are rounded to fp16
// (relative 2^-11), scaled by the largest V scale seen so far (so <= 1).
//   Scores (per 16 keys): A = K [key][dim], B = Q^T [dim][head part] (absent heads zero), a k
//   step's slots 2t, 2t+1, 2t+8, 2t+9 are the dims 64 (k / 4) + 16 t + 4 (k % 4) + 0..3, so each
//   lane reads 16 contiguous bytes of a row per four k steps. C: keys g, g + 8 x columns 2t, 2t+1
//   (after the sum: heads 2 (t & 1), + 1).
//   V (per 16 keys): A = V^T [dim][key], B = P [key][head]; the slots 2t, 2t+1, 2t+8, 2t+9 are
//   the keys t, t + 4, t + 8, t + 12, and m-tile (u, i)'s rows g and g + 8 are the dims
//   16 (g + 8 u) + 2 i and + 1, so a lane reads 16 contiguous bytes of each of its four keys'
//   rows. C: those dims x heads 2t, 2t+1.
// The rows are HD bytes; unit c (16 bytes) of row j is stored at unit c ^ swz(j), which keeps
// both patterns' 16-byte reads (eight lanes per phase) on distinct banks.
template <int G, int HD>
struct GsMma {
    static_assert(G <= 4, "a query's two parts take two of the eight columns");
    static constexpr int RS = HD, KS = HD / 16, NU = HD / 128;
    uint32_t qf[KS][2];  // the queries' B fragments (column g: head g's hi part, g - 4's lo part)
    float qsc[2];        // the largest |q| of heads 2 (t & 1), + 1
    float m[2], l[2];    // heads 2 (t & 1), + 1 (lanes t and t ^ 2 hold the same)
    float vref;          // the probabilities' scale: the largest V scale seen
    float acc[KS][4];    // V m-tile KS: (dim, head 2t), (dim, 2t+1), (dim + 1, 2t), (dim + 1, 2t+1), / vref

    __device__ static int swz(int row) { return ((row & 1) << 2) | (row & 2); }
    __device__ static int unit_at(int row, int c) { return c ^ swz(row); }

    __device__ void init() {
        m[0] = m[1] = -INFINITY;
        l[0] = l[1] = 0.0f;
        vref = 0.0f;
#pragma unroll
        for (int i = 0; i < KS; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;
    }

    // The queries' fragments (once per block, q_s published).
    __device__ void load_q(const float* q_s, int lane) {
        const int g = lane >> 2, t = lane & 3, h = g & 3;
        const bool lo = g >= 4;
        const float* q = q_s + min(h, G - 1) * HD;
        float4 qv[KS];
        float amax = 0.0f;
#pragma unroll
        for (int k = 0; k < KS; ++k) {
            qv[k] = *reinterpret_cast<const float4*>(q + 64 * (k / 4) + 16 * t + 4 * (k % 4));
            amax = fmaxf(amax, fmaxf(fmaxf(fabsf(qv[k].x), fabsf(qv[k].y)), fmaxf(fabsf(qv[k].z), fabsf(qv[k].w))));
        }
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
        const float inv = (h < G && amax > 0.0f) ? 1.0f / amax : 0.0f;
        // hi = fp16(x); lo = fp16(x - hi) (x - hi is exact in f32)
        auto part = [lo](float x) { return lo ? x - __half2float(__float2half_rn(x)) : x; };
#pragma unroll
        for (int k = 0; k < KS; ++k) {
            qf[k][0] = pack_half2(part(qv[k].x * inv), part(qv[k].y * inv));
            qf[k][1] = pack_half2(part(qv[k].z * inv), part(qv[k].w * inv));
        }
        qsc[0] = __shfl_sync(0xffffffffu, amax, 8 * (t & 1));
        qsc[1] = __shfl_sync(0xffffffffu, amax, 8 * (t & 1) + 4);
    }

    __device__ void chunk(const int8_t* ks, const int8_t* vs, const float* ksc, const float* vsc,
                          const float* /*q_s*/, void* p_area, int warp, int n_keys, float inv_sqrt, int lane) {
        const int g = lane >> 2, t = lane & 3, j0 = WARP * warp;
        const int n_warps = blockDim.x / WARP;
        uint16_t* p16 = static_cast<uint16_t*>(p_area);  // [G][chunk]: head h, warp w at (h n_warps + w) 32
        // Scores: c[mt] holds keys j0 + 16 mt + g (0, 1) and + 8 (2, 3).
        float c[2][4];
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
            c[mt][0] = c[mt][1] = c[mt][2] = c[mt][3] = 0.0f;
            const int r0 = j0 + 16 * mt + g;
            const int8_t* k0 = ks + r0 * RS;
            const int8_t* k1 = k0 + 8 * RS;
#pragma unroll
            for (int q4 = 0; q4 < HD / 64; ++q4) {
                const int at = unit_at(r0, 4 * q4 + t) * 16;  // rows r0 and r0 + 8 swizzle alike
                const uint4 w0 = *reinterpret_cast<const uint4*>(k0 + at);
                const uint4 w1 = *reinterpret_cast<const uint4*>(k1 + at);
                const uint32_t x0[4] = {w0.x ^ 0x80808080u, w0.y ^ 0x80808080u, w0.z ^ 0x80808080u, w0.w ^ 0x80808080u};
                const uint32_t x1[4] = {w1.x ^ 0x80808080u, w1.y ^ 0x80808080u, w1.z ^ 0x80808080u, w1.w ^ 0x80808080u};
#pragma unroll
                for (int w = 0; w < 4; ++w) {
                    const uint32_t a[4] = {i8x2_to_h2<0x4140>(x0[w]), i8x2_to_h2<0x4140>(x1[w]),
                                           i8x2_to_h2<0x4342>(x0[w]), i8x2_to_h2<0x4342>(x1[w])};
                    mma_16816(c[mt], a, qf[4 * q4 + w][0], qf[4 * q4 + w][1]);
                }
            }
        }
        // hi + lo: lanes t < 2 add the lo parts of lanes t + 2, and those the hi parts.
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
            for (int r = 0; r < 4; ++r) c[mt][r] += __shfl_xor_sync(0xffffffffu, c[mt][r], 2);
        }
        // The lane's keys (c[i / 2][2 (i % 2) + e] for head 2 (t & 1) + e) and their scales.
        float kscale[4], vv[4];
        bool valid[4];
        float vmax = 0.0f;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int j = j0 + 16 * (i / 2) + 8 * (i % 2) + g;
            valid[i] = j < n_keys;
            kscale[i] = valid[i] ? ksc[j] * inv_sqrt : 0.0f;
            vv[i] = valid[i] ? vsc[j] : 0.0f;
            vmax = fmaxf(vmax, vv[i]);
        }
#pragma unroll
        for (int o = 4; o < WARP; o <<= 1) vmax = fmaxf(vmax, __shfl_xor_sync(0xffffffffu, vmax, o));
        const float vref_new = fmaxf(fmaxf(vref, vmax), 1e-30f);
        const float ratio = vref / vref_new, inv_vref = 1.0f / vref_new;
        vref = vref_new;
        // Online softmax per head (key j0, lane 0's first, is valid: m stays finite).
        float f[2];
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            float s[4], mx = -INFINITY;
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                s[i] = valid[i] ? c[i / 2][2 * (i % 2) + e] * qsc[e] * kscale[i] : -INFINITY;
                mx = fmaxf(mx, s[i]);
            }
#pragma unroll
            for (int o = 4; o < WARP; o <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
            const float m_new = fmaxf(m[e], mx);
            const float corr = expf(m[e] - m_new);
            float pr[4], ps = 0.0f;
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                pr[i] = valid[i] ? expf(s[i] - m_new) : 0.0f;
                ps += pr[i];
            }
#pragma unroll
            for (int o = 4; o < WARP; o <<= 1) ps += __shfl_xor_sync(0xffffffffu, ps, o);
            l[e] = l[e] * corr + ps;
            m[e] = m_new;
            f[e] = corr * ratio;
            const int h = 2 * t + e;
            if (t < 2 && h < G) {
                // key k of a 16-key step at position 4 (k % 4) + k / 4 (the V fragments' slots)
                uint16_t* ph = p16 + (h * n_warps + warp) * WARP;
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    const int k = 8 * (i % 2) + g;
                    ph[16 * (i / 2) + 4 * (k % 4) + k / 4] = __half_as_ushort(half_sat(pr[i] * vv[i] * inv_vref));
                }
            }
        }
#pragma unroll
        for (int i = 0; i < KS; ++i) {
            acc[i][0] *= f[0];
            acc[i][1] *= f[1];
            acc[i][2] *= f[0];
            acc[i][3] *= f[1];
        }
        __syncwarp();
        // V, two steps of 16 keys.
        const uint16_t* pb = p16 + (min(g, G - 1) * n_warps + warp) * WARP + 4 * t;
#pragma unroll
        for (int kk = 0; kk < 2; ++kk) {
            const uint2 b = *reinterpret_cast<const uint2*>(pb + 16 * kk);
            const int8_t* v0 = vs + (j0 + 16 * kk + t) * RS;  // keys t + 4 e: rows 4 RS apart
#pragma unroll
            for (int u = 0; u < NU; ++u) {
                const int at = unit_at(t, g + 8 * u) * 16;  // every key t + 4 e swizzles as t
                uint32_t x[4][4];
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const uint4 w = *reinterpret_cast<const uint4*>(v0 + 4 * e * RS + at);
                    x[e][0] = w.x ^ 0x80808080u;
                    x[e][1] = w.y ^ 0x80808080u;
                    x[e][2] = w.z ^ 0x80808080u;
                    x[e][3] = w.w ^ 0x80808080u;
                }
#pragma unroll
                for (int i = 0; i < 8; ++i) {
                    constexpr uint32_t SEL[2] = {0x5140u, 0x7362u};  // bytes 0, 1 / 2, 3 of two words, interleaved
                    const uint32_t x01 = __byte_perm(x[0][i / 2], x[1][i / 2], SEL[i % 2]);
                    const uint32_t x23 = __byte_perm(x[2][i / 2], x[3][i / 2], SEL[i % 2]);
                    const uint32_t a[4] = {i8x2_to_h2<0x4140>(x01), i8x2_to_h2<0x4342>(x01), i8x2_to_h2<0x4140>(x23),
                                           i8x2_to_h2<0x4342>(x23)};
                    mma_16816(acc[8 * u + i], a, b.x, b.y);
                }
            }
        }
    }

    __device__ void write(float* mg, int warp, int lane) const {
        const int g = lane >> 2, t = lane & 3;
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const int h = 2 * t + e;
            if (h >= G) continue;
            float* row = mg + (warp * G + h) * gs_merge_stride(HD);
#pragma unroll
            for (int u = 0; u < NU; ++u) {
#pragma unroll
                for (int i = 0; i < 8; ++i) {
                    const int d = 16 * (g + 8 * u) + 2 * i;
                    row[d] = acc[8 * u + i][e] * vref;
                    row[d + 1] = acc[8 * u + i][2 + e] * vref;
                }
            }
            if (g == 0) {
                row[HD] = m[e];
                row[HD + 1] = l[e];
            }
        }
    }
};

// POST: the Q/K/V post folded in (AttentionParams::post, one token): each block computes its G
// query heads into shared memory from the projections, and a block whose split holds the new
// position also its K and V heads, which it stores into the cache before reading that position
// back (the barrier at the top of the chunk loop orders the two). Where several blocks share a KV
// head (G below the group) each of them computes and stores the same bytes, so each reads back
// its own store whatever the others' timing.
template <int G, int DPL, bool POST>
__global__ void __launch_bounds__(GS_MAX_WARPS * WARP)
    kernel_attention_decode_gs(AttentionParams p, int n_split, int min_keys, QkvPostParams pp) {
    constexpr int HD = DPL * WARP, UNITS = HD / 16;
    constexpr bool MMA = gs_mma(HD);
    using State = std::conditional_t<MMA, GsMma<G, HD>, GsSimt<G, DPL>>;
    constexpr int RS = State::RS;
    extern __shared__ __align__(16) uint8_t smem[];
    const int n_warps = blockDim.x / WARP, chunk = n_warps * WARP;
    int8_t* ks = reinterpret_cast<int8_t*>(smem);         // [chunk][RS]
    int8_t* vs = ks + chunk * RS;                         // [chunk][RS]
    float* ksc = reinterpret_cast<float*>(vs + chunk * RS);  // [chunk]
    float* vsc = ksc + chunk;                             // [chunk]
    float* q_s = vsc + chunk;                             // [G][HD]
    void* p_area = q_s + G * HD;                          // the probabilities

    // Block x: query heads h0 = x G .. h0 + G - 1 of KV head hk (G divides the group; below it
    // several blocks share a KV head and its chunks).
    const int h0 = blockIdx.x * G, hk = h0 / (p.n_head / p.n_head_kv), s = blockIdx.z;
    // The queries by cp.async, issued before the position is read: their latency overlaps the
    // position's, and the first chunk's K/V and scales follow in one more round trip.
    if constexpr (!POST) {
        const float* qg = p.q + static_cast<int64_t>(h0) * HD;
        for (int u = threadIdx.x; u < G * HD / 4; u += blockDim.x) cp_async16(q_s + 4 * u, qg + 4 * u);
    }
    if (p.pos_dev) p.pos0 = *p.pos_dev;
    int per_split, n_used;
    split_plan(p.pos0 + 1, n_split, min_keys, &per_split, &n_used);
    if (s >= n_used) {  // block-uniform, before any barrier
        cp_async_wait_all();
        return;
    }
    const int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
    if constexpr (POST) {
        // Warp tasks: the G query heads into q_s, then (the last split) K and V of head hk via the
        // K area (free until the first chunk) into the cache. One call site for every task (the
        // post's code once in the kernel: a block on a cold SM fetches it once).
        const int n_tasks = G + (s == n_used - 1 ? 2 : 0);
        float* kv_buf = reinterpret_cast<float*>(smem);  // [2][HD]
        for (int task = warp; task < n_tasks; task += blockDim.x / WARP) {
            const int kind = task < G ? 0 : task - G + 1;  // 0 q, 1 k, 2 v
            const QkvHeadSrc src = qkv_head_src(pp, kind, kind == 0 ? h0 + task : hk, 0, HD);
            float* buf = kind == 0 ? q_s + task * HD : kv_buf + (kind - 1) * HD;
            qkv_post_head<DPL>(pp, src.vec, src.bias, src.nw, kind != 2, p.pos0, lane, buf);
            if (kind != 0) kv_store_head(pp, kind, hk, p.pos0, lane, buf);
        }
    }
    const int k_begin = s * per_split;
    const int k_end = min(p.pos0 + 1, k_begin + per_split);

    const float inv_sqrt = 1.0f / sqrtf(static_cast<float>(HD));
    const uint8_t* kc = static_cast<const uint8_t*>(p.k_cache);
    const uint8_t* vc = static_cast<const uint8_t*>(p.v_cache);

    State st;
    st.init();
    for (int base = k_begin; base < k_end; base += chunk) {
        const int n_keys = min(chunk, k_end - base);
        __syncthreads();  // the previous chunk is consumed (and q_s is written, first time)
        {
            // Thread x copies unit x % UNITS of rows x / UNITS, + rpr, ... (blockDim is a multiple
            // of UNITS): the source steps by rpr positions.
            const int rpr = blockDim.x / UNITS, c = threadIdx.x % UNITS;
            const int64_t step = static_cast<int64_t>(rpr) * p.n_head_kv * HD;
            int j = threadIdx.x / UNITS;
            int64_t off = (static_cast<int64_t>(base + j) * p.n_head_kv + hk) * HD + c * 16;
            for (; j < n_keys; j += rpr, off += step) {
                const int at = j * RS + State::unit_at(j, c) * 16;
                cp_async16(ks + at, kc + off);
                cp_async16(vs + at, vc + off);
            }
        }
        // One key's scales per thread (a chunk is blockDim keys), stored after the queries'
        // fragments are made: their loads are in flight meanwhile.
        const bool has_key = static_cast<int>(threadIdx.x) < n_keys;
        Half kraw{}, vraw{};
        if (has_key) {
            const int64_t si = static_cast<int64_t>(base + threadIdx.x) * p.n_head_kv + hk;
            kraw = p.k_scale[si];
            vraw = p.v_scale[si];
        }
        // The queries' fragments while the chunk is in flight (q_s written by the post and
        // published by the barrier above; copied with the chunk otherwise, so after its wait).
        if constexpr (MMA && POST) {
            if (base == k_begin) st.load_q(q_s, lane);
        }
        if (has_key) {
            ksc[threadIdx.x] = ldh(kraw);
            vsc[threadIdx.x] = ldh(vraw);
        }
        cp_async_wait_all();  // this chunk's K/V (and the queries, first time)
        __syncthreads();
        if constexpr (MMA && !POST) {
            if (base == k_begin) st.load_q(q_s, lane);
        }
        if (WARP * warp >= n_keys) continue;  // no key of this chunk for this warp (warp-uniform)
        st.chunk(ks, vs, ksc, vsc, q_s, p_area, warp, n_keys, inv_sqrt, lane);
    }

    // Merge the warps' (m, l, acc) per head through shared memory (the K/V area, now free).
    constexpr int MS = gs_merge_stride(HD);
    float* mg = reinterpret_cast<float*>(smem);  // [n_warps][G][MS]
    cp_async_wait_all();  // nothing in flight into shared memory (the queries, had no chunk run)
    __syncthreads();
    st.write(mg, warp, lane);
    __syncthreads();
    // Head g's weight per warp, f[w] = exp(m_w - max) (0 for a warp without keys: m = -inf), and
    // the weighted sum of the warps' l, in warp order; returns the max (warp 0's m is finite).
    auto head_weights = [&](int g, float (&f)[GS_MAX_WARPS], float& lt) {
        float mx = -INFINITY;
#pragma unroll
        for (int w = 0; w < GS_MAX_WARPS; ++w) {
            if (w < n_warps) mx = fmaxf(mx, mg[(w * G + g) * MS + HD]);
        }
        lt = 0.0f;
#pragma unroll
        for (int w = 0; w < GS_MAX_WARPS; ++w) {
            f[w] = 0.0f;
            if (w < n_warps) {
                f[w] = expf(mg[(w * G + g) * MS + HD] - mx);
                lt += mg[(w * G + g) * MS + HD + 1] * f[w];
            }
        }
        return mx;
    };
    float f[GS_MAX_WARPS];
    if (n_split == 1) {
        for (int o = threadIdx.x; o < G * HD; o += blockDim.x) {  // warp-uniform trip count
            const int g = o / HD, d = o % HD;
            float lt;
            head_weights(g, f, lt);
            float a = 0.0f;
#pragma unroll
            for (int w = 0; w < GS_MAX_WARPS; ++w) {
                if (w < n_warps) a += mg[(w * G + g) * MS + d] * f[w];
            }
            // With out_q8 the warp (32 consecutive values: G * HD and the block are multiples of
            // 32) also quantizes them: one act_q8 block.
            const float v = a / lt;
            const int64_t o_idx = static_cast<int64_t>(h0 + g) * HD + d;
            p.out[o_idx] = v;
            if (p.out_q8) {
                int8_t* q = static_cast<int8_t*>(p.out_q8);
                float4* sc = reinterpret_cast<float4*>(q + act_q8_scales_at(1, static_cast<int64_t>(p.n_head) * HD));
                quantize_block_warp(v, lane, q + (o_idx - lane), sc + o_idx / 32);
            }
        }
    } else {
        // Four consecutive dims of one head per thread and step: the head's weights once per four
        // values (the same sums in the same order as one value at a time).
        for (int o4 = threadIdx.x; o4 < G * HD / 4; o4 += blockDim.x) {
            const int g = 4 * o4 / HD, d = 4 * o4 % HD;
            float lt;
            const float mx = head_weights(g, f, lt);
            float4 a = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
            for (int w = 0; w < GS_MAX_WARPS; ++w) {
                if (w < n_warps) {
                    const float4 v = *reinterpret_cast<const float4*>(mg + (w * G + g) * MS + d);
                    a.x += v.x * f[w];
                    a.y += v.y * f[w];
                    a.z += v.z * f[w];
                    a.w += v.w * f[w];
                }
            }
            float* wr = p.work + (static_cast<int64_t>(h0 + g) * p.max_split + s) * (HD + 2);  // 8-byte aligned
            *reinterpret_cast<float2*>(wr + d) = make_float2(a.x, a.y);
            *reinterpret_cast<float2*>(wr + d + 2) = make_float2(a.z, a.w);
            if (d == 0) {
                wr[HD] = mx;
                wr[HD + 1] = lt;
            }
        }
    }
}

// One block per (head, token) of head_dim x par threads (par = min(8, 1024 / head_dim)): the
// splits' (m, l) are read once (one split per thread), their weights exp(m_s - max) kept in shared
// memory and the denominator summed in the same pass; then thread (d, g) sums dimension d over
// splits g, g + par, ... (par independent load streams instead of one walk over every split),
// and the par partial sums meet in shared memory in a fixed order. With out_q8, the first
// head_dim threads (whole warps) also quantize the output, one act_q8 block per warp.
constexpr int COMBINE_MAX_PAR = 8;
constexpr int COMBINE_REG = 8;  // splits per thread read into registers (par x 8: 64 splits at head_dim 128)
__global__ void __launch_bounds__(MAX_HD * 4) kernel_attention_combine(AttentionParams p, int n_split, int min_keys) {
    __shared__ float f[ATTN_MAX_SPLIT_GRID];
    __shared__ float red[MAX_HD * 4 / WARP];
    __shared__ float part[COMBINE_MAX_PAR][MAX_HD];
    const int h = blockIdx.x, t = blockIdx.y;
    const int hd = p.head_dim, tid = threadIdx.x, nthr = blockDim.x, d = tid % hd, g = tid / hd, par = nthr / hd;
    if (p.pos_dev) p.pos0 = *p.pos_dev;
    int per_split, n_used;
    split_plan(p.pos0 + p.n_tok, n_split, min_keys, &per_split, &n_used);
    const float* w = p.work + (static_cast<int64_t>(t) * p.n_head + h) * p.max_split * (hd + 2);
    // Up to COMBINE_REG splits' values per thread into registers first: their loads need no
    // weight, so they overlap the reductions below (a loop after them waited for each load in
    // turn, four or five round trips); more splits by the loop at the end. The same sums in the
    // same order as that loop.
    float a[COMBINE_REG];
#pragma unroll
    for (int k = 0; k < COMBINE_REG; ++k) a[k] = w[min(g + k * par, n_used - 1) * (hd + 2) + d];
    // max over the splits' m (an empty split has m = -inf, l = 0)
    float mx = -INFINITY;
    for (int s = tid; s < n_used; s += nthr) mx = fmaxf(mx, w[s * (hd + 2) + hd]);
    mx = block_reduce<true>(mx, red);
    float lsum = 0.0f;
    for (int s = tid; s < n_used; s += nthr) {
        const float ms = w[s * (hd + 2) + hd], ls = w[s * (hd + 2) + hd + 1];
        const float fs = ls > 0.0f ? expf(ms - mx) : 0.0f;
        f[s] = fs;
        lsum += ls * fs;
    }
    const float l = block_reduce<false>(lsum, red);  // its barriers also publish f
    float acc = 0.0f;
#pragma unroll
    for (int k = 0; k < COMBINE_REG; ++k) {
        if (g + k * par < n_used) acc += a[k] * f[min(g + k * par, n_used - 1)];
    }
    for (int s = g + COMBINE_REG * par; s < n_used; s += par) acc += w[s * (hd + 2) + d] * f[s];
    part[g][d] = acc;
    __syncthreads();
    if (g != 0) return;
    for (int i = 1; i < par; ++i) acc += part[i][d];
    const int64_t o = (static_cast<int64_t>(t) * p.n_head + h) * hd + d;
    const float v = acc / l;
    p.out[o] = v;
    if (p.out_q8) {
        int8_t* q = static_cast<int8_t*>(p.out_q8);
        const int64_t width = static_cast<int64_t>(p.n_head) * hd;
        float4* sc = reinterpret_cast<float4*>(q + act_q8_scales_at(p.n_tok, width));
        quantize_block_warp(v, d % WARP, q + (o - d % WARP), sc + o / 32);
    }
}

// The groups and head sizes the group-shared decode kernel serves (its blocks take 1 to 4 of a
// group's query heads: attention_decode_heads).
bool decode_gs_supported(int group, int head_dim) {
    const bool g_ok = group == 1 || group == 2 || group == 3 || group == 4 || group == 6 || group == 8;
    return g_ok && (head_dim == 64 || head_dim == 128 || head_dim == 256);
}

bool use_decode_gs(int n_tok, KvType kv, int group, int head_dim) {
    return n_tok == 1 && kv == KvType::Int8 && g_attn_kernel == AttnKernel::Auto &&
           decode_gs_supported(group, head_dim);
}

// Fewest keys per split of the kernel that runs: a chunk of the group-shared kernel, else a tile.
int split_min_keys(bool gs) { return gs ? g_decode_warps * WARP : ATTN_MIN_SPLIT_KEYS; }

// post: the Q/K/V post folded in (null: done before).
template <int G>
void launch_decode_gs_g(const AttentionParams& p, int n_split, int min_keys, const QkvPostParams* post,
                        void* stream) {
    const int warps = min_keys / WARP;
    const size_t smem = attention_decode_gs_smem_bytes(warps, G, p.head_dim);
    const dim3 grid(static_cast<unsigned>(p.n_head / G), 1, static_cast<unsigned>(n_split));
    const QkvPostParams pp = post ? *post : QkvPostParams{};
    auto launch = [&](auto kernel) {
        allow_dynamic_smem(kernel, smem);
        kernel<<<grid, warps * WARP, smem, as_stream(stream)>>>(p, n_split, min_keys, pp);
    };
    auto by_dim = [&](auto post_tag) {
        constexpr bool POST = decltype(post_tag)::value;
        if (p.head_dim == 64) launch(kernel_attention_decode_gs<G, 2, POST>);
        else if (p.head_dim == 128) launch(kernel_attention_decode_gs<G, 4, POST>);
        else launch(kernel_attention_decode_gs<G, 8, POST>);
    };
    if constexpr (G + 2 <= GS_MAX_WARPS || G == 4) {  // attention_decode_heads folds the post in for these only
        if (post) by_dim(std::true_type{});
        else by_dim(std::false_type{});
    } else {
        JLLM_ASSERT(post == nullptr);
        by_dim(std::false_type{});
    }
    JLLM_CUDA_LAUNCH_CHECK("kernel_attention_decode_gs");
}

// hb: query heads per block (attention_decode_heads).
void launch_attention_decode_gs(const AttentionParams& p, int n_split, int min_keys, const QkvPostParams* post,
                                int hb, void* stream) {
    switch (hb) {
        case 1: launch_decode_gs_g<1>(p, n_split, min_keys, post, stream); break;
        case 2: launch_decode_gs_g<2>(p, n_split, min_keys, post, stream); break;
        case 3: launch_decode_gs_g<3>(p, n_split, min_keys, post, stream); break;
        default:  // attention_decode_heads gives 1 to 4
            JLLM_ASSERT(hb == 4);
            launch_decode_gs_g<4>(p, n_split, min_keys, post, stream);
            break;
    }
}

void launch_attention_generic(const AttentionParams& p, int n_split, int group, void* stream) {
    // Query tokens per block: up to 16 warps of group heads x tokens.
    const int qt = std::max(1, std::min(p.n_tok, 16 / group));
    const int warps = group * qt;
    const bool int8 = p.kv_type == KvType::Int8;
    const size_t smem = attention_smem_bytes(warps, p.head_dim, int8);
    const dim3 grid(static_cast<unsigned>(p.n_head_kv), static_cast<unsigned>((p.n_tok + qt - 1) / qt),
                    static_cast<unsigned>(n_split));
    auto launch = [&](auto kernel) {
        allow_dynamic_smem(kernel, smem);
        kernel<<<grid, warps * WARP, smem, as_stream(stream)>>>(p, n_split, qt);
    };
    if (int8) launch(kernel_attention<true>);
    else launch(kernel_attention<false>);
    JLLM_CUDA_LAUNCH_CHECK("kernel_attention");
}

}  // namespace

void set_attention_kernel(AttnKernel k) { g_attn_kernel = k; }

void set_attention_decode_warps(int warps) {
    JLLM_ASSERT(warps == 1 || warps == 2 || warps == 4);
    g_decode_warps = warps;
}

DecodeHeads attention_decode_heads(int group, int n_head, int n_split, int sms) {
    const int w = g_decode_warps;
    if (group + 2 <= w) return {group, true};  // the post folds in with one block per KV head
    const int64_t two_per_sm = 2 * static_cast<int64_t>(sms);
    int hb = group;
    // A block's heads and K and V in one round of its warps: the post folds in.
    while (hb % 2 == 0 && hb + 2 > w) hb /= 2;
    const bool one_round = hb + 2 <= w;
    // A large grid: twice the heads (up to 4), the post in two rounds; each K/V chunk is copied by
    // half as many blocks.
    if (one_round && group % (2 * hb) == 0 && 2 * hb <= 4 &&
        static_cast<int64_t>(n_head / hb) * n_split > two_per_sm) {
        return {2 * hb, true};
    }
    // More blocks while the grid is small.
    while (hb % 2 == 0 && static_cast<int64_t>(n_head / (hb / 2)) * n_split <= two_per_sm) hb /= 2;
    return {hb, hb + 2 <= w};
}

bool attention_decode_tensor_cores(const AttentionParams& p) {
    return use_decode_gs(p.n_tok, p.kv_type, p.n_head / p.n_head_kv, p.head_dim) && gs_mma(p.head_dim);
}

int attention_split_keys(KvType kv, int n_head, int n_head_kv, int head_dim) {
    return split_min_keys(use_decode_gs(1, kv, n_head / n_head_kv, head_dim));
}

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
    const bool gs = use_decode_gs(p.n_tok, p.kv_type, group, p.head_dim);
    const int min_keys = split_min_keys(gs);
    int n_split = 1;
    const bool can_split = p.n_tok == 1 && p.max_split > 1 && p.work != nullptr;
    JLLM_ASSERT(p.max_split <= ATTN_MAX_SPLIT_GRID);
    if (p.pos_dev != nullptr) {
        JLLM_ASSERT_MSG(p.n_tok == 1, "attention: device-side position is for single-token decode");
        n_split = can_split ? p.max_split : 1;
    } else if (can_split) {
        int per = 0, used = 0;
        split_plan(p.pos0 + p.n_tok, p.max_split, min_keys, &per, &used);
        n_split = used > 1 ? p.max_split : 1;
    }
    // The Q/K/V post: folded into the group-shared decode kernel where a block's heads, K and V
    // take one round of its warps (H200: Qwen3-0.6B's group 2 tg128 +4-6%; Qwen3-4B's group 4 in
    // two rounds -7% at short contexts; split into one or two heads per block, one round: +3-4% at
    // every depth), or two rounds on a large grid (Qwen3-4B's four heads per block past 16
    // splits: d4096 +1.5%), else its own kernel first.
    const DecodeHeads heads = gs ? attention_decode_heads(group, p.n_head, n_split, device_sm_count()) : DecodeHeads{group, false};
    const QkvPostParams* post = nullptr;
    if (p.post != nullptr) {
        JLLM_ASSERT(p.post->q == p.q && p.post->n_tok == p.n_tok && p.post->k_cache == p.k_cache &&
                    p.post->v_cache == p.v_cache && p.post->pos_dev == p.pos_dev);
        if (heads.folds_post) post = p.post;
        else launch_qkv_post(*p.post, stream);
    }
    // The 8-bit output: by the combine kernel with a split, by the group-shared kernel without one
    // (it writes out_q8 exactly then), else by its own kernel.
    auto quantize_out = [&]() {
        if (p.out_q8 != nullptr) {
            launch_quantize_act(p.out, p.n_tok, static_cast<int64_t>(p.n_head) * p.head_dim, p.out_q8, stream);
        }
    };
    if (n_split == 1 && g_attn_kernel == AttnKernel::Auto && attention_mma_supported(p)) {
        launch_attention_mma(p, stream);
        quantize_out();
        return;
    }
    if (gs) {
        launch_attention_decode_gs(p, n_split, min_keys, post, heads.per_block, stream);
    } else {
        launch_attention_generic(p, n_split, group, stream);
    }
    if (n_split > 1) {
        const dim3 cgrid(static_cast<unsigned>(p.n_head), static_cast<unsigned>(p.n_tok));
        const int par = std::min(COMBINE_MAX_PAR, MAX_HD * 4 / p.head_dim);
        kernel_attention_combine<<<cgrid, p.head_dim * par, 0, as_stream(stream)>>>(p, n_split, min_keys);
        JLLM_CUDA_LAUNCH_CHECK("kernel_attention_combine");
    } else if (!gs) {
        quantize_out();
    }
}

}  // namespace cuda
}  // namespace jllm
