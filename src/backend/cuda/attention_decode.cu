// backend/cuda/attention_decode.cu — single-token decode attention by the group-shared kernel
// (INT8 cache; FP16 cache at head_dim 128 and 256; a verification's few queries as decode steps in
// one launch, AttentionParams::decode_rows: grid y is the query), its heads-per-block plan
// (attention_decode_heads) and its launch; the split plan and the combine of its split results are
// attention.cu's.
//
// Decode (one token) with the keys spread over the warps and the group's
// query heads sharing each key's conversion: block = (KV head, split) of W warps; the split goes
// through in chunks of 32 W keys, warp w taking keys 32 w .. 32 w + 31 of a chunk. A chunk's K
// and V rows are copied raw into shared memory by cp.async. Each warp keeps an online softmax
// (m, l) and an accumulator per head over its own keys, with the conversion work of a key
// done once for all G heads; the warps' states meet in shared memory at the end (reusing the
// K/V area); the result is the normalized output without a split, else (acc, m, l) per split
// for the combine, as the other kernels write it. The scores and the weighted V sum run either
// on tensor cores (head_dim 128 and 256: GroupedMma, INT8 or FP16 rows) or on the fp32 units
// (head_dim 64, INT8: GroupedSimt).
#include <cuda_fp16.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "backend/cuda/act_q8.cuh"
#include "backend/cuda/attention.cuh"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/qkv_post.cuh"
#include "core/error.h"

namespace jllm {
namespace cuda {

namespace {

constexpr int GROUPED_MAX_WARPS = 4;

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
__host__ __device__ constexpr bool grouped_uses_mma(int head_dim) { return head_dim % 128 == 0; }

// Shared memory: K and V chunks [chunk][RS] bytes, their scales [chunk] f32 each (INT8; unused
// for FP16), the queries [G][HD] f32, then the probabilities: [chunk][pad4(G)] f32 (SIMT) or
// [G][chunk] fp16 (MMA).
size_t grouped_decode_smem_bytes(int warps, int group, int head_dim, KvType kv) {
    const size_t chunk = static_cast<size_t>(warps) * WARP, hd = static_cast<size_t>(head_dim);
    const size_t common = 2 * chunk * sizeof(float) + group * hd * sizeof(float);
    const size_t row = hd * (kv == KvType::Fp16 ? 2 : 1);
    if (grouped_uses_mma(head_dim)) return 2 * chunk * row + common + group * chunk * sizeof(uint16_t);
    return 2 * chunk * (hd + 16) + common + chunk * gs_pad4(group) * sizeof(float);
}

// fp32 scores and V (head_dim 64): K rows padded by 16 bytes so the lanes' 16-byte reads of
// different keys fall in different banks. Lane l converts key l's row once and scores it against
// all G query heads (f32 queries in shared memory, read as broadcasts); for V, lane l owns the
// DPL consecutive dims l DPL .., converts a key's DPL values once and folds them into all G heads
// with the key's weights (V scale folded in), which the scoring lanes left in shared memory.
template <int G, int DPL>
struct GroupedSimt {
    static constexpr int HD = DPL * WARP, RS = HD + 16, GP = gs_pad4(G), UNITS = HD / 16;  // UNITS: per cached row
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

    // The warp's keys of this chunk (n_keys in the chunk, at least key 32 warp): their scores, the
    // online softmax and the probabilities into p_area (K rows and scales landed), then
    // values(): their V rows into the accumulators.
    __device__ void scores(const int8_t* ks, const float* ksc, const float* vsc, const float* q_s, void* p_area,
                           int warp, int n_keys, float inv_sqrt, int lane) {
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
    }

    __device__ void values(const int8_t* vs, const void* p_area, int warp, int n_keys, int lane) {
        const float* p_s = static_cast<const float*>(p_area);
        __syncwarp();  // the probabilities (and the V rows) of the warp's lanes
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
// F16: the FP16 cache. Its rows are 2 HD bytes and its values go to the fragments as they are
// (no scales: the keys' scale is 1 and vref stays 1); a lane reads the 32 bytes of the same dims
// (two units: 2c and 2c + 1 of the INT8 pattern's unit c), and the 128-byte bank period holds
// half a row, so its swz(j) is (j & 1) | (j & 2) << 1: rows j and j + 1 on the odd / even units
// of the scores' reads, the V reads' four keys on four distinct pairs of units.
template <int G, int HD, bool F16 = false>
struct GroupedMma {
    static_assert(G <= 4, "a query's two parts take two of the eight columns");
    static constexpr int RS = HD * (F16 ? 2 : 1), UNITS = RS / 16, KS = HD / 16, NU = HD / 128;
    uint32_t qf[KS][2];  // the queries' B fragments (column g: head g's hi part, g - 4's lo part)
    float qsc[2];        // the largest |q| of heads 2 (t & 1), + 1
    float m[2], l[2];    // heads 2 (t & 1), + 1 (lanes t and t ^ 2 hold the same)
    float vref;          // the probabilities' scale: the largest V scale seen
    float acc[KS][4];    // V m-tile KS: (dim, head 2t), (dim, 2t+1), (dim + 1, 2t), (dim + 1, 2t+1), / vref

    __device__ static int swz(int row) {
        return F16 ? (row & 1) | ((row & 2) << 1) : ((row & 1) << 2) | (row & 2);
    }
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

    __device__ void scores(const int8_t* ks, const float* ksc, const float* vsc, const float* /*q_s*/, void* p_area,
                           int warp, int n_keys, float inv_sqrt, int lane) {
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
                if constexpr (F16) {
                    // dims 64 q4 + 16 t .. + 15 of rows r0 and r0 + 8: k step w's dims 4w .. 4w + 3
                    // are words 2w and 2w + 1 of the 32 bytes
                    const int u0 = 2 * (4 * q4 + t);
                    const uint4 a0 = *reinterpret_cast<const uint4*>(k0 + unit_at(r0, u0) * 16);
                    const uint4 a1 = *reinterpret_cast<const uint4*>(k0 + unit_at(r0, u0 + 1) * 16);
                    const uint4 b0 = *reinterpret_cast<const uint4*>(k1 + unit_at(r0, u0) * 16);
                    const uint4 b1 = *reinterpret_cast<const uint4*>(k1 + unit_at(r0, u0 + 1) * 16);
                    const uint32_t x0[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
                    const uint32_t x1[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
                    for (int w = 0; w < 4; ++w) {
                        const uint32_t a[4] = {x0[2 * w], x1[2 * w], x0[2 * w + 1], x1[2 * w + 1]};
                        mma_16816(c[mt], a, qf[4 * q4 + w][0], qf[4 * q4 + w][1]);
                    }
                } else {
                    const int at = unit_at(r0, 4 * q4 + t) * 16;  // rows r0 and r0 + 8 swizzle alike
                    const uint4 w0 = *reinterpret_cast<const uint4*>(k0 + at);
                    const uint4 w1 = *reinterpret_cast<const uint4*>(k1 + at);
                    const uint32_t x0[4] = {w0.x ^ 0x80808080u, w0.y ^ 0x80808080u, w0.z ^ 0x80808080u,
                                            w0.w ^ 0x80808080u};
                    const uint32_t x1[4] = {w1.x ^ 0x80808080u, w1.y ^ 0x80808080u, w1.z ^ 0x80808080u,
                                            w1.w ^ 0x80808080u};
#pragma unroll
                    for (int w = 0; w < 4; ++w) {
                        const uint32_t a[4] = {i8x2_to_h2<0x4140>(x0[w]), i8x2_to_h2<0x4140>(x1[w]),
                                               i8x2_to_h2<0x4342>(x0[w]), i8x2_to_h2<0x4342>(x1[w])};
                        mma_16816(c[mt], a, qf[4 * q4 + w][0], qf[4 * q4 + w][1]);
                    }
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
            kscale[i] = valid[i] ? (F16 ? 1.0f : ksc[j]) * inv_sqrt : 0.0f;
            vv[i] = valid[i] ? (F16 ? 1.0f : vsc[j]) : 0.0f;
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
    }

    __device__ void values(const int8_t* vs, const void* p_area, int warp, int /*n_keys*/, int lane) {
        const int g = lane >> 2, t = lane & 3, j0 = WARP * warp;
        const int n_warps = blockDim.x / WARP;
        const uint16_t* p16 = static_cast<const uint16_t*>(p_area);
        __syncwarp();  // the probabilities (and the V rows) of the warp's lanes
        // V, two steps of 16 keys.
        const uint16_t* pb = p16 + (min(g, G - 1) * n_warps + warp) * WARP + 4 * t;
#pragma unroll
        for (int kk = 0; kk < 2; ++kk) {
            const uint2 b = *reinterpret_cast<const uint2*>(pb + 16 * kk);
            const int8_t* v0 = vs + (j0 + 16 * kk + t) * RS;  // keys t + 4 e: rows 4 RS apart
#pragma unroll
            for (int u = 0; u < NU; ++u) {
                if constexpr (F16) {
                    // dims 16 (g + 8 u) .. + 15 of keys t + 4 e (units 2 (g + 8 u), + 1; every key
                    // t + 4 e swizzles as t): m-tile i's dims 2i, 2i + 1 are word i of each key
                    const int uc = 2 * (g + 8 * u);
                    uint32_t x[4][8];
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const uint4 w0 = *reinterpret_cast<const uint4*>(v0 + 4 * e * RS + unit_at(t, uc) * 16);
                        const uint4 w1 = *reinterpret_cast<const uint4*>(v0 + 4 * e * RS + unit_at(t, uc + 1) * 16);
                        x[e][0] = w0.x, x[e][1] = w0.y, x[e][2] = w0.z, x[e][3] = w0.w;
                        x[e][4] = w1.x, x[e][5] = w1.y, x[e][6] = w1.z, x[e][7] = w1.w;
                    }
#pragma unroll
                    for (int i = 0; i < 8; ++i) {
                        // (dim, keys t and t + 4), (dim + 1, ..), (dim, keys t + 8, t + 12), (dim + 1, ..)
                        const uint32_t a[4] = {__byte_perm(x[0][i], x[1][i], 0x5410), __byte_perm(x[0][i], x[1][i], 0x7632),
                                               __byte_perm(x[2][i], x[3][i], 0x5410), __byte_perm(x[2][i], x[3][i], 0x7632)};
                        mma_16816(acc[8 * u + i], a, b.x, b.y);
                    }
                    continue;
                }
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

// POST: the Q/K/V post folded in (AttentionParams::post): each block computes its G query heads
// into shared memory from the projections, and a block whose split holds a new position (a
// step's; those of the verification's queries up to its own) also its K and V heads there, which
// it stores into the cache before reading them back (the barrier at the top of the chunk loop
// orders the two). Where several blocks store the same position's KV head (G below the group, or
// the later queries of a verification) each computes and stores the same bytes, so each reads
// back its own store whatever the others' timing.
// F16: the FP16 cache (tensor-core head sizes only), no scales.
template <int G, int DPL, bool POST, bool F16>
__global__ void __launch_bounds__(GROUPED_MAX_WARPS * WARP)
    kernel_attention_decode_grouped(AttentionParams p, int n_split, int min_keys, QkvPostParams pp) {
    constexpr int HD = DPL * WARP;
    constexpr bool MMA = grouped_uses_mma(HD);
    static_assert(MMA || !F16, "the FP16 cache: tensor-core head sizes");
    using State = std::conditional_t<MMA, GroupedMma<G, HD, F16>, GroupedSimt<G, DPL>>;
    constexpr int RS = State::RS, UNITS = State::UNITS;  // units of a cached row (16 bytes)
    extern __shared__ __align__(16) uint8_t smem[];
    const int n_warps = blockDim.x / WARP, chunk = n_warps * WARP;
    int8_t* ks = reinterpret_cast<int8_t*>(smem);         // [chunk][RS]
    int8_t* vs = ks + chunk * RS;                         // [chunk][RS]
    float* ksc = reinterpret_cast<float*>(vs + chunk * RS);  // [chunk]
    float* vsc = ksc + chunk;                             // [chunk]
    float* q_s = vsc + chunk;                             // [G][HD]
    void* p_area = q_s + G * HD;                          // the probabilities

    // Block x: query heads h0 = x G .. h0 + G - 1 of KV head hk (G divides the group; below it
    // several blocks share a KV head and its chunks); y: the query (AttentionParams::decode_rows,
    // at position pos0 + t; 0 for a step).
    const int h0 = blockIdx.x * G, hk = h0 / (p.n_head / p.n_head_kv), s = blockIdx.z, t = blockIdx.y;
    // The queries by cp.async, issued before the position is read: their latency overlaps the
    // position's, and the first chunk's K/V and scales follow in one more round trip.
    if constexpr (!POST) {
        const float* qg = p.q + (static_cast<int64_t>(t) * p.n_head + h0) * HD;
        for (int u = threadIdx.x; u < G * HD / 4; u += blockDim.x) cp_async16(q_s + 4 * u, qg + 4 * u);
        if constexpr (F16) cp_async_commit();  // the queries' group, before the first chunk's K and V
    }
    const int pos_first = p.pos_dev ? *p.pos_dev : p.pos0;  // the first query's position (the new rows')
    p.pos0 = pos_first + t;
    int per_split, n_used;
    split_plan(p.pos0 + 1, n_split, min_keys, &per_split, &n_used);
    if (s >= n_used) {  // block-uniform, before any barrier
        cp_async_wait_all();
        return;
    }
    const int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
    const int k_begin = s * per_split;
    const int k_end = min(p.pos0 + 1, k_begin + per_split);
    if constexpr (POST) {
        // Warp tasks: the G query heads of query t into q_s, then K and V of head hk at each new
        // position of this split's keys (a step's last split: its own; a verification's query t:
        // those of queries r0 .. r1 - 1 <= t it reads here) via the K/V area (free until the first
        // chunk) into the cache. Blocks reading the same new position store the same bytes. One
        // call site for every task (the post's code once in the kernel: a block on a cold SM
        // fetches it once).
        const int r0 = max(k_begin - pos_first, 0), r1 = k_end - pos_first;
        const int n_tasks = G + 2 * max(r1 - r0, 0);
        float* kv_buf = reinterpret_cast<float*>(smem);  // [2 (r1 - r0)][HD]
        for (int task = warp; task < n_tasks; task += blockDim.x / WARP) {
            const int i = task - G, kind = task < G ? 0 : 1 + i % 2;  // 0 q, 1 k, 2 v
            const int row = task < G ? t : r0 + i / 2;
            const QkvHeadSrc src = qkv_head_src(pp, kind, kind == 0 ? h0 + task : hk, row, HD);
            float* buf = kind == 0 ? q_s + task * HD : kv_buf + i * HD;
            qkv_post_head<DPL>(pp, src.vec, src.bias, src.nw, kind != 2, pos_first + row, lane, buf);
            if (kind != 0) kv_store_head(pp, kind, hk, pos_first + row, lane, buf);
        }
    }

    const float inv_sqrt = 1.0f / sqrtf(static_cast<float>(HD));
    const uint8_t* kc = static_cast<const uint8_t*>(p.k_cache);
    const uint8_t* vc = static_cast<const uint8_t*>(p.v_cache);

    State st;
    st.init();
    for (int base = k_begin; base < k_end; base += chunk) {
        const int n_keys = min(chunk, k_end - base);
        __syncthreads();  // the previous chunk is consumed (and q_s is written, first time)
        // The FP16 cache: each warp copies its own keys' rows, K then V in two groups, and scores
        // its keys as soon as its K rows have landed, while its V rows (and the other warps' rows)
        // are still in flight (2026-12-06, H100: tg128 @ d4096 +1.3%, @ d16384 +3%). The INT8
        // cache keeps one block-wide copy in one group: either part of that measured 2-4% slower
        // there (docs/gpu_speed_notes.md, row 140).
        constexpr bool OWN = F16;
        {
            // OWN: warp w copies rows 32 w .. 32 w + 31 (lane: unit lane % UNITS of rows lane /
            // UNITS, + rpr, ..). Else thread x copies unit x % UNITS of rows x / UNITS, + rpr, ...
            // (blockDim is a multiple of UNITS). The source steps by rpr positions.
            static_assert(WARP % UNITS == 0, "whole rows per warp pass");
            const int rpr = OWN ? WARP / UNITS : blockDim.x / UNITS;
            const int c = threadIdx.x % UNITS;
            const int j_first = OWN ? WARP * warp + lane / UNITS : threadIdx.x / UNITS;
            const int j_end = OWN ? min(n_keys, WARP * (warp + 1)) : n_keys;
            const int j_zero = OWN ? (WARP * warp < n_keys ? WARP * (warp + 1) : 0) : chunk;
            const int64_t step = static_cast<int64_t>(rpr) * p.n_head_kv * UNITS * 16;
            const int64_t off0 = (static_cast<int64_t>(base + j_first) * p.n_head_kv + hk) * UNITS * 16 + c * 16;
            auto at = [c](int row) { return row * RS + State::unit_at(row, c) * 16; };  // unit c of a row
            int j = j_first;
            int64_t off = off0;
            if constexpr (OWN) {
                for (; j < j_end; j += rpr, off += step) cp_async16(ks + at(j), kc + off);
                cp_async_commit();
                j = j_first;
                off = off0;
                for (; j < j_end; j += rpr, off += step) cp_async16(vs + at(j), vc + off);
            } else {
                for (; j < j_end; j += rpr, off += step) {
                    cp_async16(ks + at(j), kc + off);
                    cp_async16(vs + at(j), vc + off);
                }
            }
            // FP16: a partial chunk's V rows past its keys as zeros. Their probabilities are 0, but
            // what an earlier kernel left in shared memory may be NaN or infinity as fp16, and
            // 0 x NaN is NaN in the sums (any byte is a finite int8).
            if constexpr (F16) {
                for (; j < j_zero; j += rpr) *reinterpret_cast<uint4*>(vs + at(j)) = uint4{};
            }
            if constexpr (OWN) cp_async_commit();
        }
        // One key's scales per thread (a chunk is blockDim keys: thread x's key is one of its
        // warp's), stored after the queries' fragments are made: their loads are in flight meanwhile.
        const bool has_key = !F16 && static_cast<int>(threadIdx.x) < n_keys;
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
        const bool keys = WARP * warp < n_keys;  // some key of this chunk for this warp (warp-uniform)
        // The queries, first time without the post (every thread copied some): OWN waits for
        // their group only; else the whole chunk with them.
        if constexpr (OWN) {
            if (!POST && base == k_begin) {
                cp_async_wait<2>();
                __syncthreads();
            }
        } else {
            cp_async_wait_all();
            __syncthreads();
        }
        if constexpr (MMA && !POST) {
            if (base == k_begin) st.load_q(q_s, lane);
        }
        if (!keys) continue;
        if constexpr (OWN) {
            cp_async_wait<1>();  // this warp's K rows (its lanes' copies)
            __syncwarp();        // ... published to the warp
        }
        st.scores(ks, ksc, vsc, q_s, p_area, warp, n_keys, inv_sqrt, lane);
        if constexpr (OWN) cp_async_wait<0>();  // its V rows (values() starts at a __syncwarp)
        st.values(vs, p_area, warp, n_keys, lane);
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
    auto head_weights = [&](int g, float (&f)[GROUPED_MAX_WARPS], float& lt) {
        float mx = -INFINITY;
#pragma unroll
        for (int w = 0; w < GROUPED_MAX_WARPS; ++w) {
            if (w < n_warps) mx = fmaxf(mx, mg[(w * G + g) * MS + HD]);
        }
        lt = 0.0f;
#pragma unroll
        for (int w = 0; w < GROUPED_MAX_WARPS; ++w) {
            f[w] = 0.0f;
            if (w < n_warps) {
                f[w] = expf(mg[(w * G + g) * MS + HD] - mx);
                lt += mg[(w * G + g) * MS + HD + 1] * f[w];
            }
        }
        return mx;
    };
    float f[GROUPED_MAX_WARPS];
    if (n_split == 1) {
        for (int o = threadIdx.x; o < G * HD; o += blockDim.x) {  // warp-uniform trip count
            const int g = o / HD, d = o % HD;
            float lt;
            head_weights(g, f, lt);
            float a = 0.0f;
#pragma unroll
            for (int w = 0; w < GROUPED_MAX_WARPS; ++w) {
                if (w < n_warps) a += mg[(w * G + g) * MS + d] * f[w];
            }
            // With out_q8 the warp (32 consecutive values: G * HD and the block are multiples of
            // 32) also quantizes them: one act_q8 block.
            const float v = a / lt;
            const int64_t o_idx = (static_cast<int64_t>(t) * p.n_head + h0 + g) * HD + d;
            p.out[o_idx] = v;
            if (p.out_q8) {
                int8_t* q = static_cast<int8_t*>(p.out_q8);
                float4* sc = reinterpret_cast<float4*>(q + act_q8_scales_at(p.n_tok, static_cast<int64_t>(p.n_head) * HD));
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
            for (int w = 0; w < GROUPED_MAX_WARPS; ++w) {
                if (w < n_warps) {
                    const float4 v = *reinterpret_cast<const float4*>(mg + (w * G + g) * MS + d);
                    a.x += v.x * f[w];
                    a.y += v.y * f[w];
                    a.z += v.z * f[w];
                    a.w += v.w * f[w];
                }
            }
            const int64_t row = static_cast<int64_t>(t) * p.n_head + h0 + g;
            float* wr = p.work + (row * p.max_split + s) * (HD + 2);  // 8-byte aligned
            *reinterpret_cast<float2*>(wr + d) = make_float2(a.x, a.y);
            *reinterpret_cast<float2*>(wr + d + 2) = make_float2(a.z, a.w);
            if (d == 0) {
                wr[HD] = mx;
                wr[HD + 1] = lt;
            }
        }
    }
}

// The groups and head sizes the group-shared decode kernel serves (its blocks take 1 to 4 of a
// group's query heads: attention_decode_heads).
bool grouped_decode_supported(int group, int head_dim) {
    const bool g_ok = group == 1 || group == 2 || group == 3 || group == 4 || group == 6 || group == 8;
    return g_ok && (head_dim == 64 || head_dim == 128 || head_dim == 256);
}

// post: the Q/K/V post folded in (null: done before).
template <int G>
void launch_grouped_decode_heads(const AttentionParams& p, int n_split, int min_keys, const QkvPostParams* post,
                        void* stream) {
    const int warps = min_keys / WARP;
    const size_t smem = grouped_decode_smem_bytes(warps, G, p.head_dim, p.kv_type);
    const dim3 grid(static_cast<unsigned>(p.n_head / G), static_cast<unsigned>(p.decode_rows ? p.n_tok : 1),
                    static_cast<unsigned>(n_split));
    const QkvPostParams pp = post ? *post : QkvPostParams{};
    // The post's K/V heads (two per new position, f32) fit the K/V area (two chunks of rows).
    const size_t kv_area = 2 * static_cast<size_t>(min_keys) * p.head_dim * (p.kv_type == KvType::Fp16 ? 2 : 1);
    JLLM_ASSERT(!post || 2 * static_cast<size_t>(p.n_tok) * p.head_dim * sizeof(float) <= kv_area);
    auto launch = [&](auto kernel) {
        allow_dynamic_smem(kernel, smem);
        kernel<<<grid, warps * WARP, smem, as_stream(stream)>>>(p, n_split, min_keys, pp);
    };
    auto by_dim = [&](auto post_tag) {
        constexpr bool POST = decltype(post_tag)::value;
        if (p.kv_type == KvType::Fp16) {
            JLLM_ASSERT(grouped_uses_mma(p.head_dim));
            if (p.head_dim == 128) launch(kernel_attention_decode_grouped<G, 4, POST, true>);
            else launch(kernel_attention_decode_grouped<G, 8, POST, true>);
        } else if (p.head_dim == 64) {
            launch(kernel_attention_decode_grouped<G, 2, POST, false>);
        } else if (p.head_dim == 128) {
            launch(kernel_attention_decode_grouped<G, 4, POST, false>);
        } else {
            launch(kernel_attention_decode_grouped<G, 8, POST, false>);
        }
    };
    if constexpr (G + 2 <= GROUPED_MAX_WARPS || G == 4) {  // attention_decode_heads folds the post in for these only
        if (post) by_dim(std::true_type{});
        else by_dim(std::false_type{});
    } else {
        JLLM_ASSERT(post == nullptr);
        by_dim(std::false_type{});
    }
    JLLM_CUDA_LAUNCH_CHECK("kernel_attention_decode_grouped");
}

}  // namespace

bool use_grouped_decode(int n_tok, KvType kv, int group, int head_dim, const AttnChoice& choice) {
    const bool kv_ok = kv == KvType::Int8 || (kv == KvType::Fp16 && grouped_uses_mma(head_dim));
    return n_tok == 1 && kv_ok && choice.kernel == AttnKernel::Auto && grouped_decode_supported(group, head_dim);
}

// hb: query heads per block (attention_decode_heads).
void launch_attention_decode_grouped(const AttentionParams& p, int n_split, int min_keys, const QkvPostParams* post,
                                int hb, void* stream) {
    switch (hb) {
        case 1: launch_grouped_decode_heads<1>(p, n_split, min_keys, post, stream); break;
        case 2: launch_grouped_decode_heads<2>(p, n_split, min_keys, post, stream); break;
        case 3: launch_grouped_decode_heads<3>(p, n_split, min_keys, post, stream); break;
        default:  // attention_decode_heads gives 1 to 4
            JLLM_ASSERT(hb == 4);
            launch_grouped_decode_heads<4>(p, n_split, min_keys, post, stream);
            break;
    }
}

DecodeHeads attention_decode_heads(int group, int n_head, int n_split, int sms, int warps) {
    const int w = warps;
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
    const int n_tok = p.decode_rows ? 1 : p.n_tok;  // decode_rows: each query as a step
    return use_grouped_decode(n_tok, p.kv_type, p.n_head / p.n_head_kv, p.head_dim, p.choice) && grouped_uses_mma(p.head_dim);
}

}  // namespace cuda
}  // namespace jllm
