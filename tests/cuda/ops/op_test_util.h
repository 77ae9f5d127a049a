// tests/cuda/ops/op_test_util.h — what several op test files share: seeded random inputs (normal
// activations, random weight matrices of every type), a matrix's bytes in the device's layout, the
// weight types the tests sweep, and the Q/K/V post's buffer wiring (the post's and the attention's
// tests). Device buffers and the GPU skip are in cuda_test_util.h (also the model test's).
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "../../unit/cpu_kernels/kernel_test_util.h"
#include "backend/cuda/cuda_ops.h"
#include "core/fp16.h"
#include "cuda_test_util.h"
#include "quant/quant_blocks.h"

namespace jllm::test {

inline std::vector<float> randn(size_t n, std::mt19937& rng, float sd = 1.0f) {
    std::normal_distribution<float> nd(0.0f, sd);
    std::vector<float> v(n);
    for (float& x : v) x = nd(rng);
    return v;
}

// [rows][row_size(type, cols)] bytes: random_weight_row's rows, one after the other.
inline std::vector<uint8_t> random_matrix(GgmlType type, int64_t rows, int64_t cols, std::mt19937& rng) {
    std::vector<uint8_t> m;
    for (int64_t r = 0; r < rows; ++r) {
        const std::vector<uint8_t> row = random_weight_row(type, cols, rng);
        m.insert(m.end(), row.begin(), row.end());
    }
    return m;
}

// n_tok tokens of random_activations, one after the other.
inline std::vector<float> batch_activations(int n_tok, int64_t cols, std::mt19937& rng) {
    std::vector<float> x;
    for (int t = 0; t < n_tok; ++t) {
        const std::vector<float> xt = random_activations(cols, rng);
        x.insert(x.end(), xt.begin(), xt.end());
    }
    return x;
}

// A matrix's bytes as the device holds them in `layout` (the file's rows are `w`).
inline std::vector<uint8_t> device_bytes(GgmlType type, cuda::WeightLayout layout, const std::vector<uint8_t>& w,
                                         int64_t rows, int64_t cols) {
    if (layout == cuda::WeightLayout::Rows) return w;
    std::vector<uint8_t> t(w.size());
    cuda::to_tiles(type, w.data(), t.data(), rows, cols);
    return t;
}

// Every weight type the kernels take (the fp32 GEMV, the GEMM, the embedding).
inline constexpr GgmlType kAllTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0,
                                         GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
                                         GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K,
                                         GgmlType::Q6_K};

// A product's error bound (the fp32 GEMV, the GEMM, the dp4a GEMV; each file's table gives its
// values and why): |gpu - ref| <= rel * sum_i |w_i x_i| + abs. With the SwiGLU epilogue silu(g) * u
// both factors carry it, g's through silu's slope (at most swiglu_slope), plus abs.
struct ProductBound {
    double rel, abs;
    double swiglu_slope;
};

// Two row widths per type (variant 0, 1): 256 and 768 columns for the k-quants (one and three
// blocks), 96 and 544 for the others.
inline int64_t cols_for(GgmlType t, int variant) {
    const bool k = type_traits(t).block_size == 256;
    if (k) return variant == 0 ? 256 : 768;
    return variant == 0 ? 96 : 544;  // 3 and 17 blocks: not a multiple of the warp's 32 chunks
}

// An RMSNorm case (the norm's tests, with and without quantization): x [rows][n] normal with sd 3,
// the weights w [n], and rmsnorm_ref's output ref [rows][n] (eps 1e-6).
struct NormCase {
    std::vector<float> x, w, ref;
};
inline NormCase rmsnorm_case(int64_t n, int rows, std::mt19937& rng) {
    NormCase c;
    c.x = randn(static_cast<size_t>(n) * rows, rng, 3.0f);
    c.w = randn(static_cast<size_t>(n), rng);
    c.ref.resize(c.x.size());
    cuda::rmsnorm_ref(c.x.data(), c.w.data(), c.ref.data(), rows, n, 1e-6f);
    return c;
}

// The buffers a Q/K/V post points at (host or device): the projections, the optional biases and
// Q/K norms (used when `bias` / `qk_norm`), the rotation frequencies, the caches and their scales
// (INT8 only).
struct PostBufs {
    float *q, *k, *v;
    const float *bq, *bk, *bv, *qn, *kn, *inv;
    void *kc, *vc;
    Half *ks, *vs;
};
inline void point_post(cuda::QkvPostParams& p, const PostBufs& b, bool bias, bool qk_norm) {
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

}  // namespace jllm::test
