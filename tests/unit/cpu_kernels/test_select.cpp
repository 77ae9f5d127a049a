// tests/unit/cpu_kernels/test_select.cpp — the host's top-k selection (backend/cpu/select.h: the CPU
// backend's forward_select and the CUDA top-k kernel's twin) against a full sort, ties, NaN,
// masks; the CPU backend's forward_select against its own forward() logits; and its KV export and
// import in the canonical layout.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/select.h"
#include "core/error.h"
#include "gguf/gguf.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "synth/synth_model.h"
#include "test_paths.h"
#include "tiny_qwen3.h"

using namespace jllm;
using jllm::test::tiny_qwen3;
using jllm::test::TinyQwen3;

namespace {

// The oracle: every index sorted by (value desc, index asc), NaN and masked-out as -inf.
void sorted_reference(const std::vector<float>& x, int k, const std::vector<uint32_t>* mask,
                      std::vector<int32_t>& ids, std::vector<float>& vals) {
    std::vector<int32_t> idx(x.size());
    std::iota(idx.begin(), idx.end(), 0);
    auto val = [&](int32_t i) {
        const bool off = mask != nullptr && (((*mask)[static_cast<size_t>(i) / 32] >> (i % 32)) & 1u) == 0;
        return std::isnan(x[static_cast<size_t>(i)]) || off ? -INFINITY : x[static_cast<size_t>(i)];
    };
    std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return val(a) > val(b); });
    ids.assign(idx.begin(), idx.begin() + k);
    vals.clear();
    for (int32_t i : ids) vals.push_back(val(i));
}

void expect_selects(const std::vector<float>& x, int k, const std::vector<uint32_t>* mask) {
    std::vector<int32_t> ids(static_cast<size_t>(k)), ref_ids;
    std::vector<float> vals(static_cast<size_t>(k)), ref_vals;
    select_top_k(x.data(), static_cast<int64_t>(x.size()), k, mask ? mask->data() : nullptr, ids.data(), vals.data());
    sorted_reference(x, k, mask, ref_ids, ref_vals);
    EXPECT_EQ(ids, ref_ids) << "n " << x.size() << " k " << k;
    EXPECT_EQ(vals, ref_vals) << "n " << x.size() << " k " << k;
}

}  // namespace

TEST(SelectTopK, MatchesAFullSort) {
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.0f, 3.0f);
    for (int64_t n : {1, 7, 128, 1000, 151936}) {
        std::vector<float> x(static_cast<size_t>(n));
        for (float& v : x) v = nd(rng);
        for (int k : {1, 2, 40, 105, 128}) {
            if (k <= n) expect_selects(x, k, nullptr);
        }
    }
}

TEST(SelectTopK, TiesNanInfinitiesAndSignedZeros) {
    std::vector<float> x = {1.0f, NAN, 3.0f, 3.0f, -INFINITY, 0.0f, -0.0f, 3.0f, INFINITY, NAN, 2.0f, 0.0f};
    for (int k = 1; k <= static_cast<int>(x.size()); ++k) expect_selects(x, k, nullptr);
    std::vector<float> equal(300, 0.5f);
    expect_selects(equal, 128, nullptr);
    std::vector<float> all_nan(50, NAN);
    expect_selects(all_nan, 10, nullptr);
}

TEST(SelectTopK, MaskedTokensCountAsMinusInfinity) {
    std::mt19937 rng(9);
    std::normal_distribution<float> nd;
    const int64_t n = 5000;
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = nd(rng);
    std::vector<uint32_t> mask(static_cast<size_t>((n + 31) / 32), 0u);
    for (int64_t i = 0; i < n; i += 37) mask[static_cast<size_t>(i / 32)] |= 1u << (i % 32);
    for (int k : {1, 40, 128, 200}) expect_selects(x, k, &mask);  // 136 allowed: the rest -inf
    std::vector<uint32_t> none(mask.size(), 0u);
    expect_selects(x, 5, &none);
}

// forward_select on the CPU backend: the k best of the logits forward() gives for the same step,
// and the same KV afterwards.
TEST(CpuForwardSelect, SameAsForwardThenSelect) {
    const TinyQwen3 m = tiny_qwen3("select_tiny_qwen3_q8_0.gguf", 3);
    const ModelConfig& c = m.c;
    const ModelWeights& w = m.w;
    const size_t V = static_cast<size_t>(c.n_vocab);
    auto a = create_cpu_backend(c, CpuOptions{2});
    auto b = create_cpu_backend(c, CpuOptions{2});
    for (auto* be : {a.get(), b.get()}) {
        be->bind_weights(w, WeightPlacement::Auto);
        be->allocate(64, 16, KvType::Int8);
    }
    const std::vector<int32_t> prompt = {1, 17, 300, 4242, 9};
    std::vector<float> logits(V);
    a->forward(prompt.data(), 5, 0, LogitsMode::Last, logits.data());
    b->forward(prompt.data(), 5, 0, LogitsMode::Last, logits.data());
    std::vector<uint32_t> mask((V + 31) / 32, 0x55555555u);  // even ids only
    int32_t token = 77;
    for (int pos = 5; pos < 12; ++pos) {
        for (const uint32_t* allowed : {static_cast<const uint32_t*>(nullptr), static_cast<const uint32_t*>(mask.data())}) {
            const int k = pos % 2 == 0 ? 1 : 40;
            std::vector<int32_t> ids(static_cast<size_t>(k)), ref_ids(static_cast<size_t>(k));
            std::vector<float> vals(static_cast<size_t>(k)), ref_vals(static_cast<size_t>(k));
            // Both backends run the same step (the second position of a pair repeats the first's).
            ASSERT_TRUE(a->forward_select(token, pos, TokenSelection{k, allowed}, ids.data(), vals.data()));
            b->forward(&token, 1, pos, LogitsMode::Last, logits.data());
            select_top_k(logits.data(), static_cast<int64_t>(V), k, allowed, ref_ids.data(), ref_vals.data());
            EXPECT_EQ(ids, ref_ids) << "pos " << pos;
            EXPECT_EQ(vals, ref_vals) << "pos " << pos;
            if (allowed != nullptr) {
                EXPECT_EQ(ids[0] % 2, 0);
            }
        }
        token = (token * 31 + 7) % static_cast<int32_t>(V);
    }
    TokenSelection too_many{SELECT_MAX_K + 1, nullptr};
    std::vector<int32_t> ids(SELECT_MAX_K + 1);
    std::vector<float> vals(SELECT_MAX_K + 1);
    EXPECT_FALSE(a->forward_select(token, 12, too_many, ids.data(), vals.data()));
    KvBlob ka, kb;
    a->read_kv(0, 12, ka);
    b->read_kv(0, 12, kb);
    EXPECT_EQ(ka.bytes, kb.bytes);
}

// forward_select_last with a mask of few blocks (a restricted draft vocabulary): the output layer
// runs only for the mask's non-zero words, and the selection, the KV and a mask mask_fn hands over
// are those of forward() over every row, for one token and for a batch.
TEST(CpuForwardSelect, LastOfABatchWithAMaskOfFewBlocks) {
    const TinyQwen3 m = tiny_qwen3("select_tiny_qwen3_q8_0.gguf", 3);
    const ModelConfig& c = m.c;
    const size_t V = static_cast<size_t>(c.n_vocab);
    auto a = create_cpu_backend(c, CpuOptions{2});
    auto b = create_cpu_backend(c, CpuOptions{2});
    for (auto* be : {a.get(), b.get()}) {
        be->bind_weights(m.w, WeightPlacement::Auto);
        be->allocate(64, 16, KvType::Int8);
    }
    // Ids below 96, two scattered ids and the last one: blocks 0-2, two more and the last.
    std::vector<uint32_t> mask((V + 31) / 32, 0u);
    for (size_t id : {size_t{0}, size_t{5}, size_t{40}, size_t{95}, size_t{1000}, V / 2 + 3, V - 1}) {
        mask[id / 32] |= 1u << (id % 32);
    }
    for (size_t id = 0; id < 96; ++id) mask[id / 32] |= 1u << (id % 32);
    struct Ctx {
        const uint32_t* mask;
        int calls = 0;
    } ctx{mask.data()};
    TokenSelection by_fn{5};
    by_fn.mask_fn = [](void* p) -> const uint32_t* {
        auto* x = static_cast<Ctx*>(p);
        x->calls++;
        return x->mask;
    };
    by_fn.mask_ctx = &ctx;
    std::vector<float> logits(V);
    std::vector<int32_t> batch = {1, 17, 300, 4242, 9};
    int pos = 0;
    for (int round = 0; round < 4; ++round) {
        const int n = round == 0 ? 5 : (round % 2 == 1 ? 1 : 3);
        const TokenSelection sel = round < 2 ? TokenSelection{1, mask.data()} : by_fn;
        std::vector<int32_t> ids(static_cast<size_t>(sel.k)), ref_ids(ids.size());
        std::vector<float> vals(ids.size()), ref_vals(ids.size());
        const int calls = ctx.calls;
        ASSERT_TRUE(a->forward_select_last(batch.data(), n, pos, sel, ids.data(), vals.data()));
        if (sel.mask_fn != nullptr) {
            EXPECT_EQ(ctx.calls, calls + 1) << "the mask is asked for once a step";
        }
        std::fill(logits.begin(), logits.end(), 0.0f);
        b->forward(batch.data(), n, pos, LogitsMode::Last, logits.data());
        select_top_k(logits.data(), static_cast<int64_t>(V), sel.k, mask.data(), ref_ids.data(), ref_vals.data());
        EXPECT_EQ(ids, ref_ids) << "round " << round;
        EXPECT_EQ(vals, ref_vals) << "round " << round;
        pos += n;
        for (int i = 0; i < 3; ++i) batch[static_cast<size_t>(i)] = ids[0] + i;
    }
    // A plain forward afterwards computes every row again.
    std::vector<float> la(V), lb(V);
    const int32_t t = 123;
    a->forward(&t, 1, pos, LogitsMode::Last, la.data());
    b->forward(&t, 1, pos, LogitsMode::Last, lb.data());
    EXPECT_EQ(la, lb);
    KvBlob ka, kb;
    a->read_kv(0, pos + 1, ka);
    b->read_kv(0, pos + 1, kb);
    EXPECT_EQ(ka.bytes, kb.bytes);
}

// read_kv / write_kv: a cache restored into a fresh backend continues exactly as the original (the
// same logits bit for bit), for INT8 and FP16; blobs that do not fit are refused with a message.
TEST(CpuKvBlob, RestoredCacheContinuesBitIdentical) {
    const TinyQwen3 m = tiny_qwen3("kvblob_tiny_qwen3_q8_0.gguf", 4);
    const size_t V = static_cast<size_t>(m.c.n_vocab);
    for (KvType kv : {KvType::Int8, KvType::Fp16}) {
        auto a = create_cpu_backend(m.c, CpuOptions{2});
        auto b = create_cpu_backend(m.c, CpuOptions{2});
        for (auto* be : {a.get(), b.get()}) {
            be->bind_weights(m.w, WeightPlacement::Auto);
            be->allocate(32, 8, kv);
        }
        const std::vector<int32_t> prompt = {2, 40, 900, 31, 7, 11};
        std::vector<float> la(V), lb(V);
        a->forward(prompt.data(), 6, 0, LogitsMode::Last, la.data());
        KvBlob blob;
        a->read_kv(0, 6, blob);
        EXPECT_EQ(static_cast<int64_t>(blob.bytes.size()), Backend::kv_bytes_for(m.c, 6, kv));
        b->write_kv(0, blob);
        for (int pos = 6; pos < 10; ++pos) {
            const int32_t t = 100 + pos;
            a->forward(&t, 1, pos, LogitsMode::Last, la.data());
            b->forward(&t, 1, pos, LogitsMode::Last, lb.data());
            EXPECT_EQ(la, lb) << "pos " << pos;
        }
        KvBlob wrong_type = blob;
        wrong_type.type = kv == KvType::Int8 ? KvType::Fp16 : KvType::Int8;
        EXPECT_THROW(b->write_kv(0, wrong_type), JllmError);
        EXPECT_THROW(b->write_kv(30, blob), JllmError);  // 30 + 6 > 32 positions
        KvBlob short_blob = blob;
        short_blob.bytes.pop_back();
        EXPECT_THROW(b->write_kv(0, short_blob), JllmError);
    }
}
