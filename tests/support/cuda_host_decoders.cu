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
#include "backend/cuda/gemv_s8.cuh"
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

namespace {

// mma.sync m16n8k32 (u8 A row-major, s8 B column-major, s32 D) over a warp's fragments as PTX lays
// them out: lane 4 g + c holds A rows g (a0, a2) and g + 8 (a1, a3) at k 4c..4c + 3 (a0, a1) and
// 16 + 4c.. (a2, a3), B column g at k 4c.. (b0) and 16 + 4c.. (b1), D rows g (d0, d1) and g + 8
// (d2, d3) at columns 2c, 2c + 1.
void mma_16832_u8s8_lanes(const uint32_t (&a)[32][4], const uint32_t (&b)[32][2], int (&d)[32][4]) {
    auto a_at = [&](int r, int k) {
        const uint32_t w = a[4 * (r % 8) + (k % 16) / 4][(r >= 8 ? 1 : 0) + (k >= 16 ? 2 : 0)];
        return static_cast<int>((w >> (8 * (k % 4))) & 0xFFu);
    };
    auto b_at = [&](int k, int n) {
        const uint32_t w = b[4 * n + (k % 16) / 4][k >= 16 ? 1 : 0];
        return static_cast<int>(static_cast<int8_t>(static_cast<uint8_t>(w >> (8 * (k % 4)))));
    };
    for (int l = 0; l < 32; ++l) {
        for (int e = 0; e < 4; ++e) {
            const int r = l / 4 + 8 * (e / 2), n = 2 * (l % 4) + e % 2;
            int sum = 0;
            for (int k = 0; k < 32; ++k) sum += a_at(r, k) * b_at(k, n);
            d[l][e] = sum;
        }
    }
}

// mma.sync m16n8k16 (fp16 A, B; fp32 D from zero) on integer-valued inputs whose products and sums
// stay below 2^24 (exact in any order): lane 4 g + c holds A rows g / g + 8 at k 2c, 2c + 1 (a0 / a1)
// and 8 + 2c.. (a2 / a3), B column g at k 2c.. (b0) and 8 + 2c.. (b1); D as above.
void mma_16816_lanes(const uint32_t (&a)[32][4], const uint32_t (&b)[32][2], float (&d)[32][4]) {
    auto half_at = [](uint32_t w, int i) {
        return static_cast<double>(fp16_to_f32(static_cast<uint16_t>(w >> (16 * i))));
    };
    for (int l = 0; l < 32; ++l) {
        for (int e = 0; e < 4; ++e) {
            const int r = l / 4 + 8 * (e / 2), n = 2 * (l % 4) + e % 2;
            double sum = 0.0;
            for (int k = 0; k < 16; ++k) {
                const double av = half_at(a[4 * (r % 8) + (k % 8) / 2][(r >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0)], k % 2);
                const double bv = half_at(b[4 * n + (k % 8) / 2][k >= 8 ? 1 : 0], k % 2);
                sum += av * bv;
            }
            d[l][e] = static_cast<float>(sum);
        }
    }
}

}  // namespace

void gemv_s8_lanes_host(const void* tiles, int64_t rows, int64_t cols, const void* xq, int n_tok, int k_split,
                        float* y) {
    JLLM_ASSERT(tiles_fit(GgmlType::Q4_K, rows, cols) && n_tok >= 1 && n_tok <= GEMV_S8_MAX_TOKENS && k_split >= 1);
    using F = TileFmt<GgmlType::Q4_K>;
    const int64_t nb = cols / 256, rec_stride = nb * Q8K_REC;
    const uint8_t* w = static_cast<const uint8_t*>(tiles);
    const uint8_t* x8 = static_cast<const uint8_t*>(xq);
    const uint8_t* rec = x8 + act_q8k_records_at(n_tok, cols);
    for (int64_t grp = 0; grp < (rows + 15) / 16; ++grp) {
        const int64_t r0 = 16 * grp, t0 = 2 * grp, t1 = r0 + 8 < rows ? t0 + 1 : t0;
        float total[32][4] = {};
        for (int kp = 0; kp < k_split; ++kp) {  // the warps of the group, added in kp order
            float acc[32][4] = {};
            for (int64_t b = kp; b < nb; b += k_split) {
                S8Tiles t[32];
                S8Act x[32];
                S8Lane p[32];
                for (int l = 0; l < 32; ++l) {
                    const int g = l / 4, c = l % 4;
                    load_tiles(t[l], w + (t0 * nb + b) * F::BYTES, w + (t1 * nb + b) * F::BYTES, g, c);
                    load_act(x[l], n_tok, x8 + g * cols + 256 * b + 8 * c, rec + g * rec_stride + b * Q8K_REC + 8 * c,
                             rec + 2 * c * rec_stride + b * Q8K_REC + Q8K_D, rec_stride, g, c);
                    s8_lane_prepare(t[l], c, p[l]);
                }
                int lo[32][4] = {}, hi[32][4] = {};
                for (int i = 0; i < 4; ++i) {
                    for (int h = 0; h < 2; ++h) {
                        const int j = 2 * i + h;
                        uint32_t a[32][4], bw[32][2];
                        int r[32][4];
                        for (int l = 0; l < 32; ++l) {
                            s8_a_words(t[l], i, h, a[l]);
                            bw[l][0] = x[l].x[j].x;
                            bw[l][1] = x[l].x[j].y;
                        }
                        mma_16832_u8s8_lanes(a, bw, r);
                        for (int l = 0; l < 32; ++l) {
                            s8_add(h ? hi[l] : lo[l], s8_scale(p[l], 0, j), s8_scale(p[l], 1, j), r[l]);
                        }
                    }
                }
                uint32_t am[32][4], hl[32][2];
                float msum[32][4];
                for (int l = 0; l < 32; ++l) {
                    for (int k = 0; k < 4; ++k) am[l][k] = p[l].am[k];
                    hl[l][0] = x[l].hl.x;
                    hl[l][1] = x[l].hl.y;
                }
                mma_16816_lanes(am, hl, msum);
                for (int l = 0; l < 32; ++l) s8_finish(p[l], lo[l], hi[l], msum[l], x[l], acc[l]);
            }
            for (int l = 0; l < 32; ++l) {
                for (int e = 0; e < 4; ++e) total[l][e] = kp == 0 ? acc[l][e] : total[l][e] + acc[l][e];
            }
        }
        for (int l = 0; l < 32; ++l) {
            for (int e = 0; e < 4; ++e) {
                const int64_t r = r0 + l / 4 + 8 * (e / 2);
                const int n = 2 * (l % 4) + e % 2;
                if (r < rows && n < n_tok) y[n * rows + r] = total[l][e];
            }
        }
    }
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
