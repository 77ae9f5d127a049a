// tests/cuda/ops/test_cuda_ops.cpp — every CUDA kernel against its CPU twin (cuda_ops.h `_ref`)
// on fresh random inputs: odd sizes, sizes that are not a multiple of the block/tile, both KV
// types. Outputs are poisoned before each launch. Each op states its error bound:
//   matmul (GEMV, GEMM; store/add/SwiGLU): |gpu - ref| <= 1e-4 * sum_i |w_i x_i| + 1e-6 (fp32
//     accumulation in any order against an fp64 sum of the same dequantized weights; for the
//     tensor-core GEMM, weights and activations rounded to fp16 on both sides, gemm_f16_ref; for
//     its small-batch kernel on tiled Q4_K/Q6_K, the weights its half2 decoder forms,
//     gemm_small_ref, which are also checked bit for bit);
//   embedding: bit-exact (dequantization is exact, quant_ref.cpp);
//   RMSNorm: |gpu - ref| <= 1e-5 * |ref| + 1e-6 (fp32 vs fp64 sum of squares);
//   SwiGLU: 1e-6 relative (expf vs std::exp);
//   Q/K/V post (bias, Q/K-norm, RoPE): 2e-5 relative to the head's max |x|; INT8 KV: fp16
//     scales within 1 ulp and values within 1 step, fewer than 1% off by one (rounding ties
//     move with the last bit of the input); FP16 KV within 1 fp16 ulp;
//   attention: |gpu - ref| <= 2e-4 * max |v| (fp32 online softmax vs fp64 two-pass);
//   argmax: exact, first maximum;
//   8-bit activations (quantize, RMSNorm + quantize): bit-exact against the twin's quantization
//     of the same fp32 values; dp4a GEMV: as the fp32 GEMV, against fp64 sums of the dequantized
//     weights times the dequantized activations; int8 chunk decoders: a * q + b equals the
//     dequantized weight to 2e-6 relative (host, no GPU); attention's 8-bit output: within half
//     a quantization step of the reference output.
#include <gtest/gtest.h>

#if JLLM_CUDA

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "../../unit/cpu_kernels/kernel_test_util.h"
#include "backend/cpu/rope.h"
#include "backend/cuda/cuda_ops.h"
#include "core/fp16.h"
#include "cuda_test_util.h"
#include "model/model_config.h"
#include "quant/quant_blocks.h"

namespace jllm::test {
namespace {

using cuda::MatOut;

// Fails the program if a kernel outgrew the per-thread stack (cuda_test_util.h).
::testing::Environment* const g_stack_env = ::testing::AddGlobalTestEnvironment(new ThreadStackEnv);

std::vector<float> randn(size_t n, std::mt19937& rng, float sd = 1.0f) {
    std::normal_distribution<float> nd(0.0f, sd);
    std::vector<float> v(n);
    for (float& x : v) x = nd(rng);
    return v;
}

std::vector<uint8_t> random_matrix(GgmlType type, int64_t rows, int64_t cols, std::mt19937& rng) {
    std::vector<uint8_t> m;
    for (int64_t r = 0; r < rows; ++r) {
        const std::vector<uint8_t> row = random_weight_row(type, cols, rng);
        m.insert(m.end(), row.begin(), row.end());
    }
    return m;
}

// ------------------------------------------------------------------------------- matmul

struct MatCase {
    GgmlType type;
    int64_t rows, cols;
    int n_tok;
    MatOut out;
    bool gemm;  // force the GEMM path (else GEMV)
    bool split = false;  // give the GEMM a work buffer (split-K when its grid is small)
    cuda::WeightLayout layout = cuda::WeightLayout::Rows;  // of the weights on the device
};

// A matrix's bytes as the device holds them in `layout` (the file's rows are `w`).
std::vector<uint8_t> device_bytes(GgmlType type, cuda::WeightLayout layout, const std::vector<uint8_t>& w,
                                  int64_t rows, int64_t cols) {
    if (layout == cuda::WeightLayout::Rows) return w;
    std::vector<uint8_t> t(w.size());
    cuda::to_tiles(type, w.data(), t.data(), rows, cols);
    return t;
}

std::string mat_name(const MatCase& c) {
    const char* o = c.out == MatOut::Store ? "store" : c.out == MatOut::Add ? "add" : "swiglu";
    return std::string(type_name(c.type)) + " " + std::to_string(c.rows) + "x" + std::to_string(c.cols) + " n_tok=" +
           std::to_string(c.n_tok) + " " + o + (c.gemm ? " gemm" : " gemv") +
           (c.layout == cuda::WeightLayout::Tiles ? " tiles" : "");
}

void run_matmul_case(const MatCase& c, std::mt19937& rng) {
    SCOPED_TRACE(mat_name(c));
    const std::vector<uint8_t> w = random_matrix(c.type, c.rows, c.cols, rng);
    const std::vector<uint8_t> w2 = random_matrix(c.type, c.rows, c.cols, rng);
    std::vector<float> x;
    for (int t = 0; t < c.n_tok; ++t) {
        const std::vector<float> xt = random_activations(c.cols, rng);
        x.insert(x.end(), xt.begin(), xt.end());
    }
    const size_t ny = static_cast<size_t>(c.rows) * c.n_tok;
    std::vector<float> y0 = c.out == MatOut::Add ? randn(ny, rng) : std::vector<float>(ny, 0.0f);

    // Reference: g = W x and u = W2 x separately (for the bound), then the epilogue. The GEMM
    // multiplies fp16-rounded weights and activations (its twin rounds the same way).
    const cuda::WeightFormat fmt(c.type, c.layout);
    // (The small-batch GEMM forms its weights in half2 arithmetic: gemm_ref picks its twin.)
    auto ref_fn = [&](const std::vector<uint8_t>& m, const uint8_t* m2, float* out, MatOut o) {
        if (c.gemm) cuda::gemm_ref(fmt, m.data(), m2, c.rows, c.cols, x.data(), c.n_tok, out, o);
        else cuda::matmul_ref(c.type, m.data(), m2, c.rows, c.cols, x.data(), c.n_tok, out, o);
    };
    auto rnd = [&](std::vector<float> v) {
        if (c.gemm) {
            for (float& e : v) e = cuda::round_f16_sat(e);
        }
        return v;
    };
    std::vector<float> g(ny), u(ny), mag_g(ny), mag_u(ny);
    ref_fn(w, nullptr, g.data(), MatOut::Store);
    ref_fn(w2, nullptr, u.data(), MatOut::Store);
    const size_t rb = row_size(c.type, c.cols);
    const std::vector<float> xb = rnd(x);
    for (int64_t r = 0; r < c.rows; ++r) {
        const std::vector<float> wr = rnd(dequantize(c.type, w.data() + r * rb, c.cols));
        const std::vector<float> wr2 = rnd(dequantize(c.type, w2.data() + r * rb, c.cols));
        for (int t = 0; t < c.n_tok; ++t) {
            double a = 0.0, b = 0.0;
            for (int64_t i = 0; i < c.cols; ++i) {
                a += std::fabs(static_cast<double>(wr[i]) * xb[t * c.cols + i]);
                b += std::fabs(static_cast<double>(wr2[i]) * xb[t * c.cols + i]);
            }
            mag_g[t * c.rows + r] = static_cast<float>(a);
            mag_u[t * c.rows + r] = static_cast<float>(b);
        }
    }
    std::vector<float> ref = y0;
    ref_fn(w, w2.data(), ref.data(), c.out);

    DevBuf<uint8_t> dw(device_bytes(c.type, c.layout, w, c.rows, c.cols));
    DevBuf<uint8_t> dw2(device_bytes(c.type, c.layout, w2, c.rows, c.cols));
    DevBuf<float> dx(x), dy(ny);
    if (c.out == MatOut::Add) dy.upload(y0);
    else dy.poison();
    DevBuf<float> work(c.split ? cuda::gemm_work_floats(c.n_tok, c.rows) : 1);
    work.poison();
    if (c.gemm) {
        DevBuf<uint16_t> dxh(x.size());
        cuda::launch_to_f16(dx.get(), static_cast<int64_t>(x.size()), dxh.get(), nullptr);
        cuda::launch_gemm(fmt, dw.get(), dw2.get(), c.rows, c.cols, dxh.get(), c.n_tok, dy.get(), c.out, nullptr,
                          c.split ? work.get() : nullptr, c.split ? work.size() : 0);
    } else {
        cuda::launch_gemv(fmt, dw.get(), dw2.get(), c.rows, c.cols, dx.get(), c.n_tok, dy.get(), c.out, nullptr);
    }
    const std::vector<float> got = dy.download();
    int bad = 0;
    for (size_t i = 0; i < ny; ++i) {
        const double eg = 1e-4 * mag_g[i] + 1e-6, eu = 1e-4 * mag_u[i] + 1e-6;
        double tol = eg;
        if (c.out == MatOut::SwiGLU) {
            const double sg = g[i] / (1.0 + std::exp(-static_cast<double>(g[i])));
            tol = 1.1 * eg * (std::fabs(u[i]) + eu) + std::fabs(sg) * eu + 1e-6;
        }
        if (!(std::fabs(static_cast<double>(got[i]) - ref[i]) <= tol)) {
            if (++bad <= 5) ADD_FAILURE() << "y[" << i << "] = " << got[i] << ", ref " << ref[i] << ", tol " << tol;
        }
    }
    EXPECT_EQ(bad, 0);
}

const GgmlType kAllTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1,
                              GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K,
                              GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

int64_t cols_for(GgmlType t, int variant) {
    const bool k = type_traits(t).block_size == 256;
    if (k) return variant == 0 ? 256 : 768;
    return variant == 0 ? 96 : 544;  // 3 and 17 blocks: not a multiple of the warp's 32 chunks
}

// The kernels' chunk dequantizers, compiled for the host from the same source, against
// quant_ref: bit for bit. Needs no GPU.
TEST(CudaOps, ChunkDequantizersBitExactOnHost) {
    std::mt19937 rng(77);
    for (GgmlType t : kAllTypes) {
        SCOPED_TRACE(type_name(t));
        const int64_t n = 768;
        for (int rep = 0; rep < 10; ++rep) {
            const std::vector<uint8_t> row = random_weight_row(t, n, rng);
            std::vector<uint64_t> aligned((row.size() + 7) / 8 + 1);  // 16-byte aligned on these platforms
            uint8_t* r = reinterpret_cast<uint8_t*>(aligned.data());
            if (reinterpret_cast<uintptr_t>(r) % 16 != 0) r += 8;
            std::memcpy(r, row.data(), row.size());
            const std::vector<float> ref = dequantize(t, r, n);
            std::vector<float> got(static_cast<size_t>(n));
            for (int64_t c = 0; c < n / 32; ++c) cuda::dequant_chunk_host(t, r, c, got.data() + c * 32);
            for (int64_t i = 0; i < n; ++i) ASSERT_EQ(0, std::memcmp(&got[i], &ref[i], 4)) << i << ": " << got[i] << " vs " << ref[i];
        }
    }
}

TEST(CudaOps, GemvEveryTypeAndEpilogue) {
    JLLM_REQUIRE_CUDA_DEVICE();
    std::mt19937 rng(1234);
    for (GgmlType t : kAllTypes) {
        ASSERT_TRUE(cuda::matmul_type_supported(t)) << type_name(t);
        for (int v = 0; v < 2; ++v) {
            const int64_t cols = cols_for(t, v);
            run_matmul_case({t, 67, cols, 1, MatOut::Store, false}, rng);
            run_matmul_case({t, 5, cols, 3, MatOut::Add, false}, rng);
            run_matmul_case({t, 130, cols, cuda::GEMV_MAX_TOKENS, MatOut::SwiGLU, false}, rng);
        }
        run_matmul_case({t, 1, cols_for(t, 0), 2, MatOut::Store, false}, rng);
    }
}

TEST(CudaOps, GemmEveryTypeAndEpilogue) {
    JLLM_REQUIRE_CUDA_DEVICE();
    std::mt19937 rng(5678);
    for (GgmlType t : kAllTypes) {
        const int64_t cols = cols_for(t, 1);
        run_matmul_case({t, 67, cols, 5, MatOut::Store, true}, rng);     // partial row and token tiles
        run_matmul_case({t, 64, cols, 33, MatOut::Add, true}, rng);      // exact row tile, 2 token tiles
        run_matmul_case({t, 131, cols, 70, MatOut::SwiGLU, true}, rng);  // 3 x 3 partial tiles
        run_matmul_case({t, 7, cols_for(t, 0), 1, MatOut::Store, true}, rng);
        run_matmul_case({t, 200, cols, 150, MatOut::SwiGLU, true}, rng);  // 128-token tiles, 4 row tiles of 64
        run_matmul_case({t, 129, cols_for(t, 0), 129, MatOut::Add, true}, rng);
    }
}

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
    const int64_t qkv[] = {4096, 1024, 1024};  // Q, K, V in one grid: 48 x 5 = 240 blocks of 8 steps
    EXPECT_EQ(cuda::gemm_plan_multi(3, qkv, 2560, 33, work).split, 5);
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

// Small grids split over the columns; the partial sums are added in order by a second kernel.
TEST(CudaOps, GemmSplitK) {
    JLLM_REQUIRE_CUDA_DEVICE();
    std::mt19937 rng(2468);
    for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0, GgmlType::F16}) {
        run_matmul_case({t, 200, 2048, 33, MatOut::Add, true, true}, rng);    // 2 x 1 blocks -> 16 parts of 2 steps
        run_matmul_case({t, 130, 2560, 7, MatOut::Store, true, true}, rng);   // 14 parts of 2-3 steps (uneven)
        run_matmul_case({t, 64, 256, 64, MatOut::Store, true, true}, rng);    // 4 parts of 1 step
        run_matmul_case({t, 100, 2048, 40, MatOut::SwiGLU, true, true}, rng); // SwiGLU: gate/up sums, 8 parts (the buffer)
    }
}

// Q4_K and Q6_K in the tiled layout (rows a multiple of 8): the fp32 GEMV and the GEMM (16 tiles
// per 128-row block, SwiGLU gate/up tiles interleaved, partial row blocks, split-K).
TEST(CudaOps, MatmulTiles) {
    JLLM_REQUIRE_CUDA_DEVICE();
    std::mt19937 rng(2469);
    const auto T = cuda::WeightLayout::Tiles;
    for (GgmlType q : {GgmlType::Q4_K, GgmlType::Q6_K}) {
        run_matmul_case({q, 64, 768, 1, MatOut::Store, false, false, T}, rng);
        run_matmul_case({q, 8, 256, 3, MatOut::Add, false, false, T}, rng);
        run_matmul_case({q, 136, 768, 4, MatOut::SwiGLU, false, false, T}, rng);
        run_matmul_case({q, 72, 768, 5, MatOut::Store, true, false, T}, rng);
        run_matmul_case({q, 64, 768, 33, MatOut::Add, true, false, T}, rng);
        run_matmul_case({q, 136, 768, 70, MatOut::SwiGLU, true, false, T}, rng);
        run_matmul_case({q, 200, 768, 150, MatOut::SwiGLU, true, false, T}, rng);
        run_matmul_case({q, 136, 256, 129, MatOut::Add, true, false, T}, rng);
        run_matmul_case({q, 200, 2048, 33, MatOut::Add, true, true, T}, rng);
        run_matmul_case({q, 104, 2048, 40, MatOut::SwiGLU, true, true, T}, rng);
        // The small-batch kernel (up to 64 tokens): every token-tile count, rows ending inside a
        // warp's and a block's rows, split parts.
        run_matmul_case({q, 8, 256, 57, MatOut::Store, true, false, T}, rng);
        run_matmul_case({q, 136, 768, 24, MatOut::SwiGLU, true, false, T}, rng);
        run_matmul_case({q, 168, 512, 12, MatOut::Add, true, true, T}, rng);
        run_matmul_case({q, 200, 512, 64, MatOut::SwiGLU, true, true, T}, rng);
        run_matmul_case({q, 88, 1024, 50, MatOut::Add, true, true, T}, rng);
        run_matmul_case({q, 256, 768, 17, MatOut::Store, true, false, T}, rng);
        run_matmul_case({q, 40, 1280, 48, MatOut::Store, true, true, T}, rng);
    }
}

// The small-batch GEMM's half2 decoder against its twin bit for bit in the weights: one row of
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
            ASSERT_TRUE(cuda::gemm_takes_small(fmt, n_tok));
            DevBuf<uint8_t> dw(device_bytes(q, fmt.layout, w, rows, cols));
            DevBuf<float> dx(x), dy(ref.size());
            DevBuf<uint16_t> dxh(x.size());
            cuda::launch_to_f16(dx.get(), static_cast<int64_t>(x.size()), dxh.get(), nullptr);
            dy.poison();
            cuda::launch_gemm(fmt, dw.get(), nullptr, rows, cols, dxh.get(), n_tok, dy.get(), MatOut::Store, nullptr);
            const std::vector<float> got = dy.download();
            int bad = 0;
            for (size_t i = 0; i < ref.size(); ++i) {
                // The fallback's fp32 value may round to fp16 one step away from the twin's (an fma
                // against a multiply and a subtraction): one fp16 step there.
                const bool ok = huge ? std::fabs(got[i] - ref[i]) <= 1e-3f * std::fabs(ref[i])
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
// the twin per matrix (the bound of run_matmul_case); an untiled format takes one launch per matrix.
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
        if (c.split) {
            EXPECT_GT(cuda::gemm_plan_multi(n_seg, c.rows.data(), c.cols, c.n_tok, work.size()).split, 1);
        }
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
                    if (!(std::fabs(static_cast<double>(got[k]) - ref[k]) <= 1e-4 * mag + 1e-6) && ++bad <= 5) {
                        ADD_FAILURE() << "segment " << s << " y[" << t << "][" << r << "] = " << got[k] << ", ref " << ref[k];
                    }
                }
            }
            EXPECT_EQ(bad, 0) << "segment " << s;
        }
    }
}

TEST(CudaOps, MatmulDispatchesBySize) {
    JLLM_REQUIRE_CUDA_DEVICE();
    std::mt19937 rng(99);
    for (int n_tok : {1, 4, 5, 17}) {
        const MatCase c{GgmlType::Q4_K, 40, 512, n_tok, MatOut::Store, false};
        const std::vector<uint8_t> w = random_matrix(c.type, c.rows, c.cols, rng);
        const std::vector<float> x = randn(static_cast<size_t>(c.cols) * n_tok, rng);
        std::vector<float> ref(static_cast<size_t>(c.rows) * n_tok);
        // Up to GEMV_MAX_TOKENS: the fp32 GEMV; beyond: the fp16 tensor-core GEMM.
        auto ref_fn = n_tok <= cuda::GEMV_MAX_TOKENS ? cuda::matmul_ref : cuda::gemm_f16_ref;
        ref_fn(c.type, w.data(), nullptr, c.rows, c.cols, x.data(), n_tok, ref.data(), MatOut::Store);
        DevBuf<uint8_t> dw(w);
        DevBuf<float> dx(x), dy(ref.size());
        DevBuf<uint16_t> dxh(x.size());
        cuda::launch_to_f16(dx.get(), static_cast<int64_t>(x.size()), dxh.get(), nullptr);
        dy.poison();
        cuda::launch_matmul(c.type, dw.get(), nullptr, c.rows, c.cols, dx.get(),
                            n_tok <= cuda::GEMV_MAX_TOKENS ? nullptr : dxh.get(), n_tok, dy.get(), MatOut::Store,
                            nullptr);
        const std::vector<float> got = dy.download();
        for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(got[i], ref[i], 1e-3 * (1.0 + std::fabs(ref[i]))) << i;
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

TEST(CudaOps, SwiGluElementwise) {
    JLLM_REQUIRE_CUDA_DEVICE();
    std::mt19937 rng(3);
    for (int64_t n : {1, 255, 256, 1000, 70001}) {
        const std::vector<float> g = randn(static_cast<size_t>(n), rng, 4.0f), u = randn(static_cast<size_t>(n), rng);
        std::vector<float> ref(g.size());
        cuda::swiglu_ref(g.data(), u.data(), ref.data(), n);
        DevBuf<float> dg(g), du(u), dy(g.size());
        dy.poison();
        cuda::launch_swiglu(dg.get(), du.get(), dy.get(), n, nullptr);
        std::vector<float> got = dy.download();
        for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(got[i], ref[i], 1e-6 * (1.0 + std::fabs(ref[i]))) << i;
        cuda::launch_swiglu(dg.get(), du.get(), dg.get(), n, nullptr);  // in place, as the backend runs it
        got = dg.download();
        for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(got[i], ref[i], 1e-6 * (1.0 + std::fabs(ref[i]))) << i;
    }
}

// ------------------------------------------------------------------------------- embedding

// Every type in the file's layout (37 rows), and Q4_K and Q6_K tiled (40 rows).
TEST(CudaOps, EmbeddingEveryTypeBitExact) {
    JLLM_REQUIRE_CUDA_DEVICE();
    std::mt19937 rng(42);
    std::vector<cuda::WeightFormat> fmts(std::begin(kAllTypes), std::end(kAllTypes));
    fmts.emplace_back(GgmlType::Q4_K, cuda::WeightLayout::Tiles);
    fmts.emplace_back(GgmlType::Q6_K, cuda::WeightLayout::Tiles);
    for (const cuda::WeightFormat& f : fmts) {
        const GgmlType t = f.type;
        SCOPED_TRACE(std::string(type_name(t)) + (f.tiled() ? " tiles" : ""));
        const int64_t n_vocab = f.tiled() ? 40 : 37, n_embd = cols_for(t, 1);
        const std::vector<uint8_t> table = random_matrix(t, n_vocab, n_embd, rng);
        const int32_t last = static_cast<int32_t>(n_vocab - 1);
        const std::vector<int32_t> ids = {0, last, 5, 5, 17, -1, last + 1, 2, 11};  // repeats; two out of range
        const int n_tok = static_cast<int>(ids.size());
        std::vector<float> ref(static_cast<size_t>(n_tok) * n_embd);
        cuda::embed_ref(t, table.data(), n_vocab, n_embd, ids.data(), n_tok, ref.data());
        DevBuf<uint8_t> dt(device_bytes(t, f.layout, table, n_vocab, n_embd));
        DevBuf<int32_t> did(ids);
        DevBuf<float> out(ref.size());
        out.poison(0x7F);  // a finite garbage pattern: the out-of-range rows must become NaN
        cuda::launch_embed(f, dt.get(), n_vocab, n_embd, did.get(), n_tok, out.get(), nullptr);
        const std::vector<float> got = out.download();
        for (size_t i = 0; i < ref.size(); ++i) {
            if (std::isnan(ref[i])) {
                ASSERT_TRUE(std::isnan(got[i])) << i;
            } else {
                ASSERT_EQ(got[i], ref[i]) << i;
            }
        }
    }
}

// ------------------------------------------------------------------------------- RMSNorm

TEST(CudaOps, RmsNorm) {
    JLLM_REQUIRE_CUDA_DEVICE();
    std::mt19937 rng(7);
    for (int64_t n : {1, 31, 257, 1000, 4096}) {
        for (int rows : {1, 5}) {
            SCOPED_TRACE("n=" + std::to_string(n) + " rows=" + std::to_string(rows));
            const std::vector<float> x = randn(static_cast<size_t>(n) * rows, rng, 3.0f);
            const std::vector<float> w = randn(static_cast<size_t>(n), rng);
            std::vector<float> ref(x.size());
            cuda::rmsnorm_ref(x.data(), w.data(), ref.data(), rows, n, 1e-6f);
            DevBuf<float> dx(x), dw(w), dy(x.size());
            DevBuf<uint16_t> dh(x.size());
            dy.poison();
            cuda::launch_rmsnorm(dx.get(), dw.get(), dy.get(), dh.get(), rows, n, 1e-6f, nullptr);
            std::vector<float> got = dy.download();
            for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(got[i], ref[i], 1e-5 * std::fabs(ref[i]) + 1e-6) << i;
            // the fp16 copy: each value as the GEMM's input conversion rounds it, bit for bit
            const std::vector<uint16_t> h = dh.download();
            for (size_t i = 0; i < got.size(); ++i) {
                const float want = cuda::round_f16_sat(got[i]), have = fp16_to_f32(h[i]);
                ASSERT_EQ(std::memcmp(&want, &have, sizeof(float)), 0) << i << ": " << have << " vs " << want;
            }
            // in place (y aliases x), no fp16 copy
            cuda::launch_rmsnorm(dx.get(), dw.get(), dx.get(), nullptr, rows, n, 1e-6f, nullptr);
            got = dx.download();
            for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(got[i], ref[i], 1e-5 * std::fabs(ref[i]) + 1e-6) << i;
        }
    }
}

// ------------------------------------------------------------------------------- 8-bit activations, dp4a GEMV

const GgmlType kQ8Types[] = {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
                             GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

// The int8 chunk decoders (host build of the kernels' code): a * q + b reproduces quant_ref's
// dequantized value to fp32 rounding. Needs no GPU.
TEST(CudaOps, ChunkQ8DecodersMatchDequantizationOnHost) {
    std::mt19937 rng(4242);
    for (GgmlType t : kQ8Types) {
        SCOPED_TRACE(type_name(t));
        ASSERT_TRUE(cuda::gemv_q8_type_supported(t));
        const int64_t n = 768;
        for (int rep = 0; rep < 10; ++rep) {
            const std::vector<uint8_t> row = random_weight_row(t, n, rng);
            std::vector<uint64_t> aligned((row.size() + 7) / 8 + 2);
            uint8_t* r = reinterpret_cast<uint8_t*>(aligned.data());
            if (reinterpret_cast<uintptr_t>(r) % 16 != 0) r += 8;
            std::memcpy(r, row.data(), row.size());
            const std::vector<float> ref = dequantize(t, r, n);
            for (int64_t c = 0; c < n / 32; ++c) {
                int8_t q[32];
                float a[2], b[2];
                cuda::chunk_q8_host(t, r, c, q, a, b);
                for (int i = 0; i < 32; ++i) {
                    const float v = a[i / 16] * static_cast<float>(q[i]) + b[i / 16];
                    const float e = ref[c * 32 + i];
                    ASSERT_NEAR(v, e, 2e-6f * (std::fabs(e) + std::fabs(b[i / 16])) + 1e-30f)
                        << "chunk " << c << " element " << i;
                }
            }
        }
    }
    EXPECT_FALSE(cuda::gemv_q8_type_supported(GgmlType::F16));
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
        // The GEMM's staged copy of a tile (units permuted over the banks) decodes the same.
        const int64_t tile_bytes = static_cast<int64_t>(row_size(type, 256)) * 8, nb = cols / 256;
        std::vector<uint8_t> staged(static_cast<size_t>(tile_bytes) + 16);
        uint8_t* st = staged.data() + (16 - reinterpret_cast<uintptr_t>(staged.data()) % 16) % 16;
        for (int64_t tile = 0; tile < rows / 8 * nb; ++tile) {
            cuda::stage_tile_host(type, t + tile * tile_bytes, st);
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

// The tiled GEMV's per-lane arithmetic (each lane's loads, columns, scales and offsets), run on
// the host over every lane, against its twin gemv_q8_ref on the file's layout: |y - ref| <=
// 1e-4 * sum_i |w_i x_i| + 1e-6 as the GPU tests. Needs no GPU.
TEST(CudaOps, GemvQ8TilesLanesOnHost) {
    std::mt19937 rng(717);
    for (GgmlType type : {GgmlType::Q4_K, GgmlType::Q6_K}) {
        for (const auto& [rows, cols, n_tok] : {std::tuple<int64_t, int64_t, int>{24, 768, 1}, {16, 2560, 3},
                                                 {8, 256, 4}, {40, 1280, 2}}) {
            SCOPED_TRACE(std::string(type_name(type)) + " " + std::to_string(rows) + "x" + std::to_string(cols) +
                         " n_tok=" + std::to_string(n_tok));
            const std::vector<uint8_t> w = random_matrix(type, rows, cols, rng);
            std::vector<float> x;
            for (int t = 0; t < n_tok; ++t) {
                const std::vector<float> xt = random_activations(cols, rng);
                x.insert(x.end(), xt.begin(), xt.end());
            }
            std::vector<uint8_t> xq(cuda::act_q8_bytes(n_tok, cols));  // operator new: 16-byte aligned
            cuda::quantize_act_ref(x.data(), n_tok, cols, xq.data());
            const size_t ny = static_cast<size_t>(rows) * n_tok;
            std::vector<float> ref(ny), got(ny, NAN);
            cuda::gemv_q8_ref(type, w.data(), nullptr, rows, cols, xq.data(), n_tok, ref.data(), MatOut::Store);
            const std::vector<uint8_t> tiles = device_bytes(type, cuda::WeightLayout::Tiles, w, rows, cols);
            cuda::gemv_q8_tiled_host(type, tiles.data(), rows, cols, xq.data(), n_tok, got.data());
            const size_t rb = row_size(type, cols);
            for (int64_t r = 0; r < rows; ++r) {
                const std::vector<float> wr = dequantize(type, w.data() + r * rb, cols);
                for (int t = 0; t < n_tok; ++t) {
                    double mag = 0.0;
                    for (int64_t i = 0; i < cols; ++i) mag += std::fabs(static_cast<double>(wr[i]) * x[t * cols + i]);
                    const size_t k = static_cast<size_t>(t * rows + r);
                    ASSERT_LE(std::fabs(static_cast<double>(got[k]) - ref[k]), 1e-4 * mag + 1e-6) << "row " << r << " token " << t;
                }
            }
        }
    }
}

TEST(CudaOps, QuantizeActivationsBitExact) {
    JLLM_REQUIRE_CUDA_DEVICE();
    std::mt19937 rng(2718);
    for (auto [n_tok, cols] : {std::pair<int, int64_t>{1, 32}, {3, 2560}, {4, 9728}, {2, 96}}) {
        SCOPED_TRACE("n_tok=" + std::to_string(n_tok) + " cols=" + std::to_string(cols));
        std::vector<float> x = randn(static_cast<size_t>(n_tok) * cols, rng, 2.0f);
        if (x.size() >= 64) std::fill(x.begin() + 32, x.begin() + 64, 0.0f);  // an all-zero block
        std::vector<uint8_t> ref(cuda::act_q8_bytes(n_tok, cols), 0);
        cuda::quantize_act_ref(x.data(), n_tok, cols, ref.data());
        DevBuf<float> dx(x);
        DevBuf<uint8_t> dq(ref.size());
        dq.poison(0);
        cuda::launch_quantize_act(dx.get(), n_tok, cols, dq.get(), nullptr);
        const std::vector<uint8_t> got = dq.download();
        ASSERT_EQ(0, std::memcmp(got.data(), ref.data(), ref.size()));
    }
}

TEST(CudaOps, RmsNormQuantized) {
    JLLM_REQUIRE_CUDA_DEVICE();
    std::mt19937 rng(8);
    for (int64_t n : {32, 2560, 4096}) {
        for (int rows : {1, 4}) {
            SCOPED_TRACE("n=" + std::to_string(n) + " rows=" + std::to_string(rows));
            const std::vector<float> x = randn(static_cast<size_t>(n) * rows, rng, 3.0f);
            const std::vector<float> w = randn(static_cast<size_t>(n), rng);
            std::vector<float> ref(x.size());
            cuda::rmsnorm_ref(x.data(), w.data(), ref.data(), rows, n, 1e-6f);
            DevBuf<float> dx(x), dw(w), dy(x.size());
            DevBuf<uint8_t> dq(cuda::act_q8_bytes(rows, n));
            dy.poison();
            dq.poison();
            cuda::launch_rmsnorm_q8(dx.get(), dw.get(), dy.get(), dq.get(), rows, n, 1e-6f, nullptr);
            const std::vector<float> y = dy.download();
            for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(y[i], ref[i], 1e-5 * std::fabs(ref[i]) + 1e-6) << i;
            // The 8-bit copy is exactly the quantization of the fp32 output the kernel wrote.
            std::vector<uint8_t> qref(dq.size());
            cuda::quantize_act_ref(y.data(), rows, n, qref.data());
            const std::vector<uint8_t> q = dq.download();
            ASSERT_EQ(0, std::memcmp(q.data(), qref.data(), q.size()));
            // Without the fp32 output.
            dq.poison();
            cuda::launch_rmsnorm_q8(dx.get(), dw.get(), nullptr, dq.get(), rows, n, 1e-6f, nullptr);
            ASSERT_EQ(0, std::memcmp(dq.download().data(), qref.data(), q.size()));
        }
    }
}

// GEMV on 8-bit activations vs its twin (quant_ref weights x dequantized activations, fp64):
// |gpu - ref| <= 1e-4 * sum_i |w_i x_i| + 1e-6 as for the fp32 GEMV. quantize_out (one matrix):
// y's 8-bit copy too, which must be launch_quantize_act's of the y written, bit for bit.
// last_type: the last segment's type where it differs (one launch of mixed types). halves: the
// activations quantized by halves (each 16 values on a scale of their own; the tiled GEMV's
// input from the SwiGLU product), and y's 8-bit copy allowed to be (yq_halves).
void run_gemv_q8_case(GgmlType type, int n_seg, const int64_t* seg_rows, int64_t cols, int n_tok, MatOut out,
                      std::mt19937& rng, cuda::WeightLayout layout = cuda::WeightLayout::Rows,
                      bool quantize_out = false, std::optional<GgmlType> last_type = std::nullopt,
                      bool halves = false) {
    SCOPED_TRACE(std::string(type_name(type)) + (last_type ? std::string("+") + type_name(*last_type) : "") +
                 " cols=" + std::to_string(cols) + " n_tok=" + std::to_string(n_tok) +
                 " segs=" + std::to_string(n_seg) + " out=" + std::to_string(static_cast<int>(out)) +
                 (layout == cuda::WeightLayout::Tiles ? " tiles" : "") + (quantize_out ? " 8-bit out" : "") +
                 (halves ? " halves" : ""));
    auto seg_type = [&](int sgi) { return last_type && sgi == n_seg - 1 ? *last_type : type; };
    std::vector<float> x;
    for (int t = 0; t < n_tok; ++t) {
        const std::vector<float> xt = random_activations(cols, rng);
        x.insert(x.end(), xt.begin(), xt.end());
    }
    std::vector<uint8_t> xq(cuda::act_q8_bytes(n_tok, cols));
    cuda::quantize_act_ref(x.data(), n_tok, cols, xq.data(), halves);
    std::vector<float> xd(x.size());  // what the kernel multiplies by: each half's d times q
    {
        const int8_t* q = reinterpret_cast<const int8_t*>(xq.data());
        const float* sc = reinterpret_cast<const float*>(xq.data() + cuda::act_q8_scale_offset(n_tok, cols));
        for (size_t i = 0; i < xd.size(); ++i) xd[i] = sc[4 * (i / 32) + (i % 32 < 16 ? 0 : 2)] * static_cast<float>(q[i]);
    }
    DevBuf<uint8_t> dxq(xq);
    const size_t rb = row_size(type, cols);
    std::vector<std::vector<uint8_t>> ws, w2s;
    std::vector<std::unique_ptr<DevBuf<uint8_t>>> dws;
    std::vector<std::unique_ptr<DevBuf<float>>> dys;
    std::vector<std::vector<float>> refs, mags;
    const void* wp[3];
    float* yp[3];
    std::unique_ptr<DevBuf<uint8_t>> dw2;
    std::vector<uint8_t> w2;
    if (out == MatOut::SwiGLU) {
        w2 = random_matrix(type, seg_rows[0], cols, rng);
        dw2 = std::make_unique<DevBuf<uint8_t>>(device_bytes(type, layout, w2, seg_rows[0], cols));
    }
    for (int sgi = 0; sgi < n_seg; ++sgi) {
        const int64_t rows = seg_rows[sgi];
        const GgmlType st = seg_type(sgi);
        const size_t srb = row_size(st, cols);
        ws.push_back(random_matrix(st, rows, cols, rng));
        const size_t ny = static_cast<size_t>(rows) * n_tok;
        std::vector<float> y0 = out == MatOut::Add ? randn(ny, rng) : std::vector<float>(ny, 0.0f);
        std::vector<float> ref = y0, mag(ny);
        cuda::gemv_q8_ref(st, ws.back().data(), w2.empty() ? nullptr : w2.data(), rows, cols, xq.data(), n_tok,
                          ref.data(), out);
        for (int64_t r = 0; r < rows; ++r) {
            const std::vector<float> wr = dequantize(st, ws.back().data() + r * srb, cols);
            std::vector<float> wr2;
            if (out == MatOut::SwiGLU) wr2 = dequantize(type, w2.data() + r * rb, cols);
            for (int t = 0; t < n_tok; ++t) {
                double a = 0.0, a2 = 0.0, g = 0.0;
                for (int64_t i = 0; i < cols; ++i) {
                    a += std::fabs(static_cast<double>(wr[i]) * xd[t * cols + i]);
                    g += static_cast<double>(wr[i]) * xd[t * cols + i];
                    if (!wr2.empty()) a2 += std::fabs(static_cast<double>(wr2[i]) * xd[t * cols + i]);
                }
                double m = 1e-4 * a + 1e-6;
                if (out == MatOut::SwiGLU) {  // silu(g) * u: both factors carry the bound
                    double u = 0.0;
                    for (int64_t i = 0; i < cols; ++i) u += static_cast<double>(wr2[i]) * xd[t * cols + i];
                    const double sg = g / (1.0 + std::exp(-g));
                    m = 1.1 * m * (std::fabs(u) + 1e-4 * a2) + std::fabs(sg) * (1e-4 * a2 + 1e-6) + 1e-6;
                }
                mag[t * rows + r] = static_cast<float>(m);
            }
        }
        dws.push_back(std::make_unique<DevBuf<uint8_t>>(device_bytes(st, layout, ws.back(), rows, cols)));
        dys.push_back(std::make_unique<DevBuf<float>>(ny));
        if (out == MatOut::Add) dys.back()->upload(y0);
        else dys.back()->poison();
        refs.push_back(ref);
        mags.push_back(mag);
        wp[sgi] = dws.back()->get();
        yp[sgi] = dys.back()->get();
    }
    const cuda::WeightFormat fmt(type, layout);
    DevBuf<uint8_t> dyq(quantize_out ? cuda::act_q8_bytes(n_tok, seg_rows[0]) : 1);
    dyq.poison();
    if (n_seg == 1) {
        cuda::launch_gemv_q8(fmt, wp[0], dw2 ? dw2->get() : nullptr, seg_rows[0], cols, dxq.get(), n_tok, yp[0], out,
                             nullptr, quantize_out ? dyq.get() : nullptr, halves);
    } else {
        ASSERT_FALSE(quantize_out);
        const cuda::WeightFormat fmts[3] = {{seg_type(0), layout}, {seg_type(1), layout}, {seg_type(2), layout}};
        ASSERT_TRUE(cuda::gemv_q8_multi_takes(fmts, n_seg));
        cuda::launch_gemv_q8_multi(fmts, n_seg, wp, seg_rows, yp, cols, dxq.get(), n_tok, nullptr);
    }
    for (int sgi = 0; sgi < n_seg; ++sgi) {
        const std::vector<float> got = dys[static_cast<size_t>(sgi)]->download();
        int bad = 0;
        for (size_t i = 0; i < got.size(); ++i) {
            if (!(std::fabs(static_cast<double>(got[i]) - refs[sgi][i]) <= mags[sgi][i])) {
                if (++bad <= 5) ADD_FAILURE() << "seg " << sgi << " y[" << i << "] = " << got[i] << ", ref " << refs[sgi][i];
            }
        }
        EXPECT_EQ(bad, 0);
        if (quantize_out) {
            std::vector<uint8_t> want(cuda::act_q8_bytes(n_tok, seg_rows[0]));
            const bool by_halves = halves && n_tok == 1 && out == MatOut::SwiGLU &&
                                   cuda::gemv_q8_yq_by_halves(fmt, seg_rows[0], cols);
            cuda::quantize_act_ref(got.data(), n_tok, seg_rows[0], want.data(), by_halves);
            const std::vector<uint8_t> yq = dyq.download();
            EXPECT_TRUE(yq.size() == want.size() && std::memcmp(yq.data(), want.data(), want.size()) == 0)
                << "8-bit copy of y";
        }
    }
}

TEST(CudaOps, GemvQ8EveryTypeAndEpilogue) {
    JLLM_REQUIRE_CUDA_DEVICE();
    std::mt19937 rng(4321);
    for (GgmlType t : kQ8Types) {
        for (int v = 0; v < 2; ++v) {
            const int64_t cols = cols_for(t, v);
            const int64_t r67[1] = {67}, r5[1] = {5}, r130[1] = {130};
            run_gemv_q8_case(t, 1, r67, cols, 1, MatOut::Store, rng);
            run_gemv_q8_case(t, 1, r5, cols, 3, MatOut::Add, rng);
            run_gemv_q8_case(t, 1, r130, cols, cuda::GEMV_MAX_TOKENS, MatOut::SwiGLU, rng);
            run_gemv_q8_case(t, 1, r67, cols, 2, MatOut::SwiGLU, rng);
        }
        const int64_t qkv[3] = {64, 17, 17}, two[2] = {9, 40};
        run_gemv_q8_case(t, 3, qkv, cols_for(t, 1), 1, MatOut::Store, rng);
        run_gemv_q8_case(t, 2, two, cols_for(t, 0), 4, MatOut::Store, rng);
    }
    // Many rows (several warps per SM), layer-like Q/K/V segments, and wide rows (several
    // batches per lane, 4 warps per row).
    const int64_t r5000[1] = {5000}, r37[1] = {37}, qkv_big[3] = {2048, 512, 512};
    run_gemv_q8_case(GgmlType::Q4_K, 1, r5000, 256, 1, MatOut::Store, rng);
    run_gemv_q8_case(GgmlType::Q4_K, 1, r5000, 256, 1, MatOut::SwiGLU, rng);
    run_gemv_q8_case(GgmlType::Q6_K, 3, qkv_big, 512, 2, MatOut::Store, rng);
    run_gemv_q8_case(GgmlType::Q8_0, 1, r37, 8192, 1, MatOut::Add, rng);
    run_gemv_q8_case(GgmlType::Q8_0, 1, r37, 16384, 1, MatOut::Store, rng);
    run_gemv_q8_case(GgmlType::Q4_0, 1, r37, 16384 + 32, 3, MatOut::SwiGLU, rng);
    // Short rows, several rows per warp: 16 lanes per row (Q4_K, 2,560 columns: 40 units of 64
    // weights), 8 lanes per row (Q6_K and Q8_0, 1,024 columns: 32 chunks), across segment ends.
    const int64_t r130[1] = {130}, qkv_small[3] = {45, 11, 11};
    run_gemv_q8_case(GgmlType::Q4_K, 3, qkv_big, 2560, 1, MatOut::Store, rng);
    run_gemv_q8_case(GgmlType::Q4_K, 1, r130, 2560, 1, MatOut::SwiGLU, rng);
    run_gemv_q8_case(GgmlType::Q4_K, 1, r37, 2560, 4, MatOut::Add, rng);
    run_gemv_q8_case(GgmlType::Q6_K, 3, qkv_small, 1024, 1, MatOut::Store, rng);
    run_gemv_q8_case(GgmlType::Q8_0, 1, r130, 1024, 2, MatOut::SwiGLU, rng);
    // SwiGLU (gate and up rows in one batch) at layer-like widths: Q6_K 2,560 columns (a warp
    // per row), Q4_K 9,728 columns (several batches per lane, several warps per row).
    run_gemv_q8_case(GgmlType::Q6_K, 1, r130, 2560, 1, MatOut::SwiGLU, rng);
    run_gemv_q8_case(GgmlType::Q4_K, 1, r37, 9728, 1, MatOut::SwiGLU, rng);
}

// The tiled GEMV (Q4_K, Q6_K) against its twin (gemv_q8_ref on the file layout): one, two and
// four warps per 8-row group, a block-column walk that ends mid-batch, Store, Add and SwiGLU,
// 1..4 tokens, and Q/K/V segments in one launch. One token takes the prefetching loop: a warp
// walking ten block columns alone, and long rows (17 block columns) that get two warps per group
// although the groups alone would not ask for them.
TEST(CudaOps, GemvQ8Tiles) {
    JLLM_REQUIRE_CUDA_DEVICE();
    std::mt19937 rng(515);
    const auto T = cuda::WeightLayout::Tiles;
    struct Case {
        int n_seg;
        int64_t rows[3];
        int64_t cols;
        int n_tok;
        MatOut out;
    };
    const Case cases[] = {
        {1, {64}, 2560, 1, MatOut::Store},
        {1, {16}, 768, 2, MatOut::Add},
        {1, {16992}, 512, 1, MatOut::Store},
        {1, {1024}, 2560, 4, MatOut::Add},
        {1, {40}, 9728, 3, MatOut::Store},
        {1, {64}, 2560, 1, MatOut::SwiGLU},
        {1, {1024}, 768, 4, MatOut::SwiGLU},
        {1, {40}, 9728, 2, MatOut::SwiGLU},
        {3, {2048, 512, 512}, 2560, 1, MatOut::Store},  // Q/K/V in one launch
        {3, {64, 16, 8}, 1280, 3, MatOut::Store},
        {2, {8, 40}, 512, 4, MatOut::Store},
        {1, {16992}, 2560, 1, MatOut::Store},  // one token: a warp walks ten block columns alone
        {1, {16384}, 4352, 1, MatOut::Add},    // long rows: two warps per group from the walk rule
        {1, {256}, 4096, 1, MatOut::Add},      // one token, few groups: eight warps per group
        {1, {40}, 9728, 1, MatOut::Store},     // the same with a last pass that not every warp takes
        {1, {40}, 9728, 1, MatOut::SwiGLU},    // SwiGLU keeps four warps per group
    };
    for (GgmlType q : {GgmlType::Q4_K, GgmlType::Q6_K}) {
        for (const Case& c : cases) run_gemv_q8_case(q, c.n_seg, c.rows, c.cols, c.n_tok, c.out, rng, T);
    }
    // Q4_K segments then a Q6_K one in one launch (Q4_K_M's Q/K/V where V has more bits), 1..4
    // tokens; the other orders and the file's rows are not taken.
    const Case mixed[] = {
        {3, {4096, 1024, 1024}, 2560, 1, MatOut::Store},  // qwen3-4b
        {3, {64, 16, 8}, 1280, 3, MatOut::Store},
        {2, {8, 40}, 512, 4, MatOut::Store},
        {2, {16, 24}, 9728, 2, MatOut::Store},
    };
    for (const Case& c : mixed) {
        run_gemv_q8_case(GgmlType::Q4_K, c.n_seg, c.rows, c.cols, c.n_tok, c.out, rng, T, false, GgmlType::Q6_K);
    }
    const cuda::WeightFormat q4{GgmlType::Q4_K, T}, q6{GgmlType::Q6_K, T};
    const cuda::WeightFormat ok[3] = {q4, q4, q6}, back[3] = {q6, q6, q4}, between[3] = {q4, q6, q4},
                             rows[3] = {GgmlType::Q4_K, GgmlType::Q4_K, GgmlType::Q6_K};
    EXPECT_TRUE(cuda::gemv_q8_multi_takes(ok, 3));
    EXPECT_FALSE(cuda::gemv_q8_multi_takes(back, 3));
    EXPECT_FALSE(cuda::gemv_q8_multi_takes(between, 3));
    EXPECT_FALSE(cuda::gemv_q8_multi_takes(rows, 3));
    // The 8-bit copy of y: by the SwiGLU product itself for one token where its grid is one wave
    // (four groups per block; on the H200: 256 columns x 128 rows at one warp per group, 512 x 256
    // at two, 1,024 x 3,072 as qwen3-0.6b and 9,728 x 64 at four), else by the quantization kernel
    // after it (2,560 x 9,728 as qwen3-4b: more blocks than one wave; two tokens; Add; the file's
    // rows). Either way the bits of launch_quantize_act.
    const Case quantized[] = {
        {1, {128}, 256, 1, MatOut::SwiGLU},   {1, {256}, 512, 1, MatOut::SwiGLU},
        {1, {3072}, 1024, 1, MatOut::SwiGLU}, {1, {64}, 9728, 1, MatOut::SwiGLU},
        {1, {9728}, 2560, 1, MatOut::SwiGLU}, {1, {96}, 2560, 2, MatOut::SwiGLU},
        {1, {256}, 4096, 1, MatOut::Add},
    };
    for (GgmlType q : {GgmlType::Q4_K, GgmlType::Q6_K}) {
        for (const Case& c : quantized) run_gemv_q8_case(q, c.n_seg, c.rows, c.cols, c.n_tok, c.out, rng, T, true);
        const int64_t r96[1] = {96};
        run_gemv_q8_case(q, 1, r96, 2560, 1, MatOut::SwiGLU, rng, cuda::WeightLayout::Rows, true);
    }
    // Quantized by halves where the reader takes them (tiles) and the blocks of four groups would
    // not fit one wave (qwen3-4b's 9,728 x 2,560 on the H200; the others as before), and inputs
    // quantized by halves read by every tiled kernel shape (Store, Add, SwiGLU, Q/K/V, 1-4 tokens).
    const cuda::WeightFormat q4t(GgmlType::Q4_K, T);
    EXPECT_FALSE(cuda::gemv_q8_yq_by_halves(q4t, 128, 256));  // one wave of blocks of four groups
    EXPECT_TRUE(cuda::gemv_q8_yq_by_halves(q4t, 9728, 2560));  // more than one wave (1,216 groups)
    EXPECT_FALSE(cuda::gemv_q8_yq_by_halves(cuda::WeightFormat(GgmlType::Q4_K), 9728, 2560));
    for (GgmlType q : {GgmlType::Q4_K, GgmlType::Q6_K}) {
        for (const Case& c : quantized) {
            run_gemv_q8_case(q, c.n_seg, c.rows, c.cols, c.n_tok, c.out, rng, T, true, std::nullopt, true);
        }
        for (const Case& c : cases) run_gemv_q8_case(q, c.n_seg, c.rows, c.cols, c.n_tok, c.out, rng, T, false, std::nullopt, true);
    }
}

// gemv_q8_split_rows: the rows of a tiled product launched in two parts give the bits of one
// launch where the split is offered, and no split is offered where the parts' kernels differ.
TEST(CudaOps, GemvQ8SplitRows) {
    JLLM_REQUIRE_CUDA_DEVICE();
    std::mt19937 rng(77);
    for (GgmlType type : {GgmlType::Q6_K, GgmlType::Q4_K}) {
        const cuda::WeightFormat fmt(type, cuda::WeightLayout::Tiles);
        const int64_t rows = 65536, cols = 512;
        const int64_t head = cuda::gemv_q8_split_rows(fmt, rows, cols, rows * 3 / 4);
        ASSERT_EQ(head, 49152);
        EXPECT_EQ(cuda::gemv_q8_split_rows(fmt, 20480, 2560, 15360), 0);  // the parts take other warps per group
        EXPECT_EQ(cuda::gemv_q8_split_rows(cuda::WeightFormat(type), rows, cols, head), 0);  // the file's rows
        const std::vector<uint8_t> w = random_matrix(type, rows, cols, rng);
        DevBuf<uint8_t> dw(device_bytes(type, fmt.layout, w, rows, cols));
        const std::vector<float> x = random_activations(cols, rng);
        std::vector<uint8_t> xq(cuda::act_q8_bytes(1, cols));
        cuda::quantize_act_ref(x.data(), 1, cols, xq.data());
        DevBuf<uint8_t> dxq(xq);
        DevBuf<float> y1(static_cast<size_t>(rows)), y2(static_cast<size_t>(rows));
        y1.poison();
        y2.poison();
        cuda::launch_gemv_q8(fmt, dw.get(), nullptr, rows, cols, dxq.get(), 1, y1.get(), MatOut::Store, nullptr);
        const size_t head_bytes = static_cast<size_t>(head) * row_size(type, cols);
        cuda::launch_gemv_q8(fmt, dw.get(), nullptr, head, cols, dxq.get(), 1, y2.get(), MatOut::Store, nullptr);
        cuda::launch_gemv_q8(fmt, dw.get() + head_bytes, nullptr, rows - head, cols, dxq.get(), 1, y2.get() + head,
                             MatOut::Store, nullptr);
        const std::vector<float> a = y1.download(), b = y2.download();
        EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << type_name(type);
    }
}

// ------------------------------------------------------------------------------- Q/K/V post + KV store

struct PostCase {
    KvType kv;
    bool neox, bias, qk_norm;
    int head_dim, n_rot, n_head, n_head_kv, n_tok, pos0;
};

// The buffers a Q/K/V post points at (host or device): the projections, the optional biases and
// Q/K norms (used when `bias` / `qk_norm`), the rotation frequencies, the caches and their scales
// (INT8 only).
struct PostBufs {
    float *q, *k, *v;
    const float *bq, *bk, *bv, *qn, *kn, *inv;
    void *kc, *vc;
    Half *ks, *vs;
};
void point_post(cuda::QkvPostParams& p, const PostBufs& b, bool bias, bool qk_norm) {
    p.q = b.q;
    p.k = b.k;
    p.v = b.v;
    p.bq = bias ? b.bq : nullptr;
    p.bk = bias ? b.bk : nullptr;
    p.bv = bias ? b.bv : nullptr;
    p.q_norm = qk_norm ? b.qn : nullptr;
    p.k_norm = qk_norm ? b.kn : nullptr;
    p.inv_freq = b.inv;
    p.k_cache = b.kc;
    p.v_cache = b.vc;
    p.k_scale = p.kv_type == KvType::Int8 ? b.ks : nullptr;
    p.v_scale = p.kv_type == KvType::Int8 ? b.vs : nullptr;
}

void run_post_case(const PostCase& c, std::mt19937& rng) {
    SCOPED_TRACE(std::string(c.kv == KvType::Int8 ? "int8" : "fp16") + (c.neox ? " neox" : " normal") +
                 (c.bias ? " bias" : "") + (c.qk_norm ? " qk_norm" : "") + " hd=" + std::to_string(c.head_dim) +
                 " n_rot=" + std::to_string(c.n_rot) + " heads=" + std::to_string(c.n_head) + "/" +
                 std::to_string(c.n_head_kv) + " n_tok=" + std::to_string(c.n_tok) + " pos0=" + std::to_string(c.pos0));
    const int hd = c.head_dim, Q = c.n_head * hd, KV = c.n_head_kv * hd;
    const int n_ctx = c.pos0 + c.n_tok + 3;
    std::vector<float> q = randn(static_cast<size_t>(c.n_tok) * Q, rng, 2.0f);
    std::vector<float> k = randn(static_cast<size_t>(c.n_tok) * KV, rng, 2.0f);
    std::vector<float> v = randn(static_cast<size_t>(c.n_tok) * KV, rng, 2.0f);
    if (c.n_tok > 1) {
        std::fill(k.begin() + KV, k.begin() + KV + hd, 0.0f);  // an all-zero head: scale 0
    }
    const std::vector<float> bq = randn(Q, rng, 0.5f), bk = randn(KV, rng, 0.5f), bv = randn(KV, rng, 0.5f);
    const std::vector<float> qn = randn(hd, rng), kn = randn(hd, rng);
    ModelConfig mc;
    mc.n_rot = c.n_rot;
    mc.rope_freq_base = 10000.0f;
    const std::vector<float> inv = rope_inv_freq(mc, nullptr);

    const size_t elt = c.kv == KvType::Int8 ? 1 : 2;
    const size_t cache_bytes = static_cast<size_t>(n_ctx) * KV * elt;
    const size_t n_scales = static_cast<size_t>(n_ctx) * c.n_head_kv;
    const int poison = c.kv == KvType::Int8 ? 0x80 : 0xFF;  // int8 -128 (never stored) / fp16 NaN
    std::vector<uint8_t> kc(cache_bytes, static_cast<uint8_t>(poison)), vc(cache_bytes, static_cast<uint8_t>(poison));
    std::vector<Half> ks(n_scales, Half{0xFFFF}), vs(n_scales, Half{0xFFFF});

    cuda::QkvPostParams p;
    p.n_rot = c.n_rot;
    p.neox = c.neox;
    p.n_tok = c.n_tok;
    p.pos0 = c.pos0;
    p.n_head = c.n_head;
    p.n_head_kv = c.n_head_kv;
    p.head_dim = hd;
    p.eps = 1e-6f;
    p.kv_type = c.kv;

    // CPU twin on host copies.
    std::vector<float> rq = q, rk = k, rv = v;
    std::vector<uint8_t> rkc = kc, rvc = vc;
    std::vector<Half> rks = ks, rvs = vs;
    cuda::QkvPostParams hp = p;
    point_post(hp, {rq.data(), rk.data(), rv.data(), bq.data(), bk.data(), bv.data(), qn.data(), kn.data(), inv.data(),
                    rkc.data(), rvc.data(), rks.data(), rvs.data()},
               c.bias, c.qk_norm);
    cuda::qkv_post_ref(hp);

    DevBuf<float> dq(q), dk(k), dv(v), dbq(bq), dbk(bk), dbv(bv), dqn(qn), dkn(kn), dinv(inv);
    DevBuf<uint8_t> dkc(kc), dvc(vc);
    DevBuf<Half> dks(ks), dvs(vs);
    cuda::QkvPostParams dp = p;
    point_post(dp, {dq.get(), dk.get(), dv.get(), dbq.get(), dbk.get(), dbv.get(), dqn.get(), dkn.get(), dinv.get(),
                    dkc.get(), dvc.get(), dks.get(), dvs.get()},
               c.bias, c.qk_norm);
    cuda::launch_qkv_post(dp, nullptr);

    auto check_vec = [&](const char* what, const std::vector<float>& got, const std::vector<float>& ref) {
        for (size_t h0 = 0; h0 < ref.size(); h0 += hd) {
            float amax = 0.0f;
            for (int i = 0; i < hd; ++i) amax = std::max(amax, std::fabs(ref[h0 + i]));
            for (int i = 0; i < hd; ++i) {
                ASSERT_NEAR(got[h0 + i], ref[h0 + i], 2e-5 * amax + 1e-6) << what << "[" << h0 + i << "]";
            }
        }
    };
    check_vec("q", dq.download(), rq);
    check_vec("k", dk.download(), rk);
    check_vec("v", dv.download(), rv);

    auto check_cache = [&](const char* what, const std::vector<uint8_t>& got, const std::vector<uint8_t>& ref,
                           const std::vector<Half>& gs, const std::vector<Half>& rs) {
        if (c.kv == KvType::Int8) {
            int off_by_one = 0, written = 0;
            for (size_t i = 0; i < ref.size(); ++i) {
                const int a = static_cast<int8_t>(got[i]), b = static_cast<int8_t>(ref[i]);
                if (b == -128) {
                    ASSERT_EQ(a, -128) << what << " written outside the batch's positions at " << i;
                    continue;
                }
                ++written;
                ASSERT_NE(a, -128) << what << " not written at " << i;
                ASSERT_LE(std::abs(a - b), 1) << what << "[" << i << "]";
                off_by_one += a != b;
            }
            EXPECT_LE(off_by_one, written / 100 + 1) << what;
            for (size_t i = 0; i < rs.size(); ++i) {
                if (rs[i].bits == 0xFFFF) {
                    ASSERT_EQ(gs[i].bits, 0xFFFF) << what << " scale written outside the batch at " << i;
                    continue;
                }
                ASSERT_LE(std::abs(static_cast<int>(gs[i].bits) - static_cast<int>(rs[i].bits)), 1)
                    << what << " scale[" << i << "]";
            }
        } else {
            const Half* g = reinterpret_cast<const Half*>(got.data());
            const Half* r = reinterpret_cast<const Half*>(ref.data());
            for (size_t i = 0; i < ref.size() / 2; ++i) {
                if (r[i].bits == 0xFFFF) {
                    ASSERT_EQ(g[i].bits, 0xFFFF) << what << " written outside the batch at " << i;
                    continue;
                }
                const float gf = to_f32(g[i]), rf = to_f32(r[i]);
                ASSERT_LE(std::fabs(gf - rf), std::ldexp(std::fabs(rf), -10) + 6e-8f) << what << "[" << i << "]";  // 1 fp16 ulp
            }
        }
    };
    check_cache("k cache", dkc.download(), rkc, dks.download(), rks);
    check_cache("v cache", dvc.download(), rvc, dvs.download(), rvs);
}

TEST(CudaOps, QkvPostRopeAndKvStore) {
    JLLM_REQUIRE_CUDA_DEVICE();
    std::mt19937 rng(2024);
    for (KvType kv : {KvType::Int8, KvType::Fp16}) {
        for (bool neox : {false, true}) {
            run_post_case({kv, neox, false, false, 64, 64, 4, 2, 5, 0}, rng);
            run_post_case({kv, neox, true, false, 128, 128, 8, 8, 3, 37}, rng);     // qwen2-like biases, MHA
            run_post_case({kv, neox, false, true, 128, 128, 16, 2, 7, 1000}, rng);  // qwen3-like Q/K-norm
            run_post_case({kv, neox, true, true, 96, 32, 6, 3, 1, 4095}, rng);      // partial rotary, decode
            run_post_case({kv, neox, false, false, 256, 256, 2, 1, 2, 5}, rng);     // largest head
        }
    }
}

// ------------------------------------------------------------------------------- attention

struct AttnCase {
    KvType kv;
    int head_dim, n_head, n_head_kv, n_tok, pos0, max_split;
    bool pos_on_device = false;  // graph mode: pos0 read from device memory
    bool q8_out = false;         // also write the output as 8-bit activations
};

cuda::AttnKernel g_attn_mode = cuda::AttnKernel::Auto;  // which kernels run_attn_case checks

// The buffers an attention reads and writes (host or device): queries, output, caches, scales.
void point_attention(cuda::AttentionParams& p, const float* q, float* out, const void* kc, const void* vc,
                     const Half* ks, const Half* vs) {
    p.q = q;
    p.out = out;
    p.k_cache = kc;
    p.v_cache = vc;
    p.k_scale = ks;
    p.v_scale = vs;
}

void run_attn_case(const AttnCase& c, std::mt19937& rng) {
    SCOPED_TRACE(std::string(c.kv == KvType::Int8 ? "int8" : "fp16") + " hd=" + std::to_string(c.head_dim) +
                 " heads=" + std::to_string(c.n_head) + "/" + std::to_string(c.n_head_kv) + " n_tok=" +
                 std::to_string(c.n_tok) + " pos0=" + std::to_string(c.pos0) + " split=" + std::to_string(c.max_split));
    const int hd = c.head_dim, KV = c.n_head_kv * hd, Q = c.n_head * hd;
    const int n_ctx = c.pos0 + c.n_tok + 5;  // a few unused positions at the end
    const size_t n_elem = static_cast<size_t>(n_ctx) * KV;
    std::vector<uint8_t> kc, vc;
    std::vector<Half> ks(static_cast<size_t>(n_ctx) * c.n_head_kv), vs(ks.size());
    float vmax = 0.0f;
    if (c.kv == KvType::Int8) {
        std::uniform_int_distribution<int> q8(-127, 127);
        std::uniform_real_distribution<float> sc(0.005f, 0.05f);
        kc.resize(n_elem);
        vc.resize(n_elem);
        for (auto& b : kc) b = static_cast<uint8_t>(static_cast<int8_t>(q8(rng)));
        for (auto& b : vc) b = static_cast<uint8_t>(static_cast<int8_t>(q8(rng)));
        for (auto& s : ks) s = to_half(sc(rng) * 4.0f);
        for (auto& s : vs) {
            s = to_half(sc(rng));
            vmax = std::max(vmax, 127.0f * to_f32(s));
        }
    } else {
        std::normal_distribution<float> nd(0.0f, 1.0f);
        kc.resize(n_elem * 2);
        vc.resize(n_elem * 2);
        Half* kh = reinterpret_cast<Half*>(kc.data());
        Half* vh = reinterpret_cast<Half*>(vc.data());
        for (size_t i = 0; i < n_elem; ++i) {
            kh[i] = to_half(2.0f * nd(rng));
            vh[i] = to_half(nd(rng));
            vmax = std::max(vmax, std::fabs(to_f32(vh[i])));
        }
    }
    const std::vector<float> q = randn(static_cast<size_t>(c.n_tok) * Q, rng);
    std::vector<float> ref(q.size());
    cuda::AttentionParams p;
    p.kv_type = c.kv;
    p.n_tok = c.n_tok;
    p.pos0 = c.pos0;
    p.n_head = c.n_head;
    p.n_head_kv = c.n_head_kv;
    p.head_dim = hd;
    cuda::AttentionParams hp = p;
    point_attention(hp, q.data(), ref.data(), kc.data(), vc.data(), ks.data(), vs.data());
    cuda::attention_ref(hp);

    DevBuf<float> dq(q), dout(q.size());
    DevBuf<uint8_t> dkc(kc), dvc(vc);
    DevBuf<Half> dks(ks), dvs(vs);
    const size_t wf = cuda::attention_work_floats(c.n_tok, c.n_head, hd, std::max(1, c.max_split));
    DevBuf<float> work(wf);
    work.poison();
    dout.poison();
    cuda::AttentionParams dp = p;
    const bool int8 = c.kv == KvType::Int8;
    point_attention(dp, dq.get(), dout.get(), dkc.get(), dvc.get(), int8 ? dks.get() : nullptr,
                    int8 ? dvs.get() : nullptr);
    dp.work = work.get();
    dp.max_split = c.max_split;
    DevBuf<int> dpos(std::vector<int>{c.pos0});
    if (c.pos_on_device) {
        dp.pos_dev = dpos.get();
        dp.pos0 = 0;  // must not be used
    }
    const size_t qb = cuda::act_q8_bytes(c.n_tok, Q);
    DevBuf<uint8_t> dq8(qb);
    dq8.poison();
    if (c.q8_out) dp.out_q8 = dq8.get();
    cuda::launch_attention(dp, nullptr);
    const std::vector<float> got = dout.download();
    // The tensor-core prefill rounds Q and the probabilities to fp16 (relative 2^-11 each); the
    // tensor-core INT8 decode (head_dim 128, 256) only the probabilities (Q in two fp16 parts);
    // the fp32 kernels only reorder sums.
    const bool prefill_mma = g_attn_mode == cuda::AttnKernel::Auto && cuda::attention_mma_supported(dp);
    const bool mma = prefill_mma || cuda::attention_decode_tensor_cores(dp);
    const double bound = (prefill_mma ? 3e-3 : mma ? 1e-3 : 2e-4) * vmax;
    for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(got[i], ref[i], bound) << i << (mma ? " (tensor cores)" : "");
    if (c.q8_out) {
        const std::vector<uint8_t> h = dq8.download();
        const int8_t* qv = reinterpret_cast<const int8_t*>(h.data());
        const float* sc = reinterpret_cast<const float*>(h.data() + cuda::act_q8_scale_offset(c.n_tok, Q));
        for (size_t i = 0; i < ref.size(); ++i) {
            const float d = sc[4 * (i / 32)];
            ASSERT_NEAR(d * static_cast<float>(qv[i]), ref[i], 0.5001f * d + bound) << "q8 " << i;
        }
    }
}

// Decode shapes of the group-shared INT8 kernel (groups 1-8, head_dim 64/128/256): several chunks
// per split, partial chunks, warps without keys, graph mode.
void run_decode_shapes(KvType kv, std::mt19937& rng) {
    run_attn_case({kv, 128, 32, 8, 1, 4095, 33, true, true}, rng);  // Qwen3-4B heads at depth 4096
    run_attn_case({kv, 64, 32, 8, 1, 4095, 33, true, true}, rng);   // group 4 at head_dim 64 (fp32 path)
    run_attn_case({kv, 128, 32, 8, 1, 700, 2}, rng);                // group 4: several chunks per split
    run_attn_case({kv, 64, 9, 3, 1, 300, 16, true, true}, rng);     // group 3, last split short
    run_attn_case({kv, 128, 12, 2, 1, 45, 8}, rng);                 // group 6, one partial chunk
    run_attn_case({kv, 256, 16, 2, 1, 1500, 8}, rng);               // group 8, largest head
    run_attn_case({kv, 128, 4, 4, 1, 129, 1}, rng);                 // group 1, no split, 2+ chunks
    run_attn_case({kv, 64, 10, 2, 1, 500, 4}, rng);                 // group 5: the generic kernel
}

// The decode attention's heads per block (host code, no GPU): groups whose post folds in as they
// are (1, 2) keep the group; even groups halve to two heads per block (the post folds in), then,
// on a grid past two blocks per SM, double back to four (the post in two rounds), else halve to
// one while the grid stays within two blocks per SM (the post folds in where a block's heads, K
// and V take one round of four warps); odd groups keep theirs (the post separate).
TEST(CudaOps, AttentionHeadsPerBlockOnHost) {
    auto heads = [](int group, int n_head, int n_split, int sms) {
        const cuda::DecodeHeads d = cuda::attention_decode_heads(group, n_head, n_split, sms);
        return std::make_pair(d.per_block, d.folds_post);
    };
    using P = std::pair<int, bool>;
    EXPECT_EQ(heads(4, 32, 1, 132), P(1, true));
    EXPECT_EQ(heads(4, 32, 8, 132), P(1, true));
    EXPECT_EQ(heads(4, 32, 16, 132), P(2, true));   // 256 two-head blocks: two per SM
    EXPECT_EQ(heads(4, 32, 17, 132), P(4, true));   // past two per SM: four heads, two rounds
    EXPECT_EQ(heads(4, 32, 33, 132), P(4, true));   // qwen3-4b at depth 4096
    EXPECT_EQ(heads(2, 16, 1, 132), P(2, true));    // qwen3-0.6b: the post folds in
    EXPECT_EQ(heads(2, 16, 64, 132), P(2, true));
    EXPECT_EQ(heads(3, 24, 1, 132), P(3, false));   // odd group
    EXPECT_EQ(heads(6, 24, 1, 132), P(3, false));
    EXPECT_EQ(heads(8, 32, 2, 8), P(4, true));      // 8 SMs (the Orin Nano): 32 two-head blocks
    EXPECT_EQ(heads(8, 32, 1, 8), P(2, true));
    for (int group : {1, 2, 3, 4, 6, 8}) {
        for (int n_split : {1, 2, 4, 8, 16, 33, 64, 256}) {
            for (int sms : {8, 16, 132}) {
                const int n_head = 8 * group;
                const auto [hb, folds] = heads(group, n_head, n_split, sms);
                ASSERT_TRUE(hb >= 1 && hb <= 4 && group % hb == 0);
                int fold_hb = group;  // halved while even and its heads, K and V exceed four warps
                while (fold_hb % 2 == 0 && fold_hb + 2 > cuda::ATTN_DECODE_WARPS_DEFAULT) fold_hb /= 2;
                const int64_t grid = static_cast<int64_t>(n_head / fold_hb) * n_split;
                if (hb < fold_hb) {  // below the folding size only while the grid stays small
                    EXPECT_LE(static_cast<int64_t>(n_head / hb) * n_split, 2 * sms);
                    EXPECT_EQ(folds, hb + 2 <= cuda::ATTN_DECODE_WARPS_DEFAULT);
                } else if (hb > fold_hb) {  // twice the folding size only on a large grid
                    EXPECT_EQ(hb, 2 * fold_hb);
                    EXPECT_GT(grid, 2 * sms);
                    EXPECT_TRUE(folds);
                } else {
                    EXPECT_EQ(folds, fold_hb + 2 <= cuda::ATTN_DECODE_WARPS_DEFAULT);
                }
            }
        }
    }
}

TEST(CudaOps, AttentionDecodeWarps) {
    JLLM_REQUIRE_CUDA_DEVICE();
    std::mt19937 rng(4242);
    g_attn_mode = cuda::AttnKernel::Auto;
    for (int warps : {1, 2, 4}) {  // the default last
        SCOPED_TRACE("decode warps " + std::to_string(warps));
        cuda::set_attention_decode_warps(warps);
        run_decode_shapes(KvType::Int8, rng);
        run_attn_case({KvType::Int8, 128, 16, 8, 1, 100, 32, true, true}, rng);  // two short splits
        run_attn_case({KvType::Int8, 64, 4, 2, 1, 2047, 3}, rng);                // long splits
    }
    cuda::set_attention_decode_warps(cuda::ATTN_DECODE_WARPS_DEFAULT);
}

TEST(CudaOps, AttentionPrefillAndDecode) {
    JLLM_REQUIRE_CUDA_DEVICE();
    std::mt19937 rng(31337);
    for (cuda::AttnKernel mode : {cuda::AttnKernel::Auto, cuda::AttnKernel::Simt}) {
    g_attn_mode = mode;
    cuda::set_attention_kernel(mode);
    SCOPED_TRACE(mode == cuda::AttnKernel::Auto ? "tensor-core prefill" : "fp32 kernels only");
    for (KvType kv : {KvType::Int8, KvType::Fp16}) {
        run_attn_case({kv, 64, 4, 2, 1, 0, 1}, rng);        // first token: one key
        run_attn_case({kv, 64, 8, 2, 37, 0, 1}, rng);       // prefill from 0, GQA 4
        run_attn_case({kv, 128, 6, 6, 5, 61, 1}, rng);      // prefill after a prefix, MHA
        run_attn_case({kv, 32, 8, 1, 3, 300, 1}, rng);      // MQA, small head
        run_attn_case({kv, 256, 2, 1, 2, 9, 1}, rng);       // largest head
        run_attn_case({kv, 128, 16, 8, 1, 30, 4}, rng);     // decode, context < one split
        run_attn_case({kv, 128, 16, 8, 1, 1000, 8}, rng);   // decode split over 4 ranges
        run_attn_case({kv, 64, 4, 2, 1, 2047, 3}, rng);     // more ranges wanted than allowed
        run_attn_case({kv, 96, 4, 4, 1, 513, 64}, rng);     // head_dim 96, split 3, last split short
        run_attn_case({kv, 64, 12, 4, 23, 40, 1}, rng);     // group 3: 5 tokens per block, partial last tile
        run_attn_case({kv, 256, 32, 2, 3, 70, 1}, rng);     // group 16, largest head: > 48 KB shared memory
        run_attn_case({kv, 128, 32, 1, 1, 700, 4}, rng);    // group 32 (1024 threads), decode split
        // graph mode (position on the device, grid for max_split) and 8-bit output
        run_attn_case({kv, 128, 16, 8, 1, 0, 32, true, true}, rng);     // first token, 31 idle splits
        run_attn_case({kv, 128, 16, 8, 1, 100, 32, true, true}, rng);   // two splits of 64
        run_attn_case({kv, 128, 16, 8, 1, 4095, 32, true, true}, rng);  // 32 splits of 128
        run_attn_case({kv, 64, 8, 2, 1, 777, 5, true, false}, rng);     // uneven, fp32 out only
        run_attn_case({kv, 128, 8, 2, 3, 20, 1, false, true}, rng);     // no split: separate quantization
        // tensor-core prefill shapes: several query tiles, several key tiles, a prefix, GQA 4
        run_attn_case({kv, 128, 8, 2, 130, 0, 1}, rng);                 // 3 query tiles, last partial
        run_attn_case({kv, 128, 8, 2, 64, 200, 1, false, true}, rng);   // after a prefix, 8-bit out
        run_attn_case({kv, 64, 9, 3, 77, 5, 1}, rng);                   // SmolLM2-like heads, group 3
        run_decode_shapes(kv, rng);
    }
    }
    cuda::set_attention_kernel(cuda::AttnKernel::Auto);
}

// The decode attention given the Q/K/V post (AttentionParams::post) against the two kernels it
// replaces (launch_qkv_post, then launch_attention): the output, its 8-bit copy (made in the
// kernel without a split) and both caches with their scales bit for bit, every other cache
// position untouched, the projections left as they were where the post is folded in. Folded
// (one or two query heads per block on four warps, or four in two rounds): Qwen3-0.6B heads
// (Q/K-norm) with and without splits and in graph mode, qwen2-like biases with neox off, head_dim
// 64 and 256, the first token, Qwen3-4B heads at four splits (one head per block: four blocks store
// each KV head's bytes), at 16 splits (two per block) and at depth 4096 (four per block; also at
// head_dim 64, the fp32 path); by its own kernel first: group 6 with biases (three heads per
// block).
TEST(CudaOps, AttentionDecodeFoldsPost) {
    JLLM_REQUIRE_CUDA_DEVICE();
    std::mt19937 rng(9090);
    struct Case {
        int hd, n_head, n_head_kv, pos, max_split;
        bool bias, qk_norm, neox, pos_dev;
    };
    const Case cases[] = {
        {128, 16, 8, 0, 1, false, true, true, true},       // Qwen3-0.6B heads, first token
        {128, 16, 8, 100, 1, false, true, true, false},    // one split: 8-bit output in the kernel
        {128, 16, 8, 1000, 8, false, true, true, true},    // splits, graph mode
        {128, 16, 8, 4095, 33, false, true, true, false},  // depth 4096
        {128, 14, 14, 300, 4, true, false, false, false},  // qwen2-like biases, group 1
        {64, 8, 4, 256, 2, true, true, false, true},       // head_dim 64, two splits
        {256, 4, 2, 77, 1, false, true, true, false},      // largest head
        {128, 32, 8, 700, 4, false, true, true, true},     // Qwen3-4B heads, one per block: folded
        {128, 32, 8, 4095, 33, false, true, true, false},  // Qwen3-4B at depth 4096: four per block
        {128, 32, 8, 1500, 16, false, true, true, true},   // Qwen3-4B at 16 splits: two per block
        {64, 32, 8, 4095, 33, true, true, false, false},   // head_dim 64 at depth: four per block, fp32 path
        {128, 12, 2, 50, 1, true, false, false, false},    // group 6 with biases: its own kernel
    };
    for (const Case& c : cases) {
        SCOPED_TRACE("hd=" + std::to_string(c.hd) + " heads=" + std::to_string(c.n_head) + "/" +
                     std::to_string(c.n_head_kv) + " pos=" + std::to_string(c.pos) + " split=" +
                     std::to_string(c.max_split));
        const int hd = c.hd, Q = c.n_head * hd, KV = c.n_head_kv * hd, n_ctx = c.pos + 9;
        const std::vector<float> q = randn(Q, rng, 2.0f), k = randn(KV, rng, 2.0f), v = randn(KV, rng, 2.0f);
        const std::vector<float> bq = randn(Q, rng, 0.5f), bk = randn(KV, rng, 0.5f), bv = randn(KV, rng, 0.5f);
        const std::vector<float> qn = randn(hd, rng), kn = randn(hd, rng);
        ModelConfig mc;
        mc.n_rot = hd;
        mc.rope_freq_base = 1000000.0f;
        const std::vector<float> inv = rope_inv_freq(mc, nullptr);
        // A cache of earlier positions (random), the new position and past it poisoned.
        std::uniform_int_distribution<int> q8(-127, 127);
        std::uniform_real_distribution<float> sc(0.005f, 0.05f);
        std::vector<uint8_t> kc(static_cast<size_t>(n_ctx) * KV, 0x80), vc(kc.size(), 0x80);
        std::vector<Half> ks(static_cast<size_t>(n_ctx) * c.n_head_kv, Half{0xFFFF}), vs(ks.size(), Half{0xFFFF});
        for (size_t i = 0; i < static_cast<size_t>(c.pos) * KV; ++i) {
            kc[i] = static_cast<uint8_t>(static_cast<int8_t>(q8(rng)));
            vc[i] = static_cast<uint8_t>(static_cast<int8_t>(q8(rng)));
        }
        for (size_t i = 0; i < static_cast<size_t>(c.pos) * c.n_head_kv; ++i) {
            ks[i] = to_half(sc(rng) * 4.0f);
            vs[i] = to_half(sc(rng));
        }
        DevBuf<float> dbq(bq), dbk(bk), dbv(bv), dqn(qn), dkn(kn), dinv(inv);
        DevBuf<int> dpos(std::vector<int>{c.pos});
        struct Run {
            std::vector<float> q, k, v, out;
            std::vector<uint8_t> out_q8, kc, vc;
            std::vector<Half> ks, vs;
        };
        auto run = [&](bool fold) {
            DevBuf<float> dq(q), dk(k), dv(v), dout(static_cast<size_t>(Q));
            DevBuf<uint8_t> dkc(kc), dvc(vc), dq8(cuda::act_q8_bytes(1, Q));
            DevBuf<Half> dks(ks), dvs(vs);
            DevBuf<float> work(cuda::attention_work_floats(1, c.n_head, hd, c.max_split));
            dout.poison();
            dq8.poison();
            work.poison();
            cuda::QkvPostParams pp;
            pp.kv_type = KvType::Int8;
            point_post(pp, {dq.get(), dk.get(), dv.get(), dbq.get(), dbk.get(), dbv.get(), dqn.get(), dkn.get(),
                            dinv.get(), dkc.get(), dvc.get(), dks.get(), dvs.get()},
                       c.bias, c.qk_norm);
            pp.n_rot = hd;
            pp.neox = c.neox;
            pp.n_tok = 1;
            pp.pos0 = c.pos_dev ? 0 : c.pos;
            pp.pos_dev = c.pos_dev ? dpos.get() : nullptr;
            pp.n_head = c.n_head;
            pp.n_head_kv = c.n_head_kv;
            pp.head_dim = hd;
            pp.eps = 1e-6f;
            cuda::AttentionParams ap;
            point_attention(ap, dq.get(), dout.get(), dkc.get(), dvc.get(), dks.get(), dvs.get());
            ap.kv_type = KvType::Int8;
            ap.n_tok = 1;
            ap.pos0 = pp.pos0;
            ap.pos_dev = pp.pos_dev;
            ap.n_head = c.n_head;
            ap.n_head_kv = c.n_head_kv;
            ap.head_dim = hd;
            ap.work = work.get();
            ap.max_split = c.max_split;
            ap.out_q8 = dq8.get();
            if (fold) {
                ap.post = &pp;
            } else {
                cuda::launch_qkv_post(pp, nullptr);
            }
            cuda::launch_attention(ap, nullptr);
            return Run{dq.download(), dk.download(), dv.download(), dout.download(), dq8.download(),
                       dkc.download(), dvc.download(), dks.download(), dvs.download()};
        };
        const Run ref = run(false);
        const Run got = run(true);
        // Query heads per block as launch_attention picks them (the grid's splits: max_split in
        // every case where the choice depends on them).
        const bool folded = cuda::attention_decode_heads(c.n_head / c.n_head_kv, c.n_head, c.max_split,
                                                         cuda::device_sm_count())
                                .folds_post;
        auto same = [](const auto& a, const auto& b) {
            return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(a[0])) == 0;
        };
        EXPECT_TRUE(same(got.out, ref.out)) << "output";
        EXPECT_TRUE(same(got.kc, ref.kc)) << "K cache";
        EXPECT_TRUE(same(got.vc, ref.vc)) << "V cache";
        EXPECT_TRUE(same(got.ks, ref.ks)) << "K scales";
        EXPECT_TRUE(same(got.vs, ref.vs)) << "V scales";
        // The 8-bit output is the quantization of the fp32 output (the twin's, bit for bit).
        std::vector<uint8_t> q8ref(got.out_q8.size());
        cuda::quantize_act_ref(got.out.data(), 1, Q, q8ref.data());
        EXPECT_TRUE(same(got.out_q8, q8ref)) << "8-bit output";
        EXPECT_TRUE(same(ref.out_q8, q8ref)) << "8-bit output (reference)";
        // The post wrote the new position only; the projections stay as they were.
        for (int64_t i = 0; i < static_cast<int64_t>(kc.size()); ++i) {
            if (i / KV == c.pos) continue;
            ASSERT_EQ(got.kc[i], kc[i]) << "K cache changed at " << i;
            ASSERT_EQ(got.vc[i], vc[i]) << "V cache changed at " << i;
        }
        for (int i = 0; i < KV; ++i) ASSERT_NE(static_cast<int8_t>(got.kc[static_cast<size_t>(c.pos) * KV + i]), -128);
        if (folded) EXPECT_TRUE(same(got.q, q) && same(got.k, k) && same(got.v, v)) << "projections changed";
        else EXPECT_TRUE(same(got.q, ref.q) && same(got.k, ref.k) && same(got.v, ref.v)) << "post";
    }
}

// ------------------------------------------------------------------------------- argmax

TEST(CudaOps, ArgmaxFirstMaximum) {
    JLLM_REQUIRE_CUDA_DEVICE();
    std::mt19937 rng(11);
    DevBuf<uint8_t> work(cuda::argmax_work_bytes());
    work.poison(0);  // zero once; every call leaves it zero
    for (int64_t n : {1, 2, 1000, 1025, 4095, 4096, 4097, 151936}) {
        for (int tie : {0, 1}) {
            std::vector<float> x = randn(static_cast<size_t>(n), rng);
            if (n > 10) {
                const float m = *std::max_element(x.begin(), x.end()) + 1.0f;
                // tie: the first wins (across blocks of 4,096 values too); NaN never wins
                x[static_cast<size_t>(tie ? n - 1 : n / 3)] = m;
                x[static_cast<size_t>(tie ? n / 3 : n - 1)] = tie ? m : NAN;
                x[0] = -INFINITY;
            }
            DevBuf<float> dx(x);
            DevBuf<int32_t> out(1);
            out.poison();
            cuda::launch_argmax(dx.get(), n, work.get(), out.get(), nullptr);
            EXPECT_EQ(out.download()[0], cuda::argmax_ref(x.data(), n)) << "n=" << n;
        }
    }
    const std::vector<uint8_t> left = work.download();
    EXPECT_TRUE(std::all_of(left.begin(), left.end(), [](uint8_t b) { return b == 0; }));
}

// The k largest against topk_ref, bit for bit (values and indices), on inputs that test the radix
// selection: random values with ties, NaN and -inf; every value equal (the k-th value's ties decide
// everything, taken in index order across the whole array); a few finite values among -inf (a
// masked vocabulary); +0 and -0 (equal, so ties); ties of the k-th value spread over the array
// beyond the k; values one ulp apart (the last digit decides); n not a multiple of four and an
// input not 16-byte aligned (the scalar loads).
TEST(CudaOps, TopKSortedWithTies) {
    JLLM_REQUIRE_CUDA_DEVICE();
    std::mt19937 rng(555);
    struct Case {
        const char* name;
        int64_t n;
        int k;
        int offset;  // floats into the device buffer
    };
    const Case cases[] = {{"random", 151936, 40, 0},  {"random", 151936, 128, 0}, {"random", 5000, 1, 0},
                          {"random", 4097, 128, 0},   {"random", 300, 128, 0},    {"random", 129, 128, 0},
                          {"random", 151935, 65, 1},  {"random", 7, 3, 3},        {"all equal", 151936, 104, 0},
                          {"all equal", 10001, 128, 2}, {"masked", 151936, 64, 0}, {"signed zeros", 20000, 100, 0},
                          {"ties past k", 151936, 40, 0}, {"ulps", 151936, 128, 0},
                          {"random", 600000, 128, 0}, {"all equal", 600000, 128, 0}};
    for (const Case& c : cases) {
        const int64_t n = c.n;
        const int k = c.k;
        SCOPED_TRACE(std::string(c.name) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
                     " offset=" + std::to_string(c.offset));
        std::vector<float> x = randn(static_cast<size_t>(n), rng, 3.0f);
        const std::string name = c.name;
        if (name == "random") {  // ties, NaN and -inf
            for (int i = 0; i < 8 && i + 100 < n; ++i) x[static_cast<size_t>(i * 7 % n)] = 9.0f;
            x[static_cast<size_t>(n / 2)] = NAN;
            x[static_cast<size_t>(n - 1)] = -INFINITY;
        } else if (name == "all equal") {
            std::fill(x.begin(), x.end(), 1.5f);
        } else if (name == "masked") {
            std::vector<float> m(x.size(), -INFINITY);
            for (int64_t i = 0; i < 50; ++i) m[static_cast<size_t>(i * 2999 % n)] = x[static_cast<size_t>(i)];
            x = m;  // 50 finite values, then -inf ties by index
        } else if (name == "signed zeros") {
            for (size_t i = 0; i < x.size(); ++i) x[i] = x[i] > 0.0f ? -0.0f : (i % 3 ? 0.0f : x[i]);
        } else if (name == "ties past k") {  // 300 copies of the 30th largest value, all over the array
            std::vector<float> s = x;
            std::sort(s.begin(), s.end(), std::greater<float>());
            for (int i = 0; i < 300; ++i) x[static_cast<size_t>((static_cast<int64_t>(i) * 509 + 17) % n)] = s[29];
        } else if (name == "ulps") {  // a narrow band: the last digit decides
            for (size_t i = 0; i < x.size(); ++i) {
                x[i] = std::nextafter(2.0f, 3.0f + static_cast<float>(i % 7));
                for (size_t u = 0; u < i % 257; ++u) x[i] = std::nextafter(x[i], 3.0f);
            }
        }
        std::vector<float> rv(static_cast<size_t>(k));
        std::vector<int32_t> ri(static_cast<size_t>(k));
        cuda::topk_ref(x.data(), n, k, rv.data(), ri.data());
        std::vector<float> padded(static_cast<size_t>(c.offset), 77.0f);  // before x: never read
        padded.insert(padded.end(), x.begin(), x.end());
        padded.push_back(99.0f);  // after x: never read
        DevBuf<float> dx(padded), work(cuda::topk_work_floats(n, k)), dv(static_cast<size_t>(k));
        DevBuf<int32_t> di(static_cast<size_t>(k));
        dv.poison();
        di.poison();
        cuda::launch_topk(dx.get() + c.offset, n, k, work.get(), dv.get(), di.get(), nullptr);
        const std::vector<float> gv = dv.download();
        const std::vector<int32_t> gi = di.download();
        for (int i = 0; i < k; ++i) {
            ASSERT_EQ(gi[static_cast<size_t>(i)], ri[static_cast<size_t>(i)]) << i;
            ASSERT_EQ(gv[static_cast<size_t>(i)], rv[static_cast<size_t>(i)]) << i;
        }
    }
}

}  // namespace
}  // namespace jllm::test

#else

TEST(CudaOps, NotBuilt) { GTEST_SKIP() << "built without the CUDA backend"; }

#endif
