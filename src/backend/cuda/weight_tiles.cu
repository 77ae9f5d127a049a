// backend/cuda/weight_tiles.cu — the host side of the tiled layout (weight_tiles.cuh): whether a
// matrix takes it, and the copy of every block's parts between the file's rows and the tiles.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/weight_tiles.cuh"
#include "core/error.h"

namespace jllm {
namespace cuda {

namespace {

// Copies the parts of every block between the file's layout (rows of blocks) and the tiled one;
// to_tiles: file -> tiles, else tiles -> file.
void tiles_copy(GgmlType type, const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols, bool to_tiles) {
    JLLM_ASSERT(tiles_fit(type, rows, cols) && src != dst);
    struct Part {
        size_t in_block;
        int in_tile, size;
    };
    using F6 = TileFmt<GgmlType::Q6_K>;
    using F4 = TileFmt<GgmlType::Q4_K>;
    const Part q6[4] = {{offsetof(BlockQ6_K, ql), F6::QL, 128},
                        {offsetof(BlockQ6_K, qh), F6::QH, 64},
                        {offsetof(BlockQ6_K, scales), F6::SC, 16},
                        {offsetof(BlockQ6_K, d), F6::D, 2}};
    const Part q4[2] = {{0, F4::HDR, 16}, {offsetof(BlockQ4_K, qs), F4::QS, 128}};
    static_assert(offsetof(BlockQ4_K, qs) == 16, "Q4_K header: d, dmin, scales");
    const bool is6 = type == GgmlType::Q6_K;
    const Part* parts = is6 ? q6 : q4;
    const int n_parts = is6 ? 4 : 2;
    const int64_t block = static_cast<int64_t>(type_traits(type).type_size);
    const int64_t tile_bytes = is6 ? F6::BYTES : F4::BYTES;
    const int64_t nb = cols / 256, rb = nb * block;
    for (int64_t g = 0; g < rows / TILE_ROWS; ++g) {
        for (int64_t b = 0; b < nb; ++b) {
            const int64_t tile = (g * nb + b) * tile_bytes;
            for (int i = 0; i < TILE_ROWS; ++i) {
                const int64_t blk = (g * TILE_ROWS + i) * rb + b * block;
                for (int k = 0; k < n_parts; ++k) {
                    const Part& p = parts[k];
                    const int64_t t = tile + p.in_tile + static_cast<int64_t>(i) * p.size;
                    const int64_t f = blk + static_cast<int64_t>(p.in_block);
                    std::memcpy(dst + (to_tiles ? t : f), src + (to_tiles ? f : t), static_cast<size_t>(p.size));
                }
            }
        }
    }
}

}  // namespace

bool tiles_fit(GgmlType type, int64_t rows, int64_t cols) {
    return has_tiles(type) && rows >= TILE_ROWS && rows % TILE_ROWS == 0 && cols >= 256 && cols % 256 == 0;
}

void to_tiles(GgmlType type, const void* src, void* dst, int64_t rows, int64_t cols) {
    tiles_copy(type, static_cast<const uint8_t*>(src), static_cast<uint8_t*>(dst), rows, cols, true);
}

void from_tiles(GgmlType type, const void* src, void* dst, int64_t rows, int64_t cols) {
    tiles_copy(type, static_cast<const uint8_t*>(src), static_cast<uint8_t*>(dst), rows, cols, false);
}

}  // namespace cuda
}  // namespace jllm
