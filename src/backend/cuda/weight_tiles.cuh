// backend/cuda/weight_tiles.cuh — the tiled device layout of Q4_K and Q6_K (WeightLayout::Tiles,
// cuda_ops.h) in device code: the tile format, the decoder of a chunk from a tile (in place or as
// the GEMM stages it), the row-wise kernels' decoder of either layout, and the switches over the
// formats. The host copy between the layouts is weight_tiles.cu.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "backend/cuda/chunk_dequant.cuh"
#include "core/error.h"

namespace jllm {
namespace cuda {

// WeightLayout::Tiles (cuda_ops.h) of Q4_K and Q6_K: tiles of 8 rows x 1 block that gather the
// 8 rows' parts by kind, so every part is 16-byte aligned and a warp's loads of one part are
// contiguous; the matrix keeps its size. Tile (g, b) (row group g, block column b) starts at
// (g * nb + b) * BYTES; the rows are a multiple of 8.
//   Q6_K, 1,680 bytes: ql 8 x 128 | qh 8 x 64 | scales 8 x 16 | d 8 x 2
//   Q4_K, 1,152 bytes: header 8 x 16 (d, dmin, scales) | qs 8 x 128
// The GEMM stages whole tiles in shared memory with the 16-byte units of each row's 128-byte
// (64-byte) part permuted, unit x of row i at x ^ (i mod 8) (x ^ (i mod 4)), so the rows of a
// tile, 128 bytes apart, do not all fall on the same banks (SWZ below).
constexpr int TILE_ROWS = 8;

// Where the GEMM stages unit o of a part that starts at unit `first` with `per_row` units per row
// (8 or 4): unit x of row i at x ^ (i mod per_row), as tile_unit<true> reads it.
__host__ __device__ __forceinline__ int staged_part_unit(int o, int first, int per_row) {
    const int u = o - first;
    return first + (u & ~(per_row - 1)) + ((u ^ (u / per_row)) & (per_row - 1));
}

template <GgmlType T>
struct TileFmt;
template <>
struct TileFmt<GgmlType::Q6_K> {
    static constexpr int QL = 0, QH = 8 * 128, SC = 8 * 192, D = 8 * 208, BYTES = 8 * 210;
    // Where the GEMM stages the tile's 16-byte unit o (in units): ql and qh permuted.
    static __host__ __device__ __forceinline__ int staged_unit(int o) {
        return o < 64 ? staged_part_unit(o, 0, 8) : (o < 96 ? staged_part_unit(o, 64, 4) : o);
    }
};
template <>
struct TileFmt<GgmlType::Q4_K> {
    static constexpr int HDR = 0, QS = 8 * 16, BYTES = 8 * 144;
    static __host__ __device__ __forceinline__ int staged_unit(int o) { return o < 8 ? o : staged_part_unit(o, 8, 8); }
};
static_assert(TileFmt<GgmlType::Q6_K>::BYTES % 16 == 0 && TileFmt<GgmlType::Q4_K>::BYTES % 16 == 0, "tile sizes");

// A tile's units split over 16 copying threads (the register-decoding GEMMs' stages): copy m of
// thread l takes the file's unit src to the stage's unit dst = staged_unit(src), and returns false
// where the thread has no copy m. Two neighbouring threads take the two halves of 32 bytes, so each
// copy instruction reads whole sectors, and a thread's copies of one part differ by constants:
// Q4_K: m 0-3 the qs row l / 2 (units l % 2 + 2m), m 4 header unit l (l < 8); Q6_K: m 0-3 the ql
// row l / 2, m 4-5 the qh row l / 2 (4 units a row), m 6 the scales and d (units 96 + l, l < 9).
template <GgmlType T>
constexpr int tile_copies_per_thread() {
    return T == GgmlType::Q4_K ? 5 : 7;
}
template <GgmlType T>
__host__ __device__ __forceinline__ bool tile_copy_unit(int l, int m, int& src, int& dst) {
    const int i = l >> 1, b = l & 1;
    if constexpr (T == GgmlType::Q4_K) {
        if (m < 4) {
            src = 8 + 8 * i + (b | 2 * m);
            dst = 8 + 8 * i + ((b ^ i) ^ 2 * m);
            return true;
        }
        src = dst = l;
        return l < 8;
    } else {
        static_assert(T == GgmlType::Q6_K, "tiles: Q4_K and Q6_K");
        if (m < 4) {
            src = 8 * i + (b | 2 * m);
            dst = 8 * i + ((b ^ i) ^ 2 * m);
            return true;
        }
        if (m < 6) {
            src = 64 + 4 * i + (b | 2 * (m - 4));
            dst = 64 + 4 * i + ((b ^ (i & 3)) ^ 2 * (m - 4));
            return true;
        }
        src = dst = 96 + l;
        return l < 9;
    }
}

constexpr bool has_tiles(GgmlType t) { return t == GgmlType::Q4_K || t == GgmlType::Q6_K; }

// The tile holding chunk c of row r (nb blocks per row).
template <GgmlType T>
__host__ __device__ __forceinline__ const uint8_t* tile_of(const uint8_t* base, int64_t nb, int64_t r, int64_t c) {
    return base + ((r / TILE_ROWS) * nb + c / 8) * TileFmt<T>::BYTES;
}

// 16-byte unit x of row i's part (at `part`, rb bytes per row) of a tile; SWZ: as staged by the GEMM.
template <bool SWZ>
__host__ __device__ __forceinline__ const uint8_t* tile_unit(const uint8_t* tile, int part, int rb, int i, int x) {
    return tile + part + rb * i + 16 * (SWZ ? x ^ (i & (rb / 16 - 1)) : x);
}

// Chunk j (0..7) of row i (0..7) of a tile (global or shared memory, generic loads): the values of
// ChunkDequant<T> on the file's layout.
template <GgmlType T, bool SWZ>
__host__ __device__ __forceinline__ void tile_chunk(const uint8_t* tile, int i, int j, float* y) {
    using F = TileFmt<T>;
    if constexpr (T == GgmlType::Q6_K) {
        const int xl = 4 * (j / 4) + 2 * (j % 2), xh = 2 * (j / 4);
        q6k_chunk_parts<true>(tile_unit<SWZ>(tile, F::QL, 128, i, xl), tile_unit<SWZ>(tile, F::QL, 128, i, xl + 1),
                              tile_unit<SWZ>(tile, F::QH, 64, i, xh), tile_unit<SWZ>(tile, F::QH, 64, i, xh + 1),
                              reinterpret_cast<const int8_t*>(tile + F::SC + 16 * i),
                              ldh(reinterpret_cast<const Half*>(tile + F::D)[i]), j, y);
    } else {
        static_assert(T == GgmlType::Q4_K, "tiles: Q4_K and Q6_K");
        const int x = 2 * (j / 2);
        q4k_chunk_parts(tile + F::HDR + 16 * i, tile_unit<SWZ>(tile, F::QS, 128, i, x),
                        tile_unit<SWZ>(tile, F::QS, 128, i, x + 1), j, y);
    }
}

// Chunk c of row r of a weight matrix in either layout (TILED: tiles, nb blocks per row; else the
// file's rows of row_bytes): the row-wise kernels' (fp32 GEMV, embedding) decoder.
template <GgmlType T, bool TILED>
__host__ __device__ __forceinline__ void chunk_of(const uint8_t* w, size_t row_bytes, int64_t nb, int64_t r, int64_t c,
                                                  float* y) {
    if constexpr (TILED) {
        tile_chunk<T, false>(tile_of<T>(w, nb, r, c), static_cast<int>(r % TILE_ROWS), static_cast<int>(c % 8), y);
    } else {
        ChunkDequant<T>::run(w + r * row_bytes, c, y);
    }
}

// Calls f(tag) for the types with a tiled layout (Q4_K, Q6_K); returns false for the others.
template <typename F>
bool dispatch_tiled_type(GgmlType t, F&& f) {
    if (t == GgmlType::Q4_K) f(TypeTag<GgmlType::Q4_K>{});
    else if (t == GgmlType::Q6_K) f(TypeTag<GgmlType::Q6_K>{});
    else return false;
    return true;
}

// Calls f(tag, std::bool_constant<tiled>) for a weight format the row-wise kernels and the GEMM
// take (every dispatch_type type in the file's rows; Q4_K/Q6_K tiled); returns false otherwise.
template <typename F>
bool dispatch_format(GgmlType t, bool tiled, F&& f) {
    if (tiled) return dispatch_tiled_type(t, [&](auto tag) { f(tag, std::true_type{}); });
    return dispatch_type(t, [&](auto tag) { f(tag, std::false_type{}); });
}

// f(tag) for a type with a tiled layout; an error naming the type otherwise.
template <typename F>
void with_tiled_type(GgmlType type, F&& f) {
    if (!dispatch_tiled_type(type, f)) throw JllmError(std::string("cuda: no tiled layout for type ") + type_name(type));
}

}  // namespace cuda
}  // namespace jllm
