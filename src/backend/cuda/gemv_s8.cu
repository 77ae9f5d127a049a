// backend/cuda/gemv_s8.cu — the decode GEMV on int8 tensor cores: tiled Q4_K against act_q8k
// activations of 1..GEMV_S8_MAX_TOKENS tokens (cuda_ops.h: launch_gemv_s8, gemv_s8_split).
//
// A warp takes 16 rows, the 8-row tile groups 2p and 2p + 1 as the mma's rows 0-7 and 8-15, and
// the block columns kp, kp + k_split, .. (k_split warps per 16 rows, in one block). Per super-block
// lane (g, c) loads bytes 8c..8c + 7 of each 32-byte qs group i of row g in both tiles (an 8-byte
// load each) and gives them to the mma as k positions 4c..4c + 3 (bytes 8c..8c + 3) and
// 16 + 4c..19 + 4c (bytes 8c + 4..8c + 7): the low nibbles are sub-block 2i's codes, the high
// nibbles, masked in place and read as unsigned bytes, 16 times sub-block 2i + 1's. The activations
// take the same order of k: lane (g, c) loads bytes 32j + 8c..32j + 8c + 7 of token g's block, so
// the tokens are the mma's 8 columns and any batch up to 8 issues the same instructions (lanes of
// absent tokens give zeros). Per super-block the warp issues 8 mma m16n8k32 and one m16n8k16.
//
// The sums per super-block and (row, token) are gemm_s8.cu's: each sub-block's integer dot product
// times its 6-bit scale, exact in int32 (the even sub-blocks' and the odd ones' (times 16) summed
// apart, then 16 even + odd = 16 isum), the minima's sum_j m_j S_j by one fp16 mma (exact), and
//   acc = fma(da, fma(-dmin, msum, (d / 16) * float(16 isum)), acc),
// which is gemm_s8_ref's term bit for bit: (d / 16) * float(16 isum) and d * float(isum) are the
// same real product rounded once. Each warp adds its super-blocks in order from zero; the block
// then adds its k_split warps' sums in kp order (gemv_s8_ref repeats both). The split depends on
// the matrix alone (gemv_s8_split), so row t of an n-token call is the one-token call's row for
// token t, bit for bit.
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "backend/cuda/act_q8.cuh"
#include "backend/cuda/act_q8k.cuh"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/gemv_s8.cuh"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/weight_tiles.cuh"
#include "core/error.h"

namespace jllm {
namespace cuda {

namespace {

constexpr int S8V_MAX_WARPS = 16;  // warps per block: k_split x the 16-row groups it holds
constexpr int S8V_BLOCK_WARPS = 8;  // the block the launch aims at where k_split divides it

// Up to GEMV_S8_MAX_SEG matrices of one width (Q, K, V) laid end to end by 16-row groups.
struct GemvS8Args {
    const uint8_t* w[GEMV_S8_MAX_SEG];
    const uint8_t* w2;  // SwiGLU (one segment): the up projection
    float* y[GEMV_S8_MAX_SEG];
    int64_t rows[GEMV_S8_MAX_SEG];
    int64_t grp_end[GEMV_S8_MAX_SEG];  // cumulative 16-row groups
    const int8_t* xq;
    const uint8_t* rec;
    int8_t* yq;    // SwiGLU: y's act_q8 copy by halves (null: none)
    float2* ys;    // its scales, two halves per 32-row block
    int64_t nb;
    int k_split, groups_per_block, out_mode;
};
static_assert(GEMV_S8_MAX_SEG == 3, "kernel_gemv_s8 selects among three segments");

// acc[e] (row g + 8 (e / 2), token 2c + e % 2) += this super-block's term (above); the lane's
// pieces are gemv_s8.cuh's, which the host twin of the lanes runs too.
__device__ __forceinline__ void superblock(const S8Tiles& t, const S8Act& x, int c, float (&acc)[4]) {
    S8Lane p;
    s8_lane_prepare(t, c, p);
    int lo[4] = {0, 0, 0, 0}, hi[4] = {0, 0, 0, 0};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int j = 2 * i + h;
            uint32_t a[4];
            s8_a_words(t, i, h, a);
            int r[4];
            mma_16832_u8s8_new(r, a, x.x[j].x, x.x[j].y);
            s8_add(h ? hi : lo, s8_scale(p, 0, j), s8_scale(p, 1, j), r);
        }
    }
    float msum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    mma_16816(msum, p.am, x.hl.x, x.hl.y);
    s8_finish(p, lo, hi, msum, x, acc);
}

// M matrices (2: SwiGLU's gate and up) over N_TOK tokens; a block of k_split x groups_per_block warps.
template <int N_TOK, int M>
__global__ void __launch_bounds__(S8V_MAX_WARPS * WARP) kernel_gemv_s8(GemvS8Args a) {
    using F = TileFmt<GgmlType::Q4_K>;
    __shared__ float part[S8V_MAX_WARPS][M][4][WARP];
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    const int g = lane >> 2, c = lane & 3;
    const int ks = a.k_split, kp = warp % ks;
    const int64_t gg = static_cast<int64_t>(blockIdx.x) * a.groups_per_block + warp / ks;  // 16 rows
    // The segment by selects, not by indexing the parameter arrays (which would copy them to local
    // memory in every thread).
    const int64_t e0 = a.grp_end[0], e1 = a.grp_end[1], groups = a.grp_end[2];
    const int seg = M == 2 ? 0 : (gg < e0 ? 0 : (gg < e1 ? 1 : 2));  // SwiGLU: one segment
    const int64_t grp = gg - (seg == 0 ? 0 : (seg == 1 ? e0 : e1));
    const int64_t rows = gg >= groups ? 0 : (seg == 0 ? a.rows[0] : (seg == 1 ? a.rows[1] : a.rows[2]));
    const uint8_t* w1 = seg == 0 ? a.w[0] : (seg == 1 ? a.w[1] : a.w[2]);
    const int64_t nb = a.nb, cols = nb * 256, r0 = 16 * grp;
    float acc[M][4];
#pragma unroll
    for (int m = 0; m < M; ++m) acc[m][0] = acc[m][1] = acc[m][2] = acc[m][3] = 0.0f;
    if (r0 < rows) {
        // A last group of 8 rows reads its one tile twice; the copy's rows are not stored.
        const int64_t t0 = 2 * grp, t1 = r0 + 8 < rows ? t0 + 1 : t0;
        // Pointers at block column kp, stepped by k_split columns.
        const int64_t rec_stride = nb * Q8K_REC;
        const uint8_t* xp = reinterpret_cast<const uint8_t*>(a.xq) + g * cols + 256 * kp + 8 * c;
        const uint8_t* hp = a.rec + g * rec_stride + kp * Q8K_REC + 8 * c;
        const uint8_t* dp = a.rec + 2 * c * rec_stride + kp * Q8K_REC + Q8K_D;
        const uint8_t* wp[M][2];
#pragma unroll
        for (int m = 0; m < M; ++m) {
            const uint8_t* w = m ? a.w2 : w1;
            wp[m][0] = w + (t0 * nb + kp) * F::BYTES;
            wp[m][1] = w + (t1 * nb + kp) * F::BYTES;
        }
        // Two super-blocks' loads in flight per warp (one for SwiGLU's two matrices: 128 registers).
        constexpr int UNROLL = M == 1 ? 2 : 1;
#pragma unroll UNROLL
        for (int64_t b = kp; b < nb; b += ks) {
            S8Act x;
            load_act(x, N_TOK, xp, hp, dp, rec_stride, g, c);
#pragma unroll
            for (int m = 0; m < M; ++m) {
                S8Tiles t;
                load_tiles(t, wp[m][0], wp[m][1], g, c);
                superblock(t, x, c, acc[m]);
                wp[m][0] += ks * F::BYTES;
                wp[m][1] += ks * F::BYTES;
            }
            xp += 256 * ks;
            hp += ks * Q8K_REC;
            dp += ks * Q8K_REC;
        }
    }
    if (ks > 1) {
#pragma unroll
        for (int m = 0; m < M; ++m)
#pragma unroll
            for (int e = 0; e < 4; ++e) part[warp][m][e][lane] = acc[m][e];
        __syncthreads();
        if (kp == 0) {
            for (int k = 1; k < ks; ++k) {
#pragma unroll
                for (int m = 0; m < M; ++m)
#pragma unroll
                    for (int e = 0; e < 4; ++e) acc[m][e] += part[warp + k][m][e][lane];
            }
        }
    }
    if (kp != 0 || r0 >= rows) return;
    float* y = seg == 0 ? a.y[0] : (seg == 1 ? a.y[1] : a.y[2]);
    float v[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
        const int64_t r = r0 + g + 8 * (e >> 1);
        const int n = 2 * c + (e & 1);
        v[e] = M == 2 ? silu_mul(acc[0][e], acc[M - 1][e]) : acc[0][e];
        if (r >= rows || n >= N_TOK) continue;
        float& o = y[n * rows + r];
        if (a.out_mode == static_cast<int>(MatOut::Add)) {
            o += v[e];
        } else {
            o = v[e];
        }
    }
    if (M == 2 && a.yq != nullptr) {
        // The warp's 16 rows are half (r0 / 16) % 2 of act_q8 block r0 / 32 of each token:
        // quantize_half_warp's arithmetic over the 8 lanes of a column c (rows g and g + 8 of
        // tokens 2c and 2c + 1); rows is a multiple of 32 (every group whole).
#pragma unroll
        for (int p = 0; p < 2; ++p) {
            const int n = 2 * c + p;
            float amax = fmaxf(fabsf(v[p]), fabsf(v[2 + p]));
#pragma unroll
            for (int o = 4; o < WARP; o <<= 1) amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, o));
            const float d = amax / 127.0f;
            const float id = q8_inverse(d);
            const int q0 = q8_code(v[p], id), q1 = q8_code(v[2 + p], id);
            int sum = q0 + q1;
#pragma unroll
            for (int o = 4; o < WARP; o <<= 1) sum += __shfl_xor_sync(0xFFFFFFFFu, sum, o);
            if (n >= N_TOK) continue;
            int8_t* q = a.yq + n * rows + r0 + g;
            q[0] = static_cast<int8_t>(q0);
            q[8] = static_cast<int8_t>(q1);
            if (g == 0) a.ys[(n * rows + r0) / 16] = make_float2(d, d * static_cast<float>(sum));
        }
    }
}

template <int M>
void run_gemv_s8(const GemvS8Args& a, int n_tok, unsigned grid, int threads, cudaStream_t s) {
    switch (n_tok) {
        case 1: kernel_gemv_s8<1, M><<<grid, threads, 0, s>>>(a); break;
        case 2: kernel_gemv_s8<2, M><<<grid, threads, 0, s>>>(a); break;
        case 3: kernel_gemv_s8<3, M><<<grid, threads, 0, s>>>(a); break;
        case 4: kernel_gemv_s8<4, M><<<grid, threads, 0, s>>>(a); break;
        case 5: kernel_gemv_s8<5, M><<<grid, threads, 0, s>>>(a); break;
        case 6: kernel_gemv_s8<6, M><<<grid, threads, 0, s>>>(a); break;
        case 7: kernel_gemv_s8<7, M><<<grid, threads, 0, s>>>(a); break;
        default: kernel_gemv_s8<8, M><<<grid, threads, 0, s>>>(a); break;
    }
    JLLM_CUDA_LAUNCH_CHECK("kernel_gemv_s8");
}

}  // namespace

int gemv_s8_split(int64_t cols, int blocks_per_warp) {
    JLLM_ASSERT(cols % 256 == 0 && cols >= 256 && blocks_per_warp >= 1);
    const int64_t nb = cols / 256;
    return static_cast<int>(std::min<int64_t>(GEMV_S8_MAX_SPLIT, (nb + blocks_per_warp - 1) / blocks_per_warp));
}

void launch_gemv_s8_multi(int n_seg, const void* const* w, const void* w2, const int64_t* rows, int64_t cols,
                          const void* xq, int n_tok, int k_split, float* const* y, MatOut out, void* stream, void* yq) {
    JLLM_ASSERT(n_seg >= 1 && n_seg <= GEMV_S8_MAX_SEG && n_tok >= 1 && n_tok <= GEMV_S8_MAX_TOKENS && k_split >= 1 &&
                k_split <= GEMV_S8_MAX_SPLIT && reinterpret_cast<uintptr_t>(xq) % 16 == 0);
    JLLM_ASSERT(out != MatOut::SwiGLU || (n_seg == 1 && w2 != nullptr && reinterpret_cast<uintptr_t>(w2) % 16 == 0));
    JLLM_ASSERT(yq == nullptr || (out == MatOut::SwiGLU && rows[0] % 32 == 0 && yq != xq &&
                                  reinterpret_cast<uintptr_t>(yq) % 16 == 0));
    static_assert(GEMV_S8_MAX_SPLIT <= S8V_MAX_WARPS, "one 16-row group's warps in a block");
    GemvS8Args a{};
    int64_t groups = 0;
    for (int s = 0; s < GEMV_S8_MAX_SEG; ++s) {
        if (s < n_seg) {
            JLLM_ASSERT(tiles_fit(GgmlType::Q4_K, rows[s], cols) && reinterpret_cast<uintptr_t>(w[s]) % 16 == 0);
            a.w[s] = static_cast<const uint8_t*>(w[s]);
            a.y[s] = y[s];
            a.rows[s] = rows[s];
            groups += (rows[s] + 15) / 16;
        }
        a.grp_end[s] = groups;  // segments past n_seg: empty
    }
    a.w2 = static_cast<const uint8_t*>(w2);
    a.xq = static_cast<const int8_t*>(xq);
    a.rec = static_cast<const uint8_t*>(xq) + act_q8k_records_at(n_tok, cols);
    if (yq != nullptr) {
        a.yq = static_cast<int8_t*>(yq);
        a.ys = reinterpret_cast<float2*>(static_cast<uint8_t*>(yq) + act_q8_scales_at(n_tok, rows[0]));
    }
    a.nb = cols / 256;
    a.k_split = k_split;
    a.groups_per_block = std::max(1, S8V_BLOCK_WARPS / k_split);
    a.out_mode = static_cast<int>(out);
    const unsigned grid = static_cast<unsigned>((groups + a.groups_per_block - 1) / a.groups_per_block);
    const int threads = WARP * k_split * a.groups_per_block;
    if (out == MatOut::SwiGLU) {
        run_gemv_s8<2>(a, n_tok, grid, threads, as_stream(stream));
    } else {
        run_gemv_s8<1>(a, n_tok, grid, threads, as_stream(stream));
    }
}

void launch_gemv_s8(const void* w, const void* w2, int64_t rows, int64_t cols, const void* xq, int n_tok,
                    int k_split, float* y, MatOut out, void* stream, void* yq) {
    launch_gemv_s8_multi(1, &w, w2, &rows, cols, xq, n_tok, k_split, &y, out, stream, yq);
}

}  // namespace cuda
}  // namespace jllm
