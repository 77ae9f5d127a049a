// backend/cuda/attention.cu — causal grouped-query attention over the INT8 or FP16 KV cache.
//
// A block serves one KV head and a tile of QT query tokens: its warps are the group's query
// heads x the tile's tokens (warp w: head hk * group + w % group, token tile * QT + w / group),
// so each K/V tile, loaded once into shared memory with coalesced 16-byte loads, serves every
// query that reads that KV head. Keys go in tiles of 32: lane l scores key l against its warp's
// query (held in shared memory), an online softmax keeps the running max m and sum l, and the V
// tile is folded into the output, lane l owning dims l, l+32, ... Causality: each warp stops at
// its own token's last position; the block loads up to the furthest one.
// Decode splits the KV length into up to max_split ranges of >= ATTN_MIN_SPLIT_KEYS keys (grid z);
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

AttnKernel g_attn_kernel = AttnKernel::Auto;

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

// Keys per split for a KV length of n_kv over at most max_split splits, and the splits used.
__host__ __device__ __forceinline__ void split_plan(int n_kv, int max_split, int* per_split, int* n_used) {
    int per = (n_kv + max_split - 1) / max_split;
    per = (per + KT - 1) / KT * KT;
    if (max_split > 1 && per < ATTN_MIN_SPLIT_KEYS) per = ATTN_MIN_SPLIT_KEYS;
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

// Decode (one token) over the INT8 cache: block = (KV head, split), one warp per query head of
// the group. The split's keys go through in chunks of dk = min(128, 16384 / head_dim rounded down
// to 32) keys: a chunk's
// K and V rows are copied raw (int8) into shared memory at once with cp.async — one round trip
// for up to 32 KB instead of one per 32-key tile — with rows padded by 16 bytes so the lanes'
// 16-byte reads of different keys fall in different banks. Lane l scores keys l, l + 32, ... of
// the chunk against its warp's query (f32 in shared memory), an online softmax carries (m, l)
// across chunks, and V is folded in with lane l owning dims l, l + 32, ... Output as the generic
// kernel's: `out` directly without a split, else (acc, m, l) per split for the combine.
constexpr int DEC_MAX_KEYS = 128;
constexpr int DEC_CHUNK_BYTES = 16384;  // K (and V) bytes of a chunk
constexpr int DEC_MAX_SLOTS = DEC_MAX_KEYS / WARP;  // keys per lane per chunk

// A multiple of 32 (whole lane slots; keeps the shared areas 16-byte aligned).
__host__ __device__ __forceinline__ int decode_chunk_keys(int head_dim) {
    return min(DEC_MAX_KEYS, DEC_CHUNK_BYTES / head_dim / WARP * WARP);
}
size_t attention_decode_smem_bytes(int warps, int head_dim) {
    const size_t dk = static_cast<size_t>(decode_chunk_keys(head_dim));
    const size_t row = static_cast<size_t>(head_dim) + 16;
    return 2 * dk * row + 2 * dk * sizeof(float) + static_cast<size_t>(warps) * head_dim * sizeof(float);
}

__global__ void __launch_bounds__(MAX_WARPS * WARP) kernel_attention_decode_i8(AttentionParams p, int n_split) {
    extern __shared__ __align__(16) uint8_t smem[];
    const int group = p.n_head / p.n_head_kv;
    const int hd = p.head_dim, nd = hd / WARP;
    const int dk = decode_chunk_keys(hd);
    const int rs = hd + 16;  // shared row stride in bytes
    int8_t* ks = reinterpret_cast<int8_t*>(smem);  // [dk][rs]
    int8_t* vs = ks + dk * rs;                      // [dk][rs]
    float* ksc = reinterpret_cast<float*>(vs + dk * rs);  // [dk]
    float* vsc = ksc + dk;                                // [dk]
    float* qs = vsc + dk;                                 // [group][hd]

    const int hk = blockIdx.x, s = blockIdx.z;
    if (p.pos_dev) p.pos0 = *p.pos_dev;
    int per_split, n_used;
    split_plan(p.pos0 + 1, n_split, &per_split, &n_used);
    if (s >= n_used) return;  // block-uniform, before any barrier
    const int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
    const int h = hk * group + warp;
    const int k_begin = s * per_split;
    const int k_end = min(p.pos0 + 1, k_begin + per_split);

    float* q_s = qs + warp * hd;
    {
        const float* q = p.q + static_cast<int64_t>(h) * hd;
        for (int i = lane; i < hd; i += WARP) q_s[i] = q[i];
    }
    const float inv_sqrt = 1.0f / sqrtf(static_cast<float>(hd));
    const uint8_t* kc = static_cast<const uint8_t*>(p.k_cache);
    const uint8_t* vc = static_cast<const uint8_t*>(p.v_cache);
    const int units = hd / 16;  // 16-byte units per row

    float m = -INFINITY, l = 0.0f;
    float acc[MAX_DPL];
#pragma unroll
    for (int i = 0; i < MAX_DPL; ++i) acc[i] = 0.0f;

    for (int base = k_begin; base < k_end; base += dk) {
        const int n_keys = min(dk, k_end - base);
        __syncthreads();  // the previous chunk is consumed (and q_s is written, first time)
        for (int u = threadIdx.x; u < n_keys * units; u += blockDim.x) {
            const int j = u / units, c = u % units;
            const int64_t off = (static_cast<int64_t>(base + j) * p.n_head_kv + hk) * hd + c * 16;
            cp_async16(ks + j * rs + c * 16, kc + off);
            cp_async16(vs + j * rs + c * 16, vc + off);
        }
        for (int j = threadIdx.x; j < n_keys; j += blockDim.x) {
            const int64_t si = static_cast<int64_t>(base + j) * p.n_head_kv + hk;
            ksc[j] = ldh(p.k_scale[si]);
            vsc[j] = ldh(p.v_scale[si]);
        }
        cp_async_wait_all();
        __syncthreads();

        // scores of keys lane + 32 i
        float sc[DEC_MAX_SLOTS];
        float cmax = -INFINITY;
#pragma unroll
        for (int i = 0; i < DEC_MAX_SLOTS; ++i) {
            const int j = lane + WARP * i;
            sc[i] = -INFINITY;
            if (j < n_keys) {
                const int8_t* kr = ks + j * rs;
                float dot = 0.0f;
                for (int c = 0; c < units; ++c) {
                    const uint4 kv = *reinterpret_cast<const uint4*>(kr + c * 16);
                    const uint32_t w[4] = {kv.x, kv.y, kv.z, kv.w};
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const float4 qv = *reinterpret_cast<const float4*>(q_s + c * 16 + 4 * e);
                        dot += qv.x * static_cast<float>(static_cast<int8_t>(w[e])) +
                               qv.y * static_cast<float>(static_cast<int8_t>(w[e] >> 8)) +
                               qv.z * static_cast<float>(static_cast<int8_t>(w[e] >> 16)) +
                               qv.w * static_cast<float>(static_cast<int8_t>(w[e] >> 24));
                    }
                }
                sc[i] = dot * ksc[j] * inv_sqrt;
                cmax = fmaxf(cmax, sc[i]);
            }
        }
        const float m_new = fmaxf(m, warp_max(cmax));  // finite: key 0 of the chunk is valid
        const float corr = expf(m - m_new);
        float psum = 0.0f;
#pragma unroll
        for (int i = 0; i < DEC_MAX_SLOTS; ++i) {
            const int j = lane + WARP * i;
            sc[i] = j < n_keys ? expf(sc[i] - m_new) : 0.0f;
            psum += sc[i];
            sc[i] *= j < n_keys ? vsc[j] : 0.0f;  // the V scale folded into the weight
        }
        l = l * corr + warp_sum(psum);
        m = m_new;
#pragma unroll
        for (int i = 0; i < MAX_DPL; ++i) acc[i] *= corr;
#pragma unroll
        for (int i = 0; i < DEC_MAX_SLOTS; ++i) {
            if (WARP * i >= n_keys) break;  // warp-uniform
            const int nj = min(WARP, n_keys - WARP * i);
            for (int jj = 0; jj < nj; ++jj) {
                const float pj = __shfl_sync(0xffffffffu, sc[i], jj);
                const int8_t* vr = vs + (WARP * i + jj) * rs;
#pragma unroll
                for (int d = 0; d < MAX_DPL; ++d) {
                    if (d < nd) acc[d] += pj * static_cast<float>(vr[lane + WARP * d]);
                }
            }
        }
    }

    store_warp_result(p, 0, h, s, n_split, acc, m, l, lane);
}

// One block per (head, token) of head_dim x par threads (par = min(8, 1024 / head_dim)): the
// splits' (m, l) are read once (one split per thread), their weights exp(m_s - max) kept in shared
// memory and the denominator summed in the same pass; then thread (d, g) sums dimension d over
// splits g, g + par, ... (par independent load streams instead of one walk over every split),
// and the par partial sums meet in shared memory in a fixed order. With out_q8, the first
// head_dim threads (whole warps) also quantize the output, one act_q8 block per warp.
constexpr int COMBINE_MAX_PAR = 8;
__global__ void __launch_bounds__(MAX_HD * 4) kernel_attention_combine(AttentionParams p, int n_split) {
    __shared__ float f[ATTN_MAX_SPLIT_GRID];
    __shared__ float red[MAX_HD * 4 / WARP];
    __shared__ float part[COMBINE_MAX_PAR][MAX_HD];
    const int h = blockIdx.x, t = blockIdx.y;
    const int hd = p.head_dim, tid = threadIdx.x, nthr = blockDim.x, d = tid % hd, g = tid / hd, par = nthr / hd;
    if (p.pos_dev) p.pos0 = *p.pos_dev;
    int per_split, n_used;
    split_plan(p.pos0 + p.n_tok, n_split, &per_split, &n_used);
    const float* w = p.work + (static_cast<int64_t>(t) * p.n_head + h) * p.max_split * (hd + 2);
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
#pragma unroll 8
    for (int s = g; s < n_used; s += par) acc += w[s * (hd + 2) + d] * f[s];
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

void launch_attention_decode_i8(const AttentionParams& p, int n_split, int group, void* stream) {
    const size_t smem = attention_decode_smem_bytes(group, p.head_dim);
    allow_dynamic_smem(kernel_attention_decode_i8, smem);
    const dim3 grid(static_cast<unsigned>(p.n_head_kv), 1, static_cast<unsigned>(n_split));
    kernel_attention_decode_i8<<<grid, group * WARP, smem, as_stream(stream)>>>(p, n_split);
    JLLM_CUDA_LAUNCH_CHECK("kernel_attention_decode_i8");
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
    JLLM_ASSERT(p.max_split <= ATTN_MAX_SPLIT_GRID);
    if (p.pos_dev != nullptr) {
        JLLM_ASSERT_MSG(p.n_tok == 1, "attention: device-side position is for single-token decode");
        n_split = can_split ? p.max_split : 1;
    } else if (can_split) {
        int per = 0, used = 0;
        split_plan(p.pos0 + p.n_tok, p.max_split, &per, &used);
        n_split = used > 1 ? p.max_split : 1;
    }
    if (n_split == 1 && g_attn_kernel == AttnKernel::Auto && attention_mma_supported(p)) {
        launch_attention_mma(p, stream);
        if (p.out_q8 != nullptr) {
            launch_quantize_act(p.out, p.n_tok, static_cast<int64_t>(p.n_head) * p.head_dim, p.out_q8, stream);
        }
        return;
    }
    if (p.n_tok == 1 && p.kv_type == KvType::Int8 && g_attn_kernel == AttnKernel::Auto) {
        launch_attention_decode_i8(p, n_split, group, stream);
    } else {
        launch_attention_generic(p, n_split, group, stream);
    }
    if (n_split > 1) {
        const dim3 cgrid(static_cast<unsigned>(p.n_head), static_cast<unsigned>(p.n_tok));
        const int par = std::min(COMBINE_MAX_PAR, MAX_HD * 4 / p.head_dim);
        kernel_attention_combine<<<cgrid, p.head_dim * par, 0, as_stream(stream)>>>(p, n_split);
        JLLM_CUDA_LAUNCH_CHECK("kernel_attention_combine");
    } else if (p.out_q8 != nullptr) {
        launch_quantize_act(p.out, p.n_tok, static_cast<int64_t>(p.n_head) * p.head_dim, p.out_q8, stream);
    }
}

}  // namespace cuda
}  // namespace jllm
