// backend/cuda/attention_mma.cu — prefill attention on tensor cores (causal, grouped-query,
// INT8 or FP16 KV cache), for head_dim 64 and 128.
//
// A block serves FA_ROWS = 128 query rows: HB query heads of one KV group (the largest of 8, 4,
// 2, 1 dividing the group) times 128 / HB tokens, with 8 warps of 16 rows (one head, 16 tokens)
// each, so every K/V tile is copied (and INT8's V converted) once for all the heads that share
// it. Keys come in tiles of FA_BK = 64.
// S = Q K^T, a warp's Q rows held in registers as mma A fragments:
//   FP16: Q rounded to fp16, K as cached, mma.sync m16n8k16 (fp32 sums);
//   INT8: each Q row (one token's head) quantized to int8 at max |q| / 127, K's cached bytes read
//   by ldmatrix where they landed (16-byte units permuted by the key row against bank
//   conflicts), mma.sync m16n8k32 (exact int32 sums), times the row's and the key's scales.
// The scores are scaled into log2 units and causally masked in registers (the mask only on tiles
// past a row's last key), an online softmax in base 2 keeps each row's running max m and sum l
// (the output rescaled only when a max grew), and P (rounded to fp16; INT8: times the V scales)
// is fed straight from the score registers as the A operand of O += P V (V as fp16, INT8's
// converted exactly, read with ldmatrix.trans).
// Pipeline, one barrier per key tile: FP16 copies tile i + 1 (cp.async) while tile i is scored;
// INT8 has tile i + 2's bytes in flight and converts tile i + 1's V to fp16 in the same interval.
// Where the grid would leave SMs idle (a short prefill at depth), the keys are split across blocks
// (grid z, attention_mma_split): each split leaves its rows' O, m and l in the work buffer and
// attention.cu's combine merges them, as for a split decode.
// Numerics: Q rounded to fp16 (INT8: to int8 per row) and P to fp16, V and K exact,
// exponentials by ex2.approx, sums in fp32; the op test bounds the difference from the exact twin
// attention_ref on the rounded queries.
#include <algorithm>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/mma.cuh"
#include "core/error.h"

namespace jllm {
namespace cuda {

namespace {

constexpr int FA_BK = 64;     // keys per tile
constexpr int FA_ROWS = 128;  // query rows (tokens x heads) per block
constexpr int FA_MIN_SPLIT_TILES = 4;  // key tiles per split at least (attention_mma_split)

template <int HD>
__host__ __device__ constexpr int fa_lds() {
    return HD + 8;  // shared row stride in halves: 16-byte aligned rows, ldmatrix without conflicts
}

// Shared memory. FP16: two stages of fp16 tiles (K [FA_BK][LDS], then V), the second holding Q at
// the start. INT8: two fp16 V tiles, three stages of the cached K bytes ([FA_BK][HD], read where
// they land), two of the V bytes and two tiles' scales.
template <int HD>
__host__ __device__ constexpr size_t fa_half_tile_bytes() {
    return static_cast<size_t>(FA_BK) * fa_lds<HD>() * sizeof(__half);
}
template <bool INT8, int HD>
size_t fa_smem_bytes() {
    return INT8 ? 2 * fa_half_tile_bytes<HD>() + 5 * static_cast<size_t>(FA_BK) * HD + 4 * FA_BK * sizeof(float)
                : 4 * fa_half_tile_bytes<HD>();
}

// The 16-byte unit where unit c of key row j sits in a K stage (INT8): permuted by the row, so
// that the 8 rows of one ldmatrix matrix fall in 8 different bank groups.
template <int HD>
__device__ __forceinline__ int fa_kunit(int j, int c) {
    return HD == 128 ? c ^ (j & 7) : c ^ ((j >> 1) & 3);
}

// An int32 below 2^22 in magnitude as a float, exactly (an integer add and a float add; the
// conversion instruction runs at a quarter of the rate). A score's sum is at most 128 x 128 x 128.
__device__ __forceinline__ float small_int_to_float(int v) {
    return __int_as_float(0x4B400000 + v) - 12582912.0f;
}

// Four ints in -127..127 as the bytes of a word (the first lowest).
__device__ __forceinline__ uint32_t pack_s8x4(int a, int b, int c, int d) {
    return (static_cast<uint32_t>(a) & 0xFFu) | (static_cast<uint32_t>(b) & 0xFFu) << 8 |
           (static_cast<uint32_t>(c) & 0xFFu) << 16 | static_cast<uint32_t>(d) << 24;
}
static_assert(FA_ROWS <= 2 * FA_BK, "Q's rows fit one fp16 stage's K and V");

// 2^x (ex2.approx.ftz: results below 2^-126 flush to 0, far under a half's resolution of P).
__device__ __forceinline__ float fast_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// Four signed bytes as two half2 (exact): 0x64XX is the half 1024 + XX, so the bytes biased by
// 128 under the exponent of 1024, less 1152.
__device__ __forceinline__ void i8x4_to_half2x2(uint32_t w, uint32_t& lo, uint32_t& hi) {
    const uint32_t u = w ^ 0x80808080u;
    const uint32_t a = __byte_perm(u, 0x64646464u, 0x4140), b = __byte_perm(u, 0x64646464u, 0x4342);
    const __half2 bias = __half2half2(__ushort_as_half(0x6480));  // 1152
    const __half2 ha = __hsub2(*reinterpret_cast<const __half2*>(&a), bias);
    const __half2 hb = __hsub2(*reinterpret_cast<const __half2*>(&b), bias);
    lo = *reinterpret_cast<const uint32_t*>(&ha);
    hi = *reinterpret_cast<const uint32_t*>(&hb);
}

// per_split: 0, or the keys of each of gridDim.z splits (a multiple of FA_BK): split z scores keys
// [z * per_split, (z + 1) * per_split) and leaves its rows unnormalized in p.work for the combine.
template <bool INT8, int HD, int HB>
__global__ void __launch_bounds__(FA_ROWS / 16 * WARP, 1) kernel_attention_mma(AttentionParams p, int per_split) {
    constexpr int WARPS = FA_ROWS / 16, THREADS = WARPS * WARP;
    static_assert(WARPS % HB == 0, "a block's warps cover its heads");
    static_assert(HD * 128 * 128 < (1 << 22), "an int8 score converts exactly (small_int_to_float)");
    constexpr int LDS = fa_lds<HD>();
    constexpr int KD = HD / 16;       // k16 steps over the head dimension
    constexpr int DT = HD / 8;        // n8 tiles of the output
    constexpr int N_TOK = FA_BK / 8;  // n8 tiles of scores per key tile
    constexpr int BQ = FA_ROWS / HB;
    constexpr int ROW_BYTES = HD * (INT8 ? 1 : 2);
    constexpr int UNITS = ROW_BYTES / 16;  // 16-byte units per cached head vector
    extern __shared__ __align__(16) uint8_t fa_smem[];
    // FP16: stage st's fp16 K and V tiles; INT8: V's only.
    auto tile_k = [&](int st) { return reinterpret_cast<__half*>(fa_smem + 2 * st * fa_half_tile_bytes<HD>()); };
    auto tile_v = [&](int st) {
        return INT8 ? reinterpret_cast<__half*>(fa_smem + st * fa_half_tile_bytes<HD>()) : tile_k(st) + FA_BK * LDS;
    };
    uint8_t* raw = fa_smem + 2 * fa_half_tile_bytes<HD>();        // INT8: [3] K stages, [2] V stages
    float* scl = reinterpret_cast<float*>(raw + 5 * FA_BK * HD);  // INT8: [2][ks, vs][FA_BK]
    __half* qs = tile_k(1);  // FP16: Q's stage, read into registers before any copy lands there

    const int tid = threadIdx.x, lane = tid % WARP, warp = tid / WARP;
    const int h = blockIdx.x * HB + warp % HB, hk = blockIdx.x * HB / (p.n_head / p.n_head_kv);
    const int t0 = blockIdx.y * BQ, tw = t0 + 16 * (warp / HB);  // the block's and the warp's first token
    const int g = lane >> 2, q2 = (lane & 3) * 2;
    const int k_begin = blockIdx.z * per_split;                  // the split's first key (a tile's)
    int kv_end = p.pos0 + min(p.n_tok, t0 + BQ);                  // keys the block needs
    if (per_split > 0) kv_end = min(kv_end, k_begin + per_split);  // ... of this split
    const int i0 = k_begin / FA_BK;
    const int n_tiles = kv_end > k_begin ? (kv_end - k_begin + FA_BK - 1) / FA_BK : 0;  // 0: a split past them
    const float scale = rsqrtf(static_cast<float>(HD)) * 1.4426950408889634f;  // scores in log2 units
    const uint8_t* kc = static_cast<const uint8_t*>(p.k_cache);
    const uint8_t* vc = static_cast<const uint8_t*>(p.v_cache);

    // The split's tile i (keys from (i0 + i) * FA_BK; its stages: issue_tile): its cached K/V rows
    // into (dk, dv) rows of `stride` bytes with cp.async (missing keys: zeros, finite for P V where P
    // is 0); INT8: its scales into registers.
    float nks = 1.0f, nvs = 1.0f;
    auto issue = [&](int i, uint8_t* dk, uint8_t* dv, int stride) {
        const int kb = (i0 + i) * FA_BK;
        for (int u = tid; u < FA_BK * UNITS; u += THREADS) {
            const int j = u / UNITS, c = u % UNITS;
            uint8_t* d0 = dk + j * stride + (INT8 ? fa_kunit<HD>(j, c) : c) * 16;
            uint8_t* d1 = dv + j * stride + c * 16;
            if (kb + j < kv_end) {
                const int64_t off = (static_cast<int64_t>(kb + j) * p.n_head_kv + hk) * ROW_BYTES + c * 16;
                cp_async16(d0, kc + off);
                cp_async16(d1, vc + off);
            } else {
                *reinterpret_cast<uint4*>(d0) = make_uint4(0, 0, 0, 0);
                *reinterpret_cast<uint4*>(d1) = make_uint4(0, 0, 0, 0);
            }
        }
        cp_async_commit();
        if (INT8 && tid < FA_BK) {
            nks = nvs = 1.0f;
            if (kb + tid < kv_end) {
                const int64_t si = static_cast<int64_t>(kb + tid) * p.n_head_kv + hk;
                nks = ldh(p.k_scale[si]);
                nvs = ldh(p.v_scale[si]);
            }
        }
    };
    // INT8: tile i's cached K bytes (stage i % 3: scored from there while tiles i + 1 and i + 2
    // arrive) and V bytes (stage i % 2: converted one tile ahead).
    auto raw_k = [&](int i) { return raw + (i % 3) * FA_BK * HD; };
    auto raw_v = [&](int i) { return raw + (3 + (i & 1)) * FA_BK * HD; };
    auto issue_tile = [&](int i) {  // into stage i % 2 (INT8: the raw stages)
        const int st = i & 1;
        if constexpr (INT8) issue(i, raw_k(i), raw_v(i), HD);
        else issue(i, reinterpret_cast<uint8_t*>(tile_k(st)), reinterpret_cast<uint8_t*>(tile_v(st)), LDS * 2);
    };
    // INT8: tile i's scales (from the registers issue() filled) and its V bytes as fp16 (exact)
    // into stage i % 2, 8 bytes a thread: consecutive threads write consecutive 16-byte units.
    auto convert_tile = [&](int i) {
        const int st = i & 1;
        if (tid < FA_BK) {
            scl[(2 * st) * FA_BK + tid] = nks * scale;
            scl[(2 * st + 1) * FA_BK + tid] = nvs;
        }
        const uint8_t* src = raw_v(i);
        __half* dst = tile_v(st);
        for (int u = tid; u < FA_BK * (HD / 8); u += THREADS) {
            const int j = u / (HD / 8), c = u % (HD / 8);
            const uint2 w = *reinterpret_cast<const uint2*>(src + j * HD + c * 8);
            uint4 a;
            i8x4_to_half2x2(w.x, a.x, a.y);
            i8x4_to_half2x2(w.y, a.z, a.w);
            *reinterpret_cast<uint4*>(dst + j * LDS + c * 8) = a;
        }
    };

    if (n_tiles > 0) issue_tile(0);
    uint32_t qa[INT8 ? 1 : KD][4];        // the warp's A fragments: FP16 one per k16 step (fp16) ...
    uint32_t qa8[INT8 ? HD / 32 : 1][4];  // ... INT8 one per k32 step (int8)
    float qsc[2] = {1.0f, 1.0f};          // INT8: rows g and g + 8's query scales
    if constexpr (INT8) {
        // ---- the warp's Q rows g and g + 8 straight into m16n8k32 A fragments: columns 4c..4c + 3
        // and 16 + 4c.. of each 32, as int8 of the row's scale max |q| / 127
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const int t = tw + g + 8 * r;
            const float* qrow = p.q + (static_cast<int64_t>(t) * p.n_head + h) * HD + 2 * q2;
            float4 v[HD / 32][2];
            float amax = 0.0f;
#pragma unroll
            for (int kk = 0; kk < HD / 32; ++kk) {
#pragma unroll
                for (int hf = 0; hf < 2; ++hf) {
                    v[kk][hf] = t < p.n_tok ? *reinterpret_cast<const float4*>(qrow + 32 * kk + 16 * hf)
                                            : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                    amax = fmaxf(amax, fmaxf(fmaxf(fabsf(v[kk][hf].x), fabsf(v[kk][hf].y)),
                                             fmaxf(fabsf(v[kk][hf].z), fabsf(v[kk][hf].w))));
                }
            }
            amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
            amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
            const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
            qsc[r] = amax / 127.0f;
#pragma unroll
            for (int kk = 0; kk < HD / 32; ++kk) {
#pragma unroll
                for (int hf = 0; hf < 2; ++hf) {
                    const float4 x = v[kk][hf];
                    qa8[kk][r + 2 * hf] = pack_s8x4(__float2int_rn(x.x * inv), __float2int_rn(x.y * inv),
                                                    __float2int_rn(x.z * inv), __float2int_rn(x.w * inv));
                }
            }
        }
    } else {
        // ---- Q (fp16) of every warp: row r of the stage is row r % 16 of the warp's tile r / 16
        for (int i = tid; i < FA_ROWS * (HD / 4); i += THREADS) {
            const int r = i / (HD / 4), c4 = i % (HD / 4);
            const int w = r / 16, t = t0 + 16 * (w / HB) + r % 16, hq = blockIdx.x * HB + w % HB;
            float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (t < p.n_tok) v = *reinterpret_cast<const float4*>(p.q + (static_cast<int64_t>(t) * p.n_head + hq) * HD + 4 * c4);
            *reinterpret_cast<uint2*>(qs + r * LDS + 4 * c4) = make_uint2(pack_half2(v.x, v.y), pack_half2(v.z, v.w));
        }
    }
    if constexpr (INT8) cp_async_wait<0>();
    __syncthreads();
    if constexpr (!INT8) {
#pragma unroll
        for (int kk = 0; kk < KD; ++kk) ldmatrix_x4(qa[kk], qs + (warp * 16 + (lane & 15)) * LDS + kk * 16 + (lane >> 4) * 8);
    }
    if constexpr (INT8) {
        if (n_tiles > 0) convert_tile(0);
        if (n_tiles > 1) issue_tile(1);
    }

    // Rows g and g + 8: their last visible key (causal); rows past the batch see what the
    // batch's last token sees (never written, but kept finite).
    int last_key[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) last_key[r] = p.pos0 + min(tw + g + 8 * r, p.n_tok - 1);
    const int warp_last_key = p.pos0 + min(tw + 15, p.n_tok - 1);
    const bool warp_idle = tw >= p.n_tok;

    float o[DT][4];
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
    for (int j = 0; j < DT; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;

    for (int i = 0; i < n_tiles; ++i) {
        const int st = i & 1, kb = (i0 + i) * FA_BK;
        // Tile i is in stage st (INT8: converted in the last interval; FP16: its copy landed), and
        // every warp is done with tile i - 1 and with Q's stage.
        cp_async_wait<0>();
        __syncthreads();
        if constexpr (INT8) {
            if (i + 1 < n_tiles) {
                convert_tile(i + 1);  // its bytes landed (the barrier); the stage of tile i - 1
                if (i + 2 < n_tiles) issue_tile(i + 2);  // the raw stage tile i left
            }
        } else {
            if (i + 1 < n_tiles) issue_tile(i + 1);  // the stage tile i - 1 left
        }
        if (warp_idle || kb > warp_last_key) continue;  // warp-uniform: nothing this warp sees
        const __half* Vs = tile_v(st);
        const float* ksc = scl + (2 * st) * FA_BK;
        const float* vsc = ksc + FA_BK;

        // ---- S = Q K^T (16 rows x 64 keys per tile)
        float s[N_TOK][4];
        if constexpr (INT8) {
            // int8 Q times the int8 K where it landed: matrix lane / 8 of an ldmatrix is keys + 8
            // (lane / 16) and the 16-byte unit 2 kk + (lane / 8) % 2 (a k32 step's two halves)
            const uint8_t* Kr = raw_k(i);
            int si[N_TOK][4];
#pragma unroll
            for (int j = 0; j < N_TOK; ++j) si[j][0] = si[j][1] = si[j][2] = si[j][3] = 0;
#pragma unroll
            for (int kk = 0; kk < HD / 32; ++kk) {
#pragma unroll
                for (int np = 0; np < N_TOK / 2; ++np) {
                    const int key = np * 16 + ((lane >> 4) << 3) + (lane & 7), unit = 2 * kk + ((lane >> 3) & 1);
                    uint32_t b[4];
                    ldmatrix_x4(b, Kr + key * HD + 16 * fa_kunit<HD>(key, unit));
                    mma_16832_s8(si[2 * np], qa8[kk], b[0], b[1]);
                    mma_16832_s8(si[2 * np + 1], qa8[kk], b[2], b[3]);
                }
            }
#pragma unroll
            for (int j = 0; j < N_TOK; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) s[j][e] = small_int_to_float(si[j][e]) * qsc[e >> 1];
        } else {
            const __half* Ks = tile_k(st);
#pragma unroll
            for (int j = 0; j < N_TOK; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < KD; ++kk) {
#pragma unroll
                for (int np = 0; np < N_TOK / 2; ++np) {
                    uint32_t b[4];
                    ldmatrix_x4(b, Ks + (np * 16 + (lane & 7) + ((lane >> 4) << 3)) * LDS + kk * 16 + ((lane >> 3) & 1) * 8);
                    mma_16816(s[2 * np], qa[kk], b[0], b[1]);
                    mma_16816(s[2 * np + 1], qa[kk], b[2], b[3]);
                }
            }
        }
        // ---- scale (log2 domain), mask, online softmax (row r: elements 2r, 2r + 1 of each n8
        // tile). The causal mask only where the tile passes a row's last key (warp-uniform).
        const bool masked = __any_sync(0xffffffffu, kb + FA_BK - 1 > last_key[0]);  // the warp's first row
        bool grew = false;
        float corr[2], mref[2];
        float mt[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int nt = 0; nt < N_TOK; ++nt) {
            const float2 ks = INT8 ? *reinterpret_cast<const float2*>(ksc + nt * 8 + q2) : make_float2(scale, scale);
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int key = kb + nt * 8 + q2 + (e & 1), r = e >> 1;
                float v = s[nt][e] * ((e & 1) ? ks.y : ks.x);
                if (masked && key > last_key[r]) v = -INFINITY;
                s[nt][e] = v;
                mt[r] = fmaxf(mt[r], v);
            }
        }
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            mt[r] = fmaxf(mt[r], __shfl_xor_sync(0xffffffffu, mt[r], 1));
            mt[r] = fmaxf(mt[r], __shfl_xor_sync(0xffffffffu, mt[r], 2));
            // m_new is finite from a row's first visible key on (without a split: the first tile);
            // until then (a split's tiles past the row's last key) it stays -inf, P = 0.
            const float m_new = fmaxf(m[r], mt[r]);
            grew |= m_new > m[r];
            corr[r] = m_new == -INFINITY ? 1.0f : fast_exp2(m[r] - m_new);
            m[r] = m_new;
            mref[r] = m_new == -INFINITY ? 0.0f : m_new;
            l[r] *= corr[r];
        }
        if (__any_sync(0xffffffffu, grew)) {  // else every corr is 1: nothing to rescale
#pragma unroll
            for (int j = 0; j < DT; ++j) {
                o[j][0] *= corr[0];
                o[j][1] *= corr[0];
                o[j][2] *= corr[1];
                o[j][3] *= corr[1];
            }
        }
        // ---- O += P V, P from the score registers (two n8 score tiles = one k16 A fragment);
        // P * v_scale <= the scale, a half: no saturation needed
#pragma unroll
        for (int kk2 = 0; kk2 < FA_BK / 16; ++kk2) {
            uint32_t pa[4];
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                const int nt = 2 * kk2 + half;
                const float2 vs = INT8 ? *reinterpret_cast<const float2*>(vsc + nt * 8 + q2) : make_float2(1.0f, 1.0f);
                float pr[4];
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    pr[e] = fast_exp2(s[nt][e] - mref[e >> 1]);
                    l[e >> 1] += pr[e];
                    if (INT8) pr[e] *= (e & 1) ? vs.y : vs.x;
                }
                const __half2 lo = __floats2half2_rn(pr[0], pr[1]), hi = __floats2half2_rn(pr[2], pr[3]);
                // A fragment order: (g, k 0-7), (g + 8, k 0-7), (g, k 8-15), (g + 8, k 8-15)
                pa[2 * half] = *reinterpret_cast<const uint32_t*>(&lo);
                pa[2 * half + 1] = *reinterpret_cast<const uint32_t*>(&hi);
            }
#pragma unroll
            for (int dp = 0; dp < DT / 2; ++dp) {
                uint32_t b[4];
                ldmatrix_x4_trans(b, Vs + (kk2 * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LDS + dp * 16 + (lane >> 4) * 8);
                mma_16816(o[2 * dp], pa, b[0], b[1]);
                mma_16816(o[2 * dp + 1], pa, b[2], b[3]);
            }
        }
    }

    // ---- rows g and g + 8: normalized into out; with a split unnormalized into the work buffer
    // [n_tok][n_head][gridDim.z][HD + 2] (O, then m in natural-log units and l, as the decode
    // kernels leave them for kernel_attention_combine; a split without keys for a row: m = -inf,
    // l = 0)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        float lr = l[r];
        lr += __shfl_xor_sync(0xffffffffu, lr, 1);
        lr += __shfl_xor_sync(0xffffffffu, lr, 2);
        const int t = tw + g + 8 * r;
        if (t >= p.n_tok) continue;
        if (per_split > 0) {
            float* w = p.work + ((static_cast<int64_t>(t) * p.n_head + h) * gridDim.z + blockIdx.z) * (HD + 2);
#pragma unroll
            for (int j = 0; j < DT; ++j) *reinterpret_cast<float2*>(w + j * 8 + q2) = make_float2(o[j][2 * r], o[j][2 * r + 1]);
            if (q2 == 0) {
                w[HD] = m[r] * 0.6931471805599453f;  // log2 units -> natural
                w[HD + 1] = lr;
            }
            continue;
        }
        float* out = p.out + (static_cast<int64_t>(t) * p.n_head + h) * HD;
        const float inv_l = 1.0f / lr;
#pragma unroll
        for (int j = 0; j < DT; ++j)
            *reinterpret_cast<float2*>(out + j * 8 + q2) = make_float2(o[j][2 * r] * inv_l, o[j][2 * r + 1] * inv_l);
    }
}

// Query heads per block: the largest of 8, 4, 2, 1 that divides the group.
int fa_heads_per_block(int group) {
    int hb = 8;
    while (group % hb != 0) hb /= 2;
    return hb;
}

template <bool INT8, int HD, int HB>
void launch_fa(const AttentionParams& p, const MmaSplit& sp, cudaStream_t st) {
    const size_t smem = fa_smem_bytes<INT8, HD>();
    const auto kernel = kernel_attention_mma<INT8, HD, HB>;
    allow_dynamic_smem(kernel, smem);
    constexpr int BQ = FA_ROWS / HB;
    const dim3 grid(static_cast<unsigned>(p.n_head / HB), static_cast<unsigned>((p.n_tok + BQ - 1) / BQ),
                    static_cast<unsigned>(sp.n_split));
    kernel<<<grid, FA_ROWS / 16 * WARP, smem, st>>>(p, sp.n_split > 1 ? sp.per_split : 0);
    JLLM_CUDA_LAUNCH_CHECK("kernel_attention_mma");
}

template <bool INT8, int HD>
void launch_fa_heads(const AttentionParams& p, const MmaSplit& sp, cudaStream_t st) {
    switch (fa_heads_per_block(p.n_head / p.n_head_kv)) {
        case 8: launch_fa<INT8, HD, 8>(p, sp, st); break;
        case 4: launch_fa<INT8, HD, 4>(p, sp, st); break;
        case 2: launch_fa<INT8, HD, 2>(p, sp, st); break;
        default: launch_fa<INT8, HD, 1>(p, sp, st); break;
    }
}

}  // namespace

bool attention_mma_int8_queries(const AttentionParams& p) { return p.kv_type == KvType::Int8; }

bool attention_mma_supported(const AttentionParams& p) {
    return p.n_tok > 1 && !p.decode_rows && p.pos_dev == nullptr && (p.head_dim == 64 || p.head_dim == 128);
}

MmaSplit attention_mma_split(const AttentionParams& p, int sms) {
    const int hb = fa_heads_per_block(p.n_head / p.n_head_kv), bq = FA_ROWS / hb;
    const int blocks = p.n_head / hb * ((p.n_tok + bq - 1) / bq);
    const int n_kv = p.pos0 + p.n_tok, tiles = (n_kv + FA_BK - 1) / FA_BK;
    int64_t s = std::min({sms / blocks, tiles / FA_MIN_SPLIT_TILES, p.max_split});
    const int64_t row_floats = static_cast<int64_t>(p.n_tok) * p.n_head * (p.head_dim + 2);
    s = p.work == nullptr ? 0 : std::min<int64_t>(s, static_cast<int64_t>(p.work_floats) / row_floats);
    if (s < 2) return {};
    MmaSplit sp;
    sp.per_split = static_cast<int>((tiles + s - 1) / s) * FA_BK;
    sp.n_split = (n_kv + sp.per_split - 1) / sp.per_split;
    return sp.n_split > 1 ? sp : MmaSplit{};
}

size_t attention_mma_work_floats(int head_dim, int sms) {
    return static_cast<size_t>(sms) * FA_ROWS * (head_dim + 2);
}

void launch_attention_mma(const AttentionParams& p, const MmaSplit& sp, void* stream) {
    JLLM_ASSERT(attention_mma_supported(p));
    JLLM_ASSERT(sp.n_split == 1 || (sp.per_split % FA_BK == 0 && p.work != nullptr &&
                                    static_cast<size_t>(sp.n_split) * p.n_tok * p.n_head * (p.head_dim + 2) <= p.work_floats));
    const bool int8 = p.kv_type == KvType::Int8;
    cudaStream_t st = as_stream(stream);
    if (p.head_dim == 64) {
        if (int8) launch_fa_heads<true, 64>(p, sp, st);
        else launch_fa_heads<false, 64>(p, sp, st);
    } else {
        if (int8) launch_fa_heads<true, 128>(p, sp, st);
        else launch_fa_heads<false, 128>(p, sp, st);
    }
}

}  // namespace cuda
}  // namespace jllm
