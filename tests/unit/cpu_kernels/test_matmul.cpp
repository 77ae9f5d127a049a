// tests/unit/cpu_kernels/test_matmul.cpp — matmul_cpu / matmul_multi_cpu against the float
// reference (dequantized weights, double dot) for 1, 3 and 17 tokens, odd n_out, 1..3 threads,
// at every SIMD level this machine runs.
#include <gtest/gtest.h>

#include <vector>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/matmul.h"
#include "kernel_test_util.h"

namespace jllm {
namespace {

using test::dequantize;
using test::dot_f64;
using test::quant_error_bound;
using test::random_activations;
using test::random_weight_row;

struct Mat {
    std::vector<uint8_t> data;  // [n_out][row bytes]
    std::vector<float> deq;     // [n_out][n_in]
    MatmulWeight w;
};

Mat random_matrix(GgmlType type, int64_t n_in, int64_t n_out, std::mt19937& rng) {
    Mat m;
    for (int64_t r = 0; r < n_out; r++) {
        std::vector<uint8_t> row = random_weight_row(type, n_in, rng);
        m.data.insert(m.data.end(), row.begin(), row.end());
        std::vector<float> d = dequantize(type, row.data(), n_in);
        m.deq.insert(m.deq.end(), d.begin(), d.end());
    }
    m.w = MatmulWeight{m.data.data(), type, n_in, n_out};
    return m;
}

void expect_matches_reference(const Mat& m, const std::vector<float>& x, int64_t n_tokens,
                              const std::vector<float>& y, const char* what) {
    // The activation format (hence the error bound) is the same at every level.
    const QuantDotKernel* k = quant_dot_kernel(m.w.type, SimdLevel::Scalar);
    const int64_t n_in = m.w.n_in, n_out = m.w.n_out;
    for (int64_t t = 0; t < n_tokens; t++) {
        for (int64_t r = 0; r < n_out; r++) {
            std::vector<float> wr(m.deq.begin() + r * n_in, m.deq.begin() + (r + 1) * n_in);
            const double ref = dot_f64(wr, x.data() + t * n_in);
            const double bound = quant_error_bound(*k, wr, x.data() + t * n_in);
            ASSERT_NEAR(y[static_cast<size_t>(t * n_out + r)], ref, bound)
                << what << " " << type_name(m.w.type) << " t=" << t << " r=" << r;
        }
    }
}

class Matmul : public testing::TestWithParam<GgmlType> {};

TEST_P(Matmul, MatchesReference) {
    const GgmlType type = GetParam();
    std::mt19937 rng(99 + static_cast<int>(type));
    const int64_t n_in = 768;  // 3 super-blocks
    const int64_t n_out = 37;
    const Mat m = random_matrix(type, n_in, n_out, rng);
    for (SimdLevel level : {SimdLevel::Scalar, SimdLevel::Avx2, SimdLevel::Avx512, SimdLevel::Neon}) {
        if (!simd_level_supported(level)) continue;
        const QuantDotKernel* k = quant_dot_kernel(type, level);
        for (int threads : {1, 2, 3}) {
            ThreadPool pool(threads);
            // 1 and 3: vec_dot; 4 and 5 on either side of the gemm path's thresholds (4 tokens
            // for the 32-element formats, 5 for the K-quants); 8, 17 and 40 the gemm path where
            // the level has one
            for (int64_t n_tokens : {1, 3, 4, 5, 8, 17, 40}) {
                std::vector<float> x;
                for (int64_t t = 0; t < n_tokens; t++) {
                    std::vector<float> xt = random_activations(n_in, rng);
                    x.insert(x.end(), xt.begin(), xt.end());
                }
                std::vector<uint8_t> scratch(matmul_scratch_size(type, n_in, n_tokens) + 1);
                std::vector<float> y(static_cast<size_t>(n_tokens * n_out), -1e30f);
                matmul_cpu(pool, m.w, x.data(), n_tokens, y.data(), scratch.data(), scratch.size(), level);
                expect_matches_reference(m, x, n_tokens, y, simd_level_name(level));
                // The same bits as one row at a time through the dot product: tiling, threads and the
                // gemm path change no arithmetic.
                const size_t arow = act_row_size(type, n_in);
                std::vector<uint8_t> act(arow);
                for (int64_t t = 0; t < n_tokens; t++) {
                    const void* a = x.data() + t * n_in;
                    if (k->quantize_act) {
                        k->quantize_act(x.data() + t * n_in, act.data(), n_in);
                        a = act.data();
                    }
                    for (int64_t r = 0; r < n_out; r++) {
                        float o;
                        k->vec_dot(n_in, m.data.data() + r * row_size(type, n_in), a, arow, 1, &o);
                        ASSERT_EQ(y[static_cast<size_t>(t * n_out + r)], o)
                            << simd_level_name(level) << " threads=" << threads << " n_tokens=" << n_tokens
                            << " t=" << t << " r=" << r;
                    }
                }
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, Matmul,
                         testing::Values(GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                                         GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K,
                                         GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::F16, GgmlType::BF16,
                                         GgmlType::F32),
                         [](const testing::TestParamInfo<GgmlType>& i) {
                             return std::string(type_name(i.param));
                         });

// Rows in blocks of 32 (row_blocks: a token mask's words): the blocks of non-zero words computed,
// bit-identical with the whole matrix's, every other entry untouched; runs of adjacent blocks,
// a last block past n_out, no block at all.
TEST(Matmul, RowBlocksComputeOnlyTheirRows) {
    std::mt19937 rng(17);
    const int64_t n_in = 256, n_out = 200;  // 7 blocks, the last of 8 rows
    for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K}) {
        const Mat m = random_matrix(type, n_in, n_out, rng);
        ThreadPool pool(2);
        for (int64_t n_tokens : {1, 3, 8}) {
            std::vector<float> x;
            for (int64_t t = 0; t < n_tokens; t++) {
                std::vector<float> xt = random_activations(n_in, rng);
                x.insert(x.end(), xt.begin(), xt.end());
            }
            std::vector<uint8_t> scratch(matmul_scratch_size(type, n_in, n_tokens) + 1);
            std::vector<float> all(static_cast<size_t>(n_tokens * n_out));
            matmul_cpu(pool, m.w, x.data(), n_tokens, all.data(), scratch.data(), scratch.size(), simd_level_best());
            const std::vector<std::vector<uint32_t>> masks = {
                {1u, 0u, 0u, 0u, 0u, 0u, 0u},           // block 0 (one bit is enough)
                {0u, 0x80000000u, 7u, 0u, 0u, 1u, 2u},  // blocks 1-2 (one run) and 5-6 (the short last)
                {0u, 0u, 0u, 0u, 0u, 0u, 0u},           // none
            };
            for (const std::vector<uint32_t>& mask : masks) {
                std::vector<float> y(all.size(), -7.0f);
                matmul_cpu(pool, m.w, x.data(), n_tokens, y.data(), scratch.data(), scratch.size(), simd_level_best(),
                           mask.data());
                for (int64_t t = 0; t < n_tokens; t++) {
                    for (int64_t r = 0; r < n_out; r++) {
                        const size_t i = static_cast<size_t>(t * n_out + r);
                        if (mask[static_cast<size_t>(r / 32)] != 0) {
                            ASSERT_EQ(y[i], all[i]) << type_name(type) << " t=" << t << " r=" << r;
                        } else {
                            ASSERT_EQ(y[i], -7.0f) << type_name(type) << " t=" << t << " r=" << r << " was written";
                        }
                    }
                }
            }
        }
    }
}

TEST(MatmulMulti, QkvSharedInput) {
    std::mt19937 rng(5);
    const int64_t n_in = 512;
    // Q4_K / Q4_K / Q6_K (a Q4_K_M attention block) share Q8_K activations; Q8_0 does not.
    const Mat q = random_matrix(GgmlType::Q4_K, n_in, 33, rng);
    const Mat k = random_matrix(GgmlType::Q4_K, n_in, 9, rng);
    const Mat v = random_matrix(GgmlType::Q6_K, n_in, 11, rng);
    const Mat o = random_matrix(GgmlType::Q8_0, n_in, 5, rng);
    ThreadPool pool(2);
    for (int64_t n_tokens : {1, 17}) {
        std::vector<float> x;
        for (int64_t t = 0; t < n_tokens; t++) {
            std::vector<float> xt = random_activations(n_in, rng);
            x.insert(x.end(), xt.begin(), xt.end());
        }
        std::vector<uint8_t> scratch(matmul_scratch_size(GgmlType::Q8_0, n_in, n_tokens) +
                                     matmul_scratch_size(GgmlType::Q4_K, n_in, n_tokens));
        for (bool mixed : {false, true}) {
            const Mat* ms[4] = {&q, &k, &v, &o};
            const int n_w = mixed ? 4 : 3;
            MatmulWeight ws[4];
            std::vector<std::vector<float>> ys(4);
            float* yp[4];
            for (int i = 0; i < n_w; i++) {
                ws[i] = ms[i]->w;
                ys[i].assign(static_cast<size_t>(n_tokens * ws[i].n_out), -1e30f);
                yp[i] = ys[i].data();
            }
            matmul_multi_cpu(pool, ws, n_w, x.data(), n_tokens, yp, scratch.data(), scratch.size(),
                             simd_level_best());
            for (int i = 0; i < n_w; i++)
                expect_matches_reference(*ms[i], x, n_tokens, ys[i], "matmul_multi");
        }
    }
}

}  // namespace
}  // namespace jllm
