// tests/cuda/ops/test_matmul.cpp — the fp32 GEMV and the fp16 tensor-core GEMM against their twins
// (matmul_ref, gemm_ref) on every weight type and epilogue (store, add, SwiGLU): sizes that end
// inside a row or token tile, split-K, the tiled Q4_K/Q6_K layout, launch_matmul's choice between
// the two, and the kernels' chunk dequantizers on the host. Outputs are poisoned before each launch.
#include <gtest/gtest.h>

#if JLLM_CUDA

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "op_test_util.h"

namespace jllm::test {
namespace {

using cuda::MatOut;

// ---- error bounds (every tolerance of this file's tests)
// GEMV and GEMM (op_test_util.h's ProductBound): 1e-4 * sum_i |w_i x_i| + 1e-6, fp32 accumulation
// in any order against an fp64 sum of the same dequantized weights (for the tensor-core GEMM,
// weights and activations rounded to fp16 on both sides, gemm_f16_ref; for its register-decoding kernel
// on tiled Q4_K/Q6_K, the weights its half2 decoder forms, gemm_small_ref); the SwiGLU epilogue
// with silu's slope, at most 1.1.
constexpr ProductBound PRODUCT = {1e-4, 1e-6, 1.1};
// launch_matmul's dispatch, on normal activations: a check of which path ran (each path's
// precision is checked through run_matmul_case), 1e-3 relative to 1 + |ref|.
constexpr double DISPATCH_REL = 1e-3;
// The chunk dequantizers (host build): bit for bit against quant_ref.

struct MatCase {
    GgmlType type;
    int64_t rows, cols;
    int n_tok;
    MatOut out;
    bool gemm;  // force the GEMM path (else GEMV)
    bool split = false;  // give the GEMM a work buffer (split-K when its grid is small)
    cuda::WeightLayout layout = cuda::WeightLayout::Rows;  // of the weights on the device
};

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
    // (The register-decoding GEMM forms its weights in half2 arithmetic: gemm_ref picks its twin.)
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
        const double eg = PRODUCT.rel * mag_g[i] + PRODUCT.abs, eu = PRODUCT.rel * mag_u[i] + PRODUCT.abs;
        double tol = eg;
        if (c.out == MatOut::SwiGLU) {
            const double sg = g[i] / (1.0 + std::exp(-static_cast<double>(g[i])));
            tol = PRODUCT.swiglu_slope * eg * (std::fabs(u[i]) + eu) + std::fabs(sg) * eu + PRODUCT.abs;
        }
        if (!(std::fabs(static_cast<double>(got[i]) - ref[i]) <= tol)) {
            if (++bad <= 5) ADD_FAILURE() << "y[" << i << "] = " << got[i] << ", ref " << ref[i] << ", tol " << tol;
        }
    }
    EXPECT_EQ(bad, 0);
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
        // The register-decoding kernel, one chunk (up to 64 tokens): every token-tile count, rows
        // ending inside a warp's and a block's rows, split parts.
        run_matmul_case({q, 8, 256, 57, MatOut::Store, true, false, T}, rng);
        run_matmul_case({q, 136, 768, 24, MatOut::SwiGLU, true, false, T}, rng);
        run_matmul_case({q, 168, 512, 12, MatOut::Add, true, true, T}, rng);
        run_matmul_case({q, 200, 512, 64, MatOut::SwiGLU, true, true, T}, rng);
        run_matmul_case({q, 88, 1024, 50, MatOut::Add, true, true, T}, rng);
        run_matmul_case({q, 256, 768, 17, MatOut::Store, true, false, T}, rng);
        run_matmul_case({q, 40, 1280, 48, MatOut::Store, true, true, T}, rng);
        // More tokens than one chunk: split parts over several chunks, the last one short.
        run_matmul_case({q, 72, 2048, 131, MatOut::Add, true, true, T}, rng);
        run_matmul_case({q, 40, 2048, 100, MatOut::SwiGLU, true, true, T}, rng);
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
        for (size_t i = 0; i < ref.size(); ++i) {
            ASSERT_NEAR(got[i], ref[i], DISPATCH_REL * (1.0 + std::fabs(ref[i]))) << i;
        }
    }
}

}  // namespace
}  // namespace jllm::test

#endif  // JLLM_CUDA
