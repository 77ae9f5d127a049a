// tests/support/cuda_host_decoders.cu — the kernels' weight decoders run on the host, for tests
// without a GPU (declared in cuda_ops.h): the fp32 chunk dequantizer of either layout, the GEMM's
// staging of a tile and its decoder of the staged copy, the tiled dp4a GEMV's per-lane arithmetic
// over every lane, and the int8 chunk decoder. They call the kernels' own device code
// (backend/cuda/*.cuh, host-callable), so a test checks those bit for bit.
#include <cstdint>
#include <cstring>
#include <string>

#include "backend/cuda/act_q8.cuh"
#include "backend/cuda/chunk_dequant.cuh"
#include "backend/cuda/chunk_q8.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/gemv_q8_tiled.cuh"
#include "backend/cuda/weight_tiles.cuh"
#include "core/error.h"

namespace jllm {
namespace cuda {

void dequant_chunk_host(GgmlType type, const void* row, int64_t c, float* out) {
    const bool ok = dispatch_type(type, [&](auto tag) {
        ChunkDequant<decltype(tag)::value>::run(static_cast<const uint8_t*>(row), c, out);
    });
    if (!ok) throw JllmError(std::string("cuda: no chunk dequantizer for type ") + type_name(type));
}

void dequant_chunk_tiled_host(GgmlType type, const void* base, int64_t cols, int64_t r, int64_t c, float* out) {
    JLLM_ASSERT(cols % 256 == 0 && r >= 0 && c >= 0 && c < cols / 32);
    with_tiled_type(type, [&](auto tag) {
        chunk_of<decltype(tag)::value, true>(static_cast<const uint8_t*>(base), 0, cols / 256, r, c, out);
    });
}

void stage_tile_host(GgmlType type, const void* tile, void* staged) {
    with_tiled_type(type, [&](auto tag) {
        using F = TileFmt<decltype(tag)::value>;
        for (int o = 0; o < F::BYTES / 16; ++o) {
            std::memcpy(static_cast<uint8_t*>(staged) + 16 * F::staged_unit(o), static_cast<const uint8_t*>(tile) + 16 * o,
                        16);
        }
    });
}

void stage_tile_by_threads_host(GgmlType type, const void* tile, void* staged) {
    with_tiled_type(type, [&](auto tag) {
        constexpr GgmlType T = decltype(tag)::value;
        constexpr int UNITS = TileFmt<T>::BYTES / 16;
        int copies[UNITS] = {};
        for (int l = 0; l < 16; ++l) {
            for (int m = 0; m < tile_copies_per_thread<T>(); ++m) {
                int src = 0, dst = 0;
                if (!tile_copy_unit<T>(l, m, src, dst)) continue;
                JLLM_ASSERT(src >= 0 && src < UNITS && dst >= 0 && dst < UNITS);
                ++copies[src];
                std::memcpy(static_cast<uint8_t*>(staged) + 16 * dst, static_cast<const uint8_t*>(tile) + 16 * src, 16);
            }
        }
        for (int o = 0; o < UNITS; ++o) JLLM_ASSERT(copies[o] == 1);
    });
}

void dequant_chunk_staged_host(GgmlType type, const void* staged, int i, int j, float* out) {
    JLLM_ASSERT(i >= 0 && i < TILE_ROWS && j >= 0 && j < 8);
    with_tiled_type(type, [&](auto tag) {
        tile_chunk<decltype(tag)::value, true>(static_cast<const uint8_t*>(staged), i, j, out);
    });
}

void gemv_q8_tiled_host(GgmlType type, const void* tiles, int64_t rows, int64_t cols, const void* xq, int n_tok,
                        float* y) {
    JLLM_ASSERT(tiles_fit(type, rows, cols) && n_tok >= 1 && n_tok <= GEMV_MAX_TOKENS);
    with_tiled_type(type, [&](auto tag) {
        constexpr GgmlType T = decltype(tag)::value;
        using L = TileLane<T>;
        const int64_t nb = cols / 256, n_chunks = cols / 32;
        const uint8_t* w = static_cast<const uint8_t*>(tiles);
        const uint8_t* q = static_cast<const uint8_t*>(xq);
        const float4* xs = reinterpret_cast<const float4*>(q + act_q8_scales_at(n_tok, cols));
        for (int t = 0; t < n_tok; ++t) {
            for (int64_t r = 0; r < rows; ++r) {
                float acc = 0.0f;
                for (int64_t b = 0; b < nb; ++b) {
                    const uint8_t* tile = tile_of<T>(w, nb, r, b * 8);
                    for (int p = 0; p < 8; ++p) {  // the lanes of the row
                        L lane;
                        lane.load(tile, static_cast<int>(r % TILE_ROWS), p);
                        const int64_t c = b * 256 + L::col(p);
                        const uint4 x_lo = ld16(q + t * cols + c), x_hi = ld16(q + t * cols + c + L::HI);
                        acc += lane.dot(p, x_lo, x_hi, half_scales<L::SUMS>(xs, t * n_chunks + c / 32, p),
                                        half_scales<L::SUMS>(xs, t * n_chunks + (c + L::HI) / 32, p));
                    }
                }
                y[t * rows + r] = acc;
            }
        }
    });
}

void chunk_q8_host(GgmlType type, const void* row, int64_t c, int8_t* q, float* a, float* b) {
    uint32_t packed[8] = {};
    const bool ok = dispatch_q8_type(type, [&](auto tag) {
        ChunkQ8<decltype(tag)::value>::run(static_cast<const uint8_t*>(row), c, packed, a, b);
    });
    if (!ok) throw JllmError(std::string("cuda: no int8 chunk decoder for type ") + type_name(type));
    for (int i = 0; i < 32; ++i) q[i] = static_cast<int8_t>(packed[i / 4] >> (8 * (i % 4)));
}

}  // namespace cuda
}  // namespace jllm
