// backend/cuda/attention_mma.cu — prefill attention on tensor cores (causal, grouped-query,
// INT8 or FP16 KV cache), for head_dim 64 and 128.
//
// A block serves one query head and FA_BQ = 64 query tokens with 4 warps of 16 tokens each.
// The warp's Q rows (rounded to fp16) stay in registers as mma A fragments. Keys come in tiles
// of FA_BK = 64: K and V are converted to fp16 in shared memory (INT8 values are exact in fp16;
// their per-position scales are applied outside the products: the K scale to the scores, the V
// scale to the probabilities), S = Q K^T by mma.sync m16n8k16, scaled and causally masked in
// registers, an online softmax keeps each row's running max m and sum l, and P (rounded to fp16,
// times the V scales) is fed straight from the score registers as the A operand of O += P V
// (V read with ldmatrix.trans). Numerics: Q and P rounded to fp16, V and K exact, sums in fp32
// (what the CPU backend does with an FP16 cache); the op test bounds the difference from the
// exact twin attention_ref.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/mma.cuh"
#include "core/error.h"

namespace jllm {
namespace cuda {

namespace {

constexpr int FA_BQ = 64;  // query tokens per block (16 per warp)
constexpr int FA_BK = 64;  // keys per tile
constexpr int FA_WARPS = 4;

template <int HD>
constexpr int fa_lds() {
    return HD + 8;  // shared row stride in halves: 16-byte aligned rows, ldmatrix without conflicts
}

template <int HD>
size_t fa_smem_bytes() {
    return 2 * static_cast<size_t>(FA_BK) * fa_lds<HD>() * sizeof(__half) + 2 * FA_BK * sizeof(float);
}

template <bool INT8, int HD>
__global__ void __launch_bounds__(FA_WARPS * WARP) kernel_attention_mma(AttentionParams p) {
    constexpr int LDS = fa_lds<HD>();
    constexpr int KD = HD / 16;  // k16 steps over the head dimension
    constexpr int DT = HD / 8;   // n8 tiles of the output
    constexpr int N_TOK = FA_BK / 8;  // n8 tiles of scores per key tile
    extern __shared__ __align__(16) uint8_t fa_smem[];
    __half* Ks = reinterpret_cast<__half*>(fa_smem);  // [FA_BK][LDS]; first holds Q
    __half* Vs = Ks + FA_BK * LDS;                    // [FA_BK][LDS]
    float* ksc = reinterpret_cast<float*>(Vs + FA_BK * LDS);
    float* vsc = ksc + FA_BK;

    const int h = blockIdx.x, hk = h / (p.n_head / p.n_head_kv);
    const int t0 = blockIdx.y * FA_BQ;
    const int tid = threadIdx.x, lane = tid % WARP, warp = tid / WARP;
    const int g = lane >> 2, q2 = (lane & 3) * 2;

    // ---- Q tile (fp16) -> this warp's A fragments
    for (int i = tid; i < FA_BQ * (HD / 4); i += FA_WARPS * WARP) {
        const int r = i / (HD / 4), c4 = i % (HD / 4);
        const int t = t0 + r;
        float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (t < p.n_tok) v = *reinterpret_cast<const float4*>(p.q + (static_cast<int64_t>(t) * p.n_head + h) * HD + 4 * c4);
        *reinterpret_cast<uint2*>(Ks + r * LDS + 4 * c4) = make_uint2(pack_half2(v.x, v.y), pack_half2(v.z, v.w));
    }
    __syncthreads();
    uint32_t qa[KD][4];
#pragma unroll
    for (int kk = 0; kk < KD; ++kk) ldmatrix_x4(qa[kk], Ks + (warp * 16 + (lane & 15)) * LDS + kk * 16 + (lane >> 4) * 8);

    // Rows g and g + 8 of this warp: their last visible key (causal); rows past the batch see
    // what the batch's last token sees (never written, but kept finite).
    int last_key[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int t = min(t0 + warp * 16 + g + 8 * r, p.n_tok - 1);
        last_key[r] = p.pos0 + t;
    }
    const int kv_end = p.pos0 + min(p.n_tok, t0 + FA_BQ);  // keys the block needs
    const float inv_sqrt = rsqrtf(static_cast<float>(HD));
    const uint8_t* kc = static_cast<const uint8_t*>(p.k_cache);
    const uint8_t* vc = static_cast<const uint8_t*>(p.v_cache);
    constexpr int ROW_BYTES = HD * (INT8 ? 1 : 2);
    constexpr int UNITS = ROW_BYTES / 16;  // 16-byte units per cached head vector

    float o[DT][4];
#pragma unroll
    for (int i = 0; i < DT; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

    for (int kb = 0; kb < kv_end; kb += FA_BK) {
        __syncthreads();  // Q fragments taken / the previous tile consumed
        // ---- K, V tile -> fp16 in shared memory (missing keys: zeros, masked below)
        for (int u = tid; u < FA_BK * UNITS; u += FA_WARPS * WARP) {
            const int j = u / UNITS, c = u % UNITS;
            uint4 kv = make_uint4(0, 0, 0, 0), vv = make_uint4(0, 0, 0, 0);
            if (kb + j < kv_end) {
                const int64_t off = (static_cast<int64_t>(kb + j) * p.n_head_kv + hk) * ROW_BYTES + c * 16;
                kv = ld16(kc + off);
                vv = ld16(vc + off);
            }
            if (INT8) {
                // 16 int8 -> 16 halves (exact)
                uint32_t kh[8], vh[8];
#pragma unroll
                for (int e = 0; e < 8; ++e) {
                    kh[e] = pack_half2(static_cast<float>(static_cast<int8_t>(byte_of(kv, 2 * e))),
                                       static_cast<float>(static_cast<int8_t>(byte_of(kv, 2 * e + 1))));
                    vh[e] = pack_half2(static_cast<float>(static_cast<int8_t>(byte_of(vv, 2 * e))),
                                       static_cast<float>(static_cast<int8_t>(byte_of(vv, 2 * e + 1))));
                }
                uint4* kd = reinterpret_cast<uint4*>(Ks + j * LDS + c * 16);
                uint4* vd = reinterpret_cast<uint4*>(Vs + j * LDS + c * 16);
                kd[0] = make_uint4(kh[0], kh[1], kh[2], kh[3]);
                kd[1] = make_uint4(kh[4], kh[5], kh[6], kh[7]);
                vd[0] = make_uint4(vh[0], vh[1], vh[2], vh[3]);
                vd[1] = make_uint4(vh[4], vh[5], vh[6], vh[7]);
            } else {
                *reinterpret_cast<uint4*>(Ks + j * LDS + c * 8) = kv;
                *reinterpret_cast<uint4*>(Vs + j * LDS + c * 8) = vv;
            }
        }
        if (tid < FA_BK) {
            float ks = 1.0f, vs = 1.0f;
            if (INT8 && kb + tid < kv_end) {
                const int64_t si = static_cast<int64_t>(kb + tid) * p.n_head_kv + hk;
                ks = ldh(p.k_scale[si]);
                vs = ldh(p.v_scale[si]);
            }
            ksc[tid] = ks * inv_sqrt;
            vsc[tid] = vs;
        }
        __syncthreads();

        // ---- S = Q K^T (16 rows x 64 keys per warp)
        float s[N_TOK][4];
#pragma unroll
        for (int i = 0; i < N_TOK; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.0f;
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
        // ---- scale, mask, online softmax (row r: elements 2r, 2r + 1 of each tile)
        float mt[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int nt = 0; nt < N_TOK; ++nt) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int key = kb + nt * 8 + q2 + (e & 1), r = e >> 1;
                const float v = key <= last_key[r] ? s[nt][e] * ksc[key - kb] : -INFINITY;
                s[nt][e] = v;
                mt[r] = fmaxf(mt[r], v);
            }
        }
        float corr[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            mt[r] = fmaxf(mt[r], __shfl_xor_sync(0xffffffffu, mt[r], 1));
            mt[r] = fmaxf(mt[r], __shfl_xor_sync(0xffffffffu, mt[r], 2));
            const float m_new = fmaxf(m[r], mt[r]);  // finite: key kb <= last_key in the first tile
            corr[r] = expf(m[r] - m_new);
            m[r] = m_new;
            l[r] *= corr[r];
        }
#pragma unroll
        for (int i = 0; i < DT; ++i) {
            o[i][0] *= corr[0];
            o[i][1] *= corr[0];
            o[i][2] *= corr[1];
            o[i][3] *= corr[1];
        }
        // ---- O += P V, P from the score registers (two n8 score tiles = one k16 A fragment)
#pragma unroll
        for (int kk2 = 0; kk2 < FA_BK / 16; ++kk2) {
            uint32_t pa[4];
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                const int nt = 2 * kk2 + half;
                float pr[4];
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    pr[e] = expf(s[nt][e] - m[e >> 1]);
                    l[e >> 1] += pr[e];
                    pr[e] *= vsc[nt * 8 + q2 + (e & 1)];
                }
                pa[2 * half] = pack_half2(pr[0], pr[1]);      // row g
                pa[2 * half + 1] = pack_half2(pr[2], pr[3]);  // row g + 8
            }
            // A fragment order: (g, k 0-7), (g + 8, k 0-7), (g, k 8-15), (g + 8, k 8-15)
            const uint32_t a[4] = {pa[0], pa[1], pa[2], pa[3]};
#pragma unroll
            for (int dp = 0; dp < DT / 2; ++dp) {
                uint32_t b[4];
                ldmatrix_x4_trans(b, Vs + (kk2 * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LDS + dp * 16 + (lane >> 4) * 8);
                mma_16816(o[2 * dp], a, b[0], b[1]);
                mma_16816(o[2 * dp + 1], a, b[2], b[3]);
            }
        }
    }

    // ---- normalize and store rows g and g + 8
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int t = t0 + warp * 16 + g + 8 * r;
        if (t >= p.n_tok) continue;
        float* out = p.out + (static_cast<int64_t>(t) * p.n_head + h) * HD;
        const float inv_l = 1.0f / l[r];
#pragma unroll
        for (int i = 0; i < DT; ++i) {
            *reinterpret_cast<float2*>(out + i * 8 + q2) = make_float2(o[i][2 * r] * inv_l, o[i][2 * r + 1] * inv_l);
        }
    }
}

template <bool INT8, int HD>
void launch_fa(const AttentionParams& p, cudaStream_t st) {
    const size_t smem = fa_smem_bytes<HD>();
    const auto kernel = kernel_attention_mma<INT8, HD>;
    allow_dynamic_smem(kernel, smem);
    const dim3 grid(static_cast<unsigned>(p.n_head), static_cast<unsigned>((p.n_tok + FA_BQ - 1) / FA_BQ));
    kernel<<<grid, FA_WARPS * WARP, smem, st>>>(p);
    JLLM_CUDA_LAUNCH_CHECK("kernel_attention_mma");
}

}  // namespace

bool attention_mma_supported(const AttentionParams& p) {
    return p.n_tok > 1 && p.pos_dev == nullptr && (p.head_dim == 64 || p.head_dim == 128);
}

void launch_attention_mma(const AttentionParams& p, void* stream) {
    JLLM_ASSERT(attention_mma_supported(p));
    const bool int8 = p.kv_type == KvType::Int8;
    cudaStream_t st = as_stream(stream);
    if (p.head_dim == 64) {
        if (int8) launch_fa<true, 64>(p, st);
        else launch_fa<false, 64>(p, st);
    } else {
        if (int8) launch_fa<true, 128>(p, st);
        else launch_fa<false, 128>(p, st);
    }
}

}  // namespace cuda
}  // namespace jllm
