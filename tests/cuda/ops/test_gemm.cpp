// tests/cuda/ops/test_gemm.cpp — the GEMM's parts: its launch plan (split-K, token tile) on the
// host, the tiled Q4_K/Q6_K layout and the GEMM's staged copy of a tile decoded on the host, the
// register-decoding kernel's half2 weight decoder, Q/K/V in one grid (launch_gemm_multi), and the fp16
// conversion of its input. Outputs are poisoned before each launch.
#include <gtest/gtest.h>

#if JLLM_CUDA

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "op_test_util.h"

namespace jllm::test {
namespace {

using cuda::MatOut;

// ---- error bounds (every tolerance of this file's tests)
// launch_gemm_multi, per matrix against gemm_ref (op_test_util.h's ProductBound, Store only): as
// test_matmul.cpp's GEMM, 1e-4 * sum_i |w_i x_i| + 1e-6 (fp32 accumulation in any order against an
// fp64 sum of the same weights and activations rounded to fp16).
constexpr ProductBound PRODUCT = {1e-4, 1e-6, 1.1};
// The register-decoding kernel's weights: bit for bit, except a warp whose weights could leave fp16's
// range: the fallback's fp32 value may round to fp16 one step away from the twin's (an fma
// against a multiply and a subtraction): one fp16 step there, relative.
constexpr float SATURATED_REL = 1e-3f;
// The tiled layout, the staged tile and the fp16 input conversion: bit for bit.

// The GEMM's launch plan (host code, no GPU): qwen3-4b's products at 33 tokens with the engine's
// work buffer split so that every block has the same few steps in one wave; grids that fill the
// GPU do not split; every plan fits its buffer.
TEST(CudaOps, GemmPlanOnHost) {
    const size_t work = cuda::gemm_work_floats_for_batch(512, 4096);
    struct Want {
        int64_t rows, cols;
        MatOut out;
        int split;
    };
    const Want want[] = {
        {4096, 2560, MatOut::Store, 8},    // attn_q: 32 row blocks x 8 = 256 blocks of 5 steps
        {1024, 2560, MatOut::Store, 14},   // attn_k/v: 8 x 14 = 112 blocks of <= 3 steps
        {2560, 4096, MatOut::Add, 13},     // attn_output: 20 x 13 = 260 blocks of <= 5 steps
        {9728, 2560, MatOut::SwiGLU, 5},   // gate+up: 152 x 5 = 760 blocks (3 waves) of 8 steps
        {2560, 9728, MatOut::Add, 13},     // ffn_down: 20 x 13 = 260 blocks of <= 12 steps
    };
    for (const Want& w : want) {
        const cuda::GemmPlan p = cuda::gemm_plan(w.rows, w.cols, 33, w.out, work);
        EXPECT_EQ(p.bn, 64) << w.rows << "x" << w.cols;
        EXPECT_EQ(p.split, w.split) << w.rows << "x" << w.cols;
    }
    EXPECT_EQ(cuda::gemm_plan(4096, 2560, 33, MatOut::Store, 0).split, 1);  // no work buffer
    const cuda::GemmPlan wide = cuda::gemm_plan(9728, 2560, 512, MatOut::SwiGLU, work);
    EXPECT_EQ(wide.bn, 128);
    EXPECT_EQ(wide.split, 1);
    std::mt19937 rng(4321);
    for (int i = 0; i < 2000; ++i) {
        const int64_t rows = 1 + static_cast<int64_t>(rng() % 20000), cols = 32 * (1 + static_cast<int64_t>(rng() % 400));
        const int n_tok = 5 + static_cast<int>(rng() % 600);
        const MatOut out = static_cast<MatOut>(rng() % 3);
        const size_t wf = rng() % 4 == 0 ? 0 : static_cast<size_t>(rng() % 8000000);
        const cuda::GemmPlan p = cuda::gemm_plan(rows, cols, n_tok, out, wf);
        SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols) + " n_tok " + std::to_string(n_tok));
        ASSERT_TRUE(p.bn == 64 || p.bn == 128);
        ASSERT_GE(p.split, 1);
        ASSERT_LE(p.split, cuda::GEMM_MAX_SPLIT);
        ASSERT_LE(p.split, (cols + 63) / 64);  // every part has a step
        if (p.bn == 128) {
            ASSERT_EQ(p.split, 1);
        }
        if (p.split > 1) {
            ASSERT_LE(static_cast<size_t>(p.split) * n_tok * rows * (out == MatOut::SwiGLU ? 2 : 1), wf);
        }
    }
}

// The tiled layout: a round trip is the identity, and every chunk decodes from the tiles bit for
// bit as from the file's layout (24 rows: three groups of 8; 3 blocks). Needs no GPU.
TEST(CudaOps, TilesDecodeAsTheFileLayoutOnHost) {
    EXPECT_TRUE(cuda::tiles_fit(GgmlType::Q6_K, 24, 768));
    EXPECT_TRUE(cuda::tiles_fit(GgmlType::Q4_K, 8, 256));
    EXPECT_FALSE(cuda::tiles_fit(GgmlType::Q6_K, 19, 768));  // rows not a multiple of 8
    EXPECT_FALSE(cuda::tiles_fit(GgmlType::Q5_K, 24, 768));
    EXPECT_FALSE(cuda::tiles_fit(GgmlType::Q8_0, 24, 768));
    std::mt19937 rng(606);
    for (GgmlType type : {GgmlType::Q4_K, GgmlType::Q6_K}) {
        SCOPED_TRACE(type_name(type));
        const int64_t rows = 24, cols = 768, rb = static_cast<int64_t>(row_size(type, cols));
        std::vector<uint8_t> file(static_cast<size_t>(rows * rb) + 16), tiles(file.size()), back(file.size());
        uint8_t* f = file.data() + (16 - reinterpret_cast<uintptr_t>(file.data()) % 16) % 16;
        uint8_t* t = tiles.data() + (16 - reinterpret_cast<uintptr_t>(tiles.data()) % 16) % 16;
        for (int64_t r = 0; r < rows; ++r) {
            const std::vector<uint8_t> row = random_weight_row(type, cols, rng);
            std::memcpy(f + r * rb, row.data(), row.size());
        }
        cuda::to_tiles(type, f, t, rows, cols);
        EXPECT_NE(std::memcmp(f, t, static_cast<size_t>(rows * rb)), 0);  // the parts moved
        cuda::from_tiles(type, t, back.data(), rows, cols);
        ASSERT_EQ(std::memcmp(f, back.data(), static_cast<size_t>(rows * rb)), 0);
        for (int64_t r = 0; r < rows; ++r) {
            const std::vector<float> ref = dequantize(type, f + r * rb, cols);
            for (int64_t c = 0; c < cols / 32; ++c) {
                float got[32];
                cuda::dequant_chunk_tiled_host(type, t, cols, r, c, got);
                ASSERT_EQ(std::memcmp(got, ref.data() + c * 32, sizeof got), 0) << "row " << r << " chunk " << c;
            }
        }
        // The GEMM's staged copy of a tile (units permuted over the banks) decodes the same, and the
        // register-decoding GEMMs' 16 copying threads stage it byte for byte the same.
        const int64_t tile_bytes = static_cast<int64_t>(row_size(type, 256)) * 8, nb = cols / 256;
        std::vector<uint8_t> staged(static_cast<size_t>(tile_bytes) + 16), by_threads(staged.size());
        uint8_t* st = staged.data() + (16 - reinterpret_cast<uintptr_t>(staged.data()) % 16) % 16;
        for (int64_t tile = 0; tile < rows / 8 * nb; ++tile) {
            cuda::stage_tile_host(type, t + tile * tile_bytes, st);
            cuda::stage_tile_by_threads_host(type, t + tile * tile_bytes, by_threads.data());
            ASSERT_EQ(std::memcmp(st, by_threads.data(), static_cast<size_t>(tile_bytes)), 0) << "tile " << tile;
            const int64_t g = tile / nb, b = tile % nb;
            for (int i = 0; i < 8; ++i) {
                for (int j = 0; j < 8; ++j) {
                    float got[32], want[32];
                    cuda::dequant_chunk_staged_host(type, st, i, j, got);
                    cuda::dequant_chunk_tiled_host(type, t, cols, g * 8 + i, b * 8 + j, want);
                    ASSERT_EQ(std::memcmp(got, want, sizeof got), 0) << "tile " << tile << " row " << i << " chunk " << j;
                }
            }
        }
    }
}

// The register-decoding GEMM's half2 decoder against its twin bit for bit in the weights: one row of
// ones in the activations' place picks single weights out (token t: a unit vector at column
// 8t + t % 8), so the outputs are the weights as the kernel formed them. And a warp whose weights
// could leave fp16's range (block scales of 1000) takes gemm_f16_ref's saturated values instead.
TEST(CudaOps, GemmSmallDecoderWeights) {
    JLLM_REQUIRE_CUDA_DEVICE();
    std::mt19937 rng(2471);
    for (GgmlType q : {GgmlType::Q4_K, GgmlType::Q6_K}) {
        for (bool huge : {false, true}) {
            SCOPED_TRACE(std::string(type_name(q)) + (huge ? " scales 1000" : ""));
            const int64_t rows = 72, cols = 512;
            const int n_tok = 64;
            std::vector<uint8_t> w = random_matrix(q, rows, cols, rng);
            if (huge) {
                const size_t bb = q == GgmlType::Q4_K ? sizeof(BlockQ4_K) : sizeof(BlockQ6_K);
                const size_t d_at = q == GgmlType::Q4_K ? offsetof(BlockQ4_K, d) : offsetof(BlockQ6_K, d);
                const Half big = to_half(1000.0f);
                for (size_t b = 0; b < w.size() / bb; ++b) std::memcpy(w.data() + b * bb + d_at, &big, sizeof big);
            }
            // Token t reads column 8t + (t % 8) (every sub-block's position classes) with weight 1.
            std::vector<float> x(static_cast<size_t>(n_tok) * cols, 0.0f);
            for (int t = 0; t < n_tok; ++t) x[static_cast<size_t>(t) * cols + 8 * t + t % 8] = 1.0f;
            std::vector<float> ref(static_cast<size_t>(rows) * n_tok);
            (huge ? cuda::gemm_f16_ref : cuda::gemm_small_ref)(q, w.data(), nullptr, rows, cols, x.data(), n_tok,
                                                              ref.data(), MatOut::Store);
            const cuda::WeightFormat fmt(q, cuda::WeightLayout::Tiles);
            ASSERT_TRUE(cuda::gemm_takes_small(fmt, n_tok, MatOut::Store));
            DevBuf<uint8_t> dw(device_bytes(q, fmt.layout, w, rows, cols));
            DevBuf<float> dx(x), dy(ref.size());
            DevBuf<uint16_t> dxh(x.size());
            cuda::launch_to_f16(dx.get(), static_cast<int64_t>(x.size()), dxh.get(), nullptr);
            dy.poison();
            cuda::launch_gemm(fmt, dw.get(), nullptr, rows, cols, dxh.get(), n_tok, dy.get(), MatOut::Store, nullptr);
            const std::vector<float> got = dy.download();
            int bad = 0;
            for (size_t i = 0; i < ref.size(); ++i) {
                const bool ok = huge ? std::fabs(got[i] - ref[i]) <= SATURATED_REL * std::fabs(ref[i])
                                     : std::memcmp(&got[i], &ref[i], sizeof(float)) == 0;
                if (!ok && ++bad <= 5) {
                    ADD_FAILURE() << "y[" << i << "] = " << got[i] << ", ref " << ref[i];
                }
            }
            EXPECT_EQ(bad, 0);
        }
    }
}

// Q, K and V in one GEMM grid (tiled segments side by side), with and without split-K, against
// the twin per matrix (PRODUCT); an untiled format takes one launch per matrix.
TEST(CudaOps, GemmMultiSegments) {
    JLLM_REQUIRE_CUDA_DEVICE();
    std::mt19937 rng(2470);
    struct Case {
        GgmlType type;
        cuda::WeightLayout layout;
        std::vector<int64_t> rows;
        int64_t cols;
        int n_tok;
        bool split;
    };
    const auto T = cuda::WeightLayout::Tiles, R = cuda::WeightLayout::Rows;
    const Case cases[] = {
        {GgmlType::Q4_K, T, {136, 40, 40}, 2048, 33, true},   // 2 + 1 + 1 row blocks, split parts
        {GgmlType::Q4_K, T, {136, 40, 40}, 2048, 70, false},  // two token tiles, no work buffer
        {GgmlType::Q6_K, T, {256, 128, 128}, 1024, 5, true},  // whole row blocks
        {GgmlType::Q6_K, T, {72, 200}, 768, 40, true},         // two segments
        {GgmlType::Q8_0, R, {64, 32, 32}, 512, 9, true},       // untiled: a launch per matrix
    };
    for (const Case& c : cases) {
        const int n_seg = static_cast<int>(c.rows.size());
        SCOPED_TRACE(std::string(type_name(c.type)) + " segments " + std::to_string(n_seg) + " n_tok " +
                     std::to_string(c.n_tok) + (c.split ? " split" : ""));
        std::vector<float> x;
        for (int t = 0; t < c.n_tok; ++t) {
            const std::vector<float> xt = random_activations(c.cols, rng);
            x.insert(x.end(), xt.begin(), xt.end());
        }
        DevBuf<float> dx(x);
        DevBuf<uint16_t> dxh(x.size());
        cuda::launch_to_f16(dx.get(), static_cast<int64_t>(x.size()), dxh.get(), nullptr);
        std::vector<std::vector<uint8_t>> w;
        std::vector<std::unique_ptr<DevBuf<uint8_t>>> dw;
        std::vector<std::unique_ptr<DevBuf<float>>> dy;
        const void* wp[cuda::GEMM_MAX_SEG] = {};
        float* yp[cuda::GEMM_MAX_SEG] = {};
        int64_t all_rows = 0;
        for (int s = 0; s < n_seg; ++s) {
            w.push_back(random_matrix(c.type, c.rows[s], c.cols, rng));
            dw.push_back(std::make_unique<DevBuf<uint8_t>>(device_bytes(c.type, c.layout, w.back(), c.rows[s], c.cols)));
            dy.push_back(std::make_unique<DevBuf<float>>(static_cast<size_t>(c.rows[s]) * c.n_tok));
            dy.back()->poison();
            all_rows += c.rows[s];
        }
        for (int s = 0; s < n_seg; ++s) {
            wp[s] = dw[static_cast<size_t>(s)]->get();
            yp[s] = dy[static_cast<size_t>(s)]->get();
        }
        DevBuf<float> work(c.split ? cuda::gemm_work_floats(c.n_tok, all_rows) : 1);
        work.poison();
        cuda::launch_gemm_multi(cuda::WeightFormat(c.type, c.layout), n_seg, wp, c.rows.data(), c.cols, dxh.get(),
                                c.n_tok, yp, nullptr, c.split ? work.get() : nullptr, c.split ? work.size() : 0);
        std::vector<float> xb = x;
        for (float& e : xb) e = cuda::round_f16_sat(e);
        const size_t rb = row_size(c.type, c.cols);
        for (int s = 0; s < n_seg; ++s) {
            const int64_t rows = c.rows[s];
            std::vector<float> ref(static_cast<size_t>(rows) * c.n_tok);
            cuda::gemm_ref(cuda::WeightFormat(c.type, c.layout), w[s].data(), nullptr, rows, c.cols, x.data(), c.n_tok,
                           ref.data(), MatOut::Store);
            const std::vector<float> got = dy[static_cast<size_t>(s)]->download();
            int bad = 0;
            for (int64_t r = 0; r < rows; ++r) {
                std::vector<float> wr = dequantize(c.type, w[s].data() + r * rb, c.cols);
                for (float& e : wr) e = cuda::round_f16_sat(e);
                for (int t = 0; t < c.n_tok; ++t) {
                    double mag = 0.0;
                    for (int64_t i = 0; i < c.cols; ++i) mag += std::fabs(static_cast<double>(wr[i]) * xb[t * c.cols + i]);
                    const size_t k = static_cast<size_t>(t) * rows + r;
                    const bool ok = std::fabs(static_cast<double>(got[k]) - ref[k]) <= PRODUCT.rel * mag + PRODUCT.abs;
                    if (!ok && ++bad <= 5) {
                        ADD_FAILURE() << "segment " << s << " y[" << t << "][" << r << "] = " << got[k] << ", ref " << ref[k];
                    }
                }
            }
            EXPECT_EQ(bad, 0) << "segment " << s;
        }
    }
}

// The GEMM's input conversion: every value as round_f16_sat rounds it (bit for bit), outliers
// saturated, not inf.
TEST(CudaOps, ToF16AsTheTwinRounds) {
    JLLM_REQUIRE_CUDA_DEVICE();
    std::mt19937 rng(77);
    std::vector<float> x = randn(4096, rng, 3.0f);
    const float special[] = {0.0f, -0.0f, 65504.0f, -65504.0f, 65519.0f, 65520.0f, -1e6f, 1e30f, 6e-8f, -3e-5f, 1.0f / 3};
    for (size_t i = 0; i < sizeof(special) / sizeof(special[0]); ++i) x[i * 7] = special[i];
    DevBuf<float> dx(x);
    DevBuf<uint16_t> dh(x.size());
    cuda::launch_to_f16(dx.get(), static_cast<int64_t>(x.size()), dh.get(), nullptr);
    const std::vector<uint16_t> h = dh.download();
    for (size_t i = 0; i < x.size(); ++i) {
        const float want = cuda::round_f16_sat(x[i]);
        const float got = fp16_to_f32(h[i]);
        ASSERT_TRUE(std::isfinite(got)) << x[i];
        ASSERT_EQ(std::memcmp(&got, &want, sizeof(float)), 0) << "x " << x[i] << ": " << got << " vs " << want;
    }
}

}  // namespace
}  // namespace jllm::test

#endif  // JLLM_CUDA
