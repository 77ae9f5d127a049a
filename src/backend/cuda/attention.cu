// backend/cuda/attention.cu — causal grouped-query attention over the INT8 or FP16 KV cache:
// launch_attention (the kernel it takes, the decode split plan, the Q/K/V post and the 8-bit
// output around it), the generic SIMT kernel and the combine of split results. The group-shared
// decode kernel (INT8, and FP16 at head_dim 128/256) is attention_decode.cu's, the tensor-core
// prefill attention_mma.cu's.
//
// The generic kernel: a block serves one KV head and a tile of QT query tokens, its warps the
// group's query heads x the tile's tokens (warp w: head hk * group + w % group, token
// tile * QT + w / group), so each K/V tile, loaded once into shared memory with coalesced
// 16-byte loads, serves every query that reads that KV head. Keys go in tiles of 32: lane l
// scores key l against its warp's query (held in shared memory), an online softmax keeps the
// running max m and sum l, and the V tile is folded into the output, lane l owning dims l,
// l+32, ... Causality: each warp stops at its own token's last position; the block loads up to
// the furthest one.
// Decode splits the KV length into up to max_split ranges (grid z) of >= ATTN_MIN_SPLIT_KEYS keys
// (>= one chunk, 32 x warps keys, for the group-shared decode kernel); each split
// writes its unnormalized (m, l, acc) per head to the work buffer and kernel_attention_combine
// merges them. A verification's few queries (AttentionParams::decode_rows) are decode steps in one
// launch: grid y is the query, each with its own position's split plan, then one combine for all.
// Scores: (q . k) * k_scale / sqrt(head_dim), as the CPU backend computes them.
#include <algorithm>
#include <cmath>

#include "backend/cuda/act_q8.cuh"
#include "backend/cuda/attention.cuh"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"
#include "core/error.h"

namespace jllm {
namespace cuda {

namespace {

constexpr int MAX_HD = 256;
constexpr int MAX_DPL = MAX_HD / WARP;  // output dims per lane
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
    // Keys of the plan: each query's own with decode_rows (as its kernel split them), else the
    // last token's (every token's splits are the same ranges).
    const int n_kv = (p.pos_dev ? *p.pos_dev : p.pos0) + (p.decode_rows ? t + 1 : p.n_tok);
    int per_split, n_used;
    split_plan(n_kv, n_split, min_keys, &per_split, &n_used);
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

// The combine of n_split splits of at least min_keys keys: one block per (head, token).
void launch_combine(const AttentionParams& p, int n_split, int min_keys, void* stream) {
    const dim3 grid(static_cast<unsigned>(p.n_head), static_cast<unsigned>(p.n_tok));
    const int par = std::min(COMBINE_MAX_PAR, MAX_HD * 4 / p.head_dim);
    kernel_attention_combine<<<grid, p.head_dim * par, 0, as_stream(stream)>>>(p, n_split, min_keys);
    JLLM_CUDA_LAUNCH_CHECK("kernel_attention_combine");
}

// Fewest keys per split of the kernel that runs: a chunk of the group-shared kernel, else a tile.
int split_min_keys(bool grouped, const AttnChoice& choice) { return grouped ? choice.decode_warps * WARP : ATTN_MIN_SPLIT_KEYS; }

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

// The Q/K/V post of p (if any): returned for the decode kernel to fold in where `fold`, else
// launched here first (null returned).
const QkvPostParams* post_to_fold(const AttentionParams& p, bool fold, void* stream) {
    if (p.post == nullptr) return nullptr;
    JLLM_ASSERT(p.post->q == p.q && p.post->n_tok == p.n_tok && p.post->k_cache == p.k_cache &&
                p.post->v_cache == p.v_cache && p.post->pos_dev == p.pos_dev);
    if (fold) return p.post;
    launch_qkv_post(*p.post, stream);
    return nullptr;
}

// Decode splits in the grid for a query over n_kv keys: graph mode sizes the grid for max_split
// (the kernels skip what the position does not need), otherwise the plan is made here.
int decode_grid_splits(const AttentionParams& p, int n_kv, int min_keys) {
    const bool can_split = p.max_split > 1 && p.work != nullptr;
    if (p.pos_dev != nullptr) return can_split ? p.max_split : 1;
    if (!can_split) return 1;
    int per = 0, used = 0;
    split_plan(n_kv, p.max_split, min_keys, &per, &used);
    return used > 1 ? p.max_split : 1;
}

void launch_attention_rows(const AttentionParams& p, int group, void* stream) {
    JLLM_ASSERT_MSG(p.n_tok <= GEMV_MAX_TOKENS, "attention: decode_rows takes a few queries");
    if (!use_grouped_decode(1, p.kv_type, group, p.head_dim, p.choice)) {
        // Heads the group-shared kernel does not serve: the post, a decode launch per query, then
        // the 8-bit rows.
        if (p.post != nullptr) launch_qkv_post(*p.post, stream);
        const int64_t Q = static_cast<int64_t>(p.n_head) * p.head_dim;
        for (int t = 0; t < p.n_tok; ++t) {
            AttentionParams a = p;
            a.q = p.q + t * Q;
            a.out = p.out + t * Q;
            a.n_tok = 1;
            a.pos0 = p.pos0 + t;
            a.pos_dev = p.pos_dev ? p.pos_dev + t : nullptr;
            a.out_q8 = nullptr;
            a.post = nullptr;
            a.decode_rows = false;
            launch_attention(a, stream);
        }
        if (p.out_q8 != nullptr) launch_quantize_act(p.out, p.n_tok, Q, p.out_q8, stream);
        return;
    }
    // The last query reads the most keys: the grid's splits are what its step would take. A query
    // whose own plan uses one split goes through the combine too, which gives the same bits as
    // the kernel's direct write (its weight is exp(0) = 1).
    const int min_keys = split_min_keys(true, p.choice);
    const int n_split = decode_grid_splits(p, p.pos0 + p.n_tok, min_keys);
    if (n_split > 1) {
        const size_t need = attention_work_floats(p.n_tok, p.n_head, p.head_dim, p.max_split);
        JLLM_ASSERT_MSG(p.work_floats >= need, "attention: decode_rows needs n_tok rows of split work");
    }
    // Heads per block as a step at the last query's position has them. The post folds in where a
    // step's would and a block's tasks (its query heads, K and V at each new position among its
    // keys: up to n_tok) take at most two rounds of its warps; more rounds cost more than the
    // post's own launch (H100, qwen3-4b: 4 tokens 2.38 ms folded against 2.37 apart at d0, 2.99
    // against 2.93 at d4096; 2 tokens 2.07 against 2.12 and 2.39 against 2.45).
    const DecodeHeads heads = attention_decode_heads(group, p.n_head, n_split, device_sm_count(), p.choice.decode_warps);
    const QkvPostParams* post =
        post_to_fold(p, heads.folds_post && heads.per_block + 2 * p.n_tok <= 2 * p.choice.decode_warps, stream);
    launch_attention_decode_grouped(p, n_split, min_keys, post, heads.per_block, stream);
    if (n_split > 1) launch_combine(p, n_split, min_keys, stream);
}

}  // namespace

int attention_split_keys(KvType kv, int n_head, int n_head_kv, int head_dim, const AttnChoice& choice) {
    return split_min_keys(use_grouped_decode(1, kv, n_head / n_head_kv, head_dim, choice), choice);
}

size_t attention_work_floats(int n_tok, int n_head, int head_dim, int max_split) {
    return static_cast<size_t>(n_tok) * n_head * max_split * (head_dim + 2);
}

void launch_attention(const AttentionParams& p, void* stream) {
    JLLM_ASSERT(p.n_tok >= 1 && p.pos0 >= 0 && p.n_head_kv >= 1 && p.n_head % p.n_head_kv == 0);
    JLLM_ASSERT(p.head_dim % WARP == 0 && p.head_dim <= MAX_HD);
    const int group = p.n_head / p.n_head_kv;
    if (group > MAX_WARPS) throw JllmError(strfmt("cuda: attention supports at most %d query heads per KV head", MAX_WARPS));
    JLLM_ASSERT(p.choice.decode_warps == 1 || p.choice.decode_warps == 2 || p.choice.decode_warps == 4);
    JLLM_ASSERT(p.max_split <= ATTN_MAX_SPLIT_GRID);
    if (p.decode_rows && p.n_tok > 1) {
        launch_attention_rows(p, group, stream);
        return;
    }
    JLLM_ASSERT_MSG(p.pos_dev == nullptr || p.n_tok == 1, "attention: device-side position is for decode");
    const bool grouped = use_grouped_decode(p.n_tok, p.kv_type, group, p.head_dim, p.choice);
    const int min_keys = split_min_keys(grouped, p.choice);
    const int n_split = p.n_tok == 1 ? decode_grid_splits(p, p.pos0 + 1, min_keys) : 1;
    // The Q/K/V post: folded into the grouped decode kernel where a block's heads, K and V take one
    // round of its warps, or two rounds on a large grid (there the saved launch outweighs the
    // second round; at short contexts it does not: docs/gpu_speed_notes.md), else its own kernel
    // first.
    const DecodeHeads heads = grouped ? attention_decode_heads(group, p.n_head, n_split, device_sm_count(),
                                                               p.choice.decode_warps)
                                      : DecodeHeads{group, false};
    const QkvPostParams* post = post_to_fold(p, heads.folds_post, stream);
    // The 8-bit output: by the combine kernel with a split, by the group-shared kernel without one
    // (it writes out_q8 exactly then), else by its own kernel.
    auto quantize_out = [&]() {
        if (p.out_q8 != nullptr) {
            launch_quantize_act(p.out, p.n_tok, static_cast<int64_t>(p.n_head) * p.head_dim, p.out_q8, stream);
        }
    };
    if (n_split == 1 && p.choice.kernel == AttnKernel::Auto && attention_mma_supported(p)) {
        const MmaSplit sp = attention_mma_split(p, device_sm_count());
        JLLM_ASSERT(sp.n_split <= ATTN_MAX_SPLIT_GRID);
        launch_attention_mma(p, sp, stream);
        if (sp.n_split > 1) {
            // the splits' rows at a stride of n_split; split_plan(n_kv, n_split, per_split) gives
            // back per_split and n_split (n_split = ceil(n_kv / per_split))
            AttentionParams cp = p;
            cp.max_split = sp.n_split;
            launch_combine(cp, sp.n_split, sp.per_split, stream);
        } else {
            quantize_out();
        }
        return;
    }
    if (grouped) {
        launch_attention_decode_grouped(p, n_split, min_keys, post, heads.per_block, stream);
    } else {
        launch_attention_generic(p, n_split, group, stream);
    }
    if (n_split > 1) {
        launch_combine(p, n_split, min_keys, stream);
    } else if (!grouped) {
        quantize_out();
    }
}

}  // namespace cuda
}  // namespace jllm
