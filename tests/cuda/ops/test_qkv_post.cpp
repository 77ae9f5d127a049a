// tests/cuda/ops/test_qkv_post.cpp — the Q/K/V post (biases, Q/K-norm, RoPE normal and neox, full
// and partial rotary) and its store into the INT8 or FP16 KV cache against qkv_post_ref: outputs,
// cache values and scales, and no cache position outside the batch's written.
#include <gtest/gtest.h>

#if JLLM_CUDA

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/rope.h"
#include "backend/kv_quant.h"
#include "model/model_config.h"
#include "op_test_util.h"

namespace jllm::test {
namespace {

// ---- error bounds (every tolerance of this file's tests)
// Q/K/V after the post (bias, Q/K-norm, RoPE): 2e-5 relative to the head's max |x|, plus 1e-6.
constexpr double POST_REL = 2e-5;
constexpr double POST_ABS = 1e-6;
// INT8 KV: fp16 scales within 1 ulp and values within 1 step, fewer than 1% off by one (rounding
// ties move with the last bit of the input): at most written / KV_INT8_ONE_OFF_IN + 1.
constexpr int KV_SCALE_ULPS = 1;
constexpr int KV_INT8_STEPS = 1;
constexpr int KV_INT8_ONE_OFF_IN = 100;
// FP16 KV: within 1 fp16 ulp, 2^-10 relative, or the smallest subnormal step near 0.
constexpr int KV_FP16_ULP_EXP = -10;
constexpr float KV_FP16_ULP_MIN = 6e-8f;

struct PostCase {
    KvType kv;
    bool neox, bias, qk_norm;
    int head_dim, n_rot, n_head, n_head_kv, n_tok, pos0;
};

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
    // INT8 caches of power-of-two heads store the keys Hadamard rotated (the engine's choice).
    p.k_rot_scale = kv_k_rotated(c.kv, hd) ? kv_rotation_scale(hd) : 0.0f;

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
                ASSERT_NEAR(got[h0 + i], ref[h0 + i], POST_REL * amax + POST_ABS) << what << "[" << h0 + i << "]";
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
                ASSERT_LE(std::abs(a - b), KV_INT8_STEPS) << what << "[" << i << "]";
                off_by_one += a != b;
            }
            EXPECT_LE(off_by_one, written / KV_INT8_ONE_OFF_IN + 1) << what;
            for (size_t i = 0; i < rs.size(); ++i) {
                if (rs[i].bits == 0xFFFF) {
                    ASSERT_EQ(gs[i].bits, 0xFFFF) << what << " scale written outside the batch at " << i;
                    continue;
                }
                ASSERT_LE(std::abs(static_cast<int>(gs[i].bits) - static_cast<int>(rs[i].bits)), KV_SCALE_ULPS)
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
                ASSERT_LE(std::fabs(gf - rf), std::ldexp(std::fabs(rf), KV_FP16_ULP_EXP) + KV_FP16_ULP_MIN)
                    << what << "[" << i << "]";
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

}  // namespace
}  // namespace jllm::test

#endif  // JLLM_CUDA
