// tests/cuda/ops/test_sampling.cpp — the GPU samplers' selections: argmax (the first maximum,
// across blocks, NaN never winning) against argmax_ref, top-k (radix selection) against
// topk_ref on ties, NaN, -inf, signed zeros, one-ulp bands and unaligned inputs, and a grammar's
// token mask applied before both against the host's masked selection (select_top_k).
#include <gtest/gtest.h>

#if JLLM_CUDA

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/select.h"
#include "op_test_util.h"

namespace jllm::test {
namespace {

// ---- error bounds
// argmax: exact, the first maximum. Top-k: bit for bit, values and indices (ties to the lower
// index, NaN as -inf). Token mask: exact (-inf where the bit is clear, the value untouched
// elsewhere), and the selections after it equal select_top_k with the same mask.

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

// Masks as grammars make them: one token allowed, a sparse set (a JSON value's start), half the
// vocabulary, all of it; the vocabulary not a multiple of 32 (a partial last word).
TEST(CudaOps, TokenMaskBeforeArgmaxAndTopK) {
    JLLM_REQUIRE_CUDA_DEVICE();
    std::mt19937 rng(77);
    DevBuf<uint8_t> work(cuda::argmax_work_bytes());
    work.poison(0);
    for (int64_t n : {37, 1000, 151936}) {
        for (double density : {0.0, 0.01, 0.5, 1.0}) {
            SCOPED_TRACE(::testing::Message() << "n " << n << " density " << density);
            const size_t words = static_cast<size_t>((n + 31) / 32);
            std::vector<uint32_t> mask(words, 0u);
            std::bernoulli_distribution keep(density);
            for (int64_t i = 0; i < n; ++i) {
                if (keep(rng)) mask[static_cast<size_t>(i >> 5)] |= 1u << (i & 31);
            }
            const int64_t one = n / 2;  // density 0: exactly one allowed token
            if (density == 0.0) mask[static_cast<size_t>(one >> 5)] |= 1u << (one & 31);
            const std::vector<float> x = randn(static_cast<size_t>(n), rng);
            std::vector<float> ref = x;
            cuda::apply_token_mask_ref(ref.data(), n, mask.data());
            DevBuf<float> dx(x);
            DevBuf<uint32_t> dm(mask);
            cuda::launch_apply_token_mask(dx.get(), n, dm.get(), nullptr);
            const std::vector<float> got = dx.download();
            for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[static_cast<size_t>(i)], ref[static_cast<size_t>(i)]) << i;

            const int k = static_cast<int>(std::min<int64_t>(40, n));
            std::vector<float> rv(static_cast<size_t>(k));
            std::vector<int32_t> ri(static_cast<size_t>(k));
            select_top_k(x.data(), n, k, mask.data(), ri.data(), rv.data());  // the host's masked selection
            DevBuf<int32_t> out(1);
            cuda::launch_argmax(dx.get(), n, work.get(), out.get(), nullptr);
            EXPECT_EQ(out.download()[0], ri[0]);
            if (density == 0.0) {
                EXPECT_EQ(ri[0], one);
            }
            DevBuf<float> tw(cuda::topk_work_floats(n, k)), dv(static_cast<size_t>(k));
            DevBuf<int32_t> di(static_cast<size_t>(k));
            cuda::launch_topk(dx.get(), n, k, tw.get(), dv.get(), di.get(), nullptr);
            const std::vector<float> gv = dv.download();
            const std::vector<int32_t> gi = di.download();
            for (int i = 0; i < k; ++i) {
                ASSERT_EQ(gi[static_cast<size_t>(i)], ri[static_cast<size_t>(i)]) << i;
                ASSERT_EQ(gv[static_cast<size_t>(i)], rv[static_cast<size_t>(i)]) << i;
            }
        }
    }
}

}  // namespace
}  // namespace jllm::test

#endif  // JLLM_CUDA
