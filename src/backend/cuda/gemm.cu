// backend/cuda/gemm.cu — prefill matrix products: Y[n_tok][rows] = W[rows][cols] X[n_tok][cols].
//
// First, correct version (speed is the next step: mma.sync on fp16/int8 tiles): a block owns a
// tile of GEMM_BM weight rows x GEMM_BN tokens; per 32-element chunk of the reduction it
// dequantizes the tile's weight chunk into shared memory (one thread per row, with the same
// ChunkDequant as the GEMV), stages the activations' chunk, and every thread accumulates
// GEMM_BN / 4 outputs in fp32 registers. Same epilogues as the GEMV (store, add, SwiGLU).
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"
#include "core/error.h"

namespace jllm {
namespace cuda {

namespace {

constexpr int GEMM_BM = 64;       // weight rows per block
constexpr int GEMM_BN = 32;       // tokens per block
constexpr int GEMM_THREADS = 256;  // 64 rows x 4 token groups of 8
constexpr int GEMM_TPT = GEMM_BN / (GEMM_THREADS / GEMM_BM);  // tokens per thread: 8

// w, w2: [rows][row_bytes]; x: [n_tok][cols]; y: [n_tok][rows].
template <GgmlType T>
__global__ void __launch_bounds__(GEMM_THREADS)
    kernel_gemm(const uint8_t* __restrict__ w, const uint8_t* __restrict__ w2, int64_t rows, int64_t cols,
                size_t row_bytes, const float* __restrict__ x, int n_tok, float* __restrict__ y, int out_mode) {
    __shared__ float ws[2][GEMM_BM][33];  // dequantized chunk of W (and W2), [row][k]; +1 pad: no bank conflicts
    __shared__ float xs[GEMM_BN][33];     // activations' chunk, [token][k]
    const int tid = threadIdx.x;
    const int64_t r0 = static_cast<int64_t>(blockIdx.x) * GEMM_BM;
    const int t0 = blockIdx.y * GEMM_BN;
    const bool swiglu = out_mode == static_cast<int>(MatOut::SwiGLU);
    const int rr = tid % GEMM_BM;              // this thread's row in the tile
    const int tb = (tid / GEMM_BM) * GEMM_TPT;  // its first token in the tile (uniform per warp)
    float acc[GEMM_TPT] = {};
    float acc2[GEMM_TPT] = {};
    const int64_t n_chunks = cols / 32;
    for (int64_t c = 0; c < n_chunks; ++c) {
        if (tid < 2 * GEMM_BM) {
            const int m = tid / GEMM_BM;  // 0: W, 1: W2
            const int64_t r = r0 + rr;
            if (m == 0 || swiglu) {
                float v[32];
                if (r < rows) {
                    ChunkDequant<T>::run((m == 0 ? w : w2) + r * row_bytes, c, v);
                } else {
#pragma unroll
                    for (int i = 0; i < 32; ++i) v[i] = 0.0f;
                }
#pragma unroll
                for (int i = 0; i < 32; ++i) ws[m][rr][i] = v[i];
            }
        }
        for (int i = tid; i < GEMM_BN * 32; i += GEMM_THREADS) {
            const int tt = i / 32, kk = i % 32;
            const int t = t0 + tt;
            xs[tt][kk] = t < n_tok ? x[static_cast<int64_t>(t) * cols + c * 32 + kk] : 0.0f;
        }
        __syncthreads();
#pragma unroll 4
        for (int kk = 0; kk < 32; ++kk) {
            const float wv = ws[0][rr][kk];
#pragma unroll
            for (int i = 0; i < GEMM_TPT; ++i) acc[i] += wv * xs[tb + i][kk];
        }
        if (swiglu) {
#pragma unroll 4
            for (int kk = 0; kk < 32; ++kk) {
                const float wv = ws[1][rr][kk];
#pragma unroll
                for (int i = 0; i < GEMM_TPT; ++i) acc2[i] += wv * xs[tb + i][kk];
            }
        }
        __syncthreads();
    }
    const int64_t r = r0 + rr;
    if (r >= rows) return;
#pragma unroll
    for (int i = 0; i < GEMM_TPT; ++i) {
        const int t = t0 + tb + i;
        if (t >= n_tok) break;
        float* out = y + static_cast<int64_t>(t) * rows + r;
        if (out_mode == static_cast<int>(MatOut::Store)) *out = acc[i];
        else if (out_mode == static_cast<int>(MatOut::Add)) *out += acc[i];
        else *out = acc[i] / (1.0f + expf(-acc[i])) * acc2[i];
    }
}

}  // namespace

void launch_gemm(GgmlType type, const void* w, const void* w2, int64_t rows, int64_t cols, const float* x,
                 int n_tok, float* y, MatOut out, void* stream) {
    JLLM_ASSERT(n_tok >= 1 && cols % 32 == 0 && rows >= 1);
    JLLM_ASSERT(out != MatOut::SwiGLU || w2 != nullptr);
    const size_t rb = row_size(type, cols);
    const dim3 grid(static_cast<unsigned>((rows + GEMM_BM - 1) / GEMM_BM),
                    static_cast<unsigned>((n_tok + GEMM_BN - 1) / GEMM_BN));
    const bool ok = dispatch_type(type, [&](auto tag) {
        kernel_gemm<decltype(tag)::value><<<grid, GEMM_THREADS, 0, as_stream(stream)>>>(
            static_cast<const uint8_t*>(w), static_cast<const uint8_t*>(w2), rows, cols, rb, x, n_tok, y,
            static_cast<int>(out));
    });
    if (!ok) throw JllmError(std::string("cuda: no GEMM kernel for weight type ") + type_name(type));
    JLLM_CUDA_LAUNCH_CHECK("kernel_gemm");
}

void launch_matmul(GgmlType type, const void* w, const void* w2, int64_t rows, int64_t cols, const float* x,
                   int n_tok, float* y, MatOut out, void* stream) {
    if (n_tok <= GEMV_MAX_TOKENS) launch_gemv(type, w, w2, rows, cols, x, n_tok, y, out, stream);
    else launch_gemm(type, w, w2, rows, cols, x, n_tok, y, out, stream);
}

}  // namespace cuda
}  // namespace jllm
