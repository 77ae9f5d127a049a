// backend/cuda/gemv.cu — the row-wise kernels on fp32 values with the dequantization fused in
// (every type of dispatch_format, either layout): the decode matrix-vector product on fp32
// activations and the embedding lookup (the same per-chunk decoder, chunk_of). The products on
// 8-bit activations (dp4a) are gemv_q8.cu (the file's rows) and gemv_q8_tiled.cu (the tiled
// layout).
//
// GEMV layout: one warp per weight row, GEMV_ROWS rows (warps) per block. Lane l handles
// chunks l, l+32, ... of the row, so a warp's 32 lanes read 32 consecutive chunks — a
// contiguous stretch of the row (k-quant chunks are read as aligned 16-byte loads) — and each
// weight byte is read once for all n_tok (<= GEMV_MAX_TOKENS) tokens. Accumulation in fp32,
// one warp reduction per token at the end; the epilogue stores, adds (residual) or applies
// SwiGLU with a second weight matrix read in the same pass.
// Embedding: one block per token, its threads taking the row's chunks.
#include <cstddef>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/weight_tiles.cuh"
#include "core/error.h"

namespace jllm {
namespace cuda {

namespace {

constexpr int GEMV_ROWS = 4;

// w, w2: [rows][row_bytes] or tiled (TILED); x: [n_tok][cols]; y: [n_tok][rows].
template <GgmlType T, bool TILED>
__global__ void __launch_bounds__(GEMV_ROWS * WARP)
    kernel_gemv(const uint8_t* __restrict__ w, const uint8_t* __restrict__ w2, int64_t rows, int64_t cols,
                size_t row_bytes, const float* __restrict__ x, int n_tok, float* __restrict__ y, int out_mode) {
    const int lane = threadIdx.x % WARP;
    const int64_t r = static_cast<int64_t>(blockIdx.x) * GEMV_ROWS + threadIdx.x / WARP;
    if (r >= rows) return;
    const bool swiglu = out_mode == static_cast<int>(MatOut::SwiGLU);
    const int64_t n_chunks = cols / 32, nb = cols / 256;
    float acc[GEMV_MAX_TOKENS] = {};
    float acc2[GEMV_MAX_TOKENS] = {};
    for (int64_t c = lane; c < n_chunks; c += WARP) {
        float wv[32];
        chunk_of<T, TILED>(w, row_bytes, nb, r, c, wv);
#pragma unroll
        for (int t = 0; t < GEMV_MAX_TOKENS; ++t) {
            if (t < n_tok) {
                const float4* xp = reinterpret_cast<const float4*>(x + t * cols + c * 32);
#pragma unroll
                for (int i = 0; i < 8; ++i) {
                    const float4 xv = xp[i];
                    acc[t] += wv[4 * i] * xv.x + wv[4 * i + 1] * xv.y + wv[4 * i + 2] * xv.z + wv[4 * i + 3] * xv.w;
                }
            }
        }
        if (swiglu) {
            chunk_of<T, TILED>(w2, row_bytes, nb, r, c, wv);
#pragma unroll
            for (int t = 0; t < GEMV_MAX_TOKENS; ++t) {
                if (t < n_tok) {
                    const float4* xp = reinterpret_cast<const float4*>(x + t * cols + c * 32);
#pragma unroll
                    for (int i = 0; i < 8; ++i) {
                        const float4 xv = xp[i];
                        acc2[t] +=
                            wv[4 * i] * xv.x + wv[4 * i + 1] * xv.y + wv[4 * i + 2] * xv.z + wv[4 * i + 3] * xv.w;
                    }
                }
            }
        }
    }
#pragma unroll
    for (int t = 0; t < GEMV_MAX_TOKENS; ++t) {
        if (t >= n_tok) break;
        const float s = warp_sum(acc[t]);
        const float s2 = swiglu ? warp_sum(acc2[t]) : 0.0f;
        if (lane == 0) {
            float* out = y + t * rows + r;
            if (out_mode == static_cast<int>(MatOut::Store)) *out = s;
            else if (out_mode == static_cast<int>(MatOut::Add)) *out += s;
            else *out = silu_mul(s, s2);
        }
    }
}

// table: [n_vocab][row_bytes] or tiled (TILED); out: [n_tok][n_embd]; one block per token.
template <GgmlType T, bool TILED>
__global__ void kernel_embed(const uint8_t* __restrict__ table, int64_t n_vocab, int64_t n_embd, size_t row_bytes,
                             const int32_t* __restrict__ tokens, float* __restrict__ out) {
    const int t = blockIdx.x;
    const int32_t id = tokens[t];
    float* o = out + static_cast<int64_t>(t) * n_embd;
    const int64_t n_chunks = n_embd / 32;
    for (int64_t c = threadIdx.x; c < n_chunks; c += blockDim.x) {
        float v[32];
        if (id >= 0 && id < n_vocab) {
            chunk_of<T, TILED>(table, row_bytes, n_embd / 256, id, c, v);
        } else {
#pragma unroll
            for (int i = 0; i < 32; ++i) v[i] = __int_as_float(0x7fc00000);
        }
        float4* op = reinterpret_cast<float4*>(o + c * 32);
#pragma unroll
        for (int i = 0; i < 8; ++i) op[i] = make_float4(v[4 * i], v[4 * i + 1], v[4 * i + 2], v[4 * i + 3]);
    }
}

}  // namespace

bool matmul_type_supported(GgmlType type) {
    return dispatch_type(type, [](auto) {});
}

bool embed_type_supported(GgmlType type) { return matmul_type_supported(type); }

void launch_gemv(WeightFormat fmt, const void* w, const void* w2, int64_t rows, int64_t cols, const float* x,
                 int n_tok, float* y, MatOut out, void* stream) {
    JLLM_ASSERT(n_tok >= 1 && n_tok <= GEMV_MAX_TOKENS && cols % 32 == 0 && rows >= 1);
    JLLM_ASSERT(out != MatOut::SwiGLU || w2 != nullptr);
    JLLM_ASSERT(!fmt.tiled() || tiles_fit(fmt.type, rows, cols));
    const GgmlType type = fmt.type;
    const size_t rb = row_size(type, cols);
    const dim3 grid(static_cast<unsigned>((rows + GEMV_ROWS - 1) / GEMV_ROWS));
    auto launch = [&](auto kernel) {
        kernel<<<grid, GEMV_ROWS * WARP, 0, as_stream(stream)>>>(static_cast<const uint8_t*>(w),
                                                                 static_cast<const uint8_t*>(w2), rows, cols, rb, x,
                                                                 n_tok, y, static_cast<int>(out));
    };
    const bool ok = dispatch_format(type, fmt.tiled(), [&](auto tag, auto tiled) {
        launch(kernel_gemv<decltype(tag)::value, decltype(tiled)::value>);
    });
    if (!ok) throw JllmError(std::string("cuda: no GEMV kernel for weight type ") + type_name(type));
    JLLM_CUDA_LAUNCH_CHECK("kernel_gemv");
}

void launch_embed(WeightFormat fmt, const void* table, int64_t n_vocab, int64_t n_embd, const int32_t* tokens,
                  int n_tok, float* out, void* stream) {
    JLLM_ASSERT(n_tok >= 1 && n_embd % 32 == 0);
    JLLM_ASSERT(!fmt.tiled() || tiles_fit(fmt.type, n_vocab, n_embd));
    const GgmlType type = fmt.type;
    const size_t rb = row_size(type, n_embd);
    auto launch = [&](auto kernel) {
        kernel<<<n_tok, 128, 0, as_stream(stream)>>>(static_cast<const uint8_t*>(table), n_vocab, n_embd, rb, tokens,
                                                     out);
    };
    const bool ok = dispatch_format(type, fmt.tiled(), [&](auto tag, auto tiled) {
        launch(kernel_embed<decltype(tag)::value, decltype(tiled)::value>);
    });
    if (!ok) throw JllmError(std::string("cuda: no embedding kernel for type ") + type_name(type));
    JLLM_CUDA_LAUNCH_CHECK("kernel_embed");
}

}  // namespace cuda
}  // namespace jllm
