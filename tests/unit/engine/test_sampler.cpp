// tests/unit/engine/test_sampler.cpp — sampler behaviour on hand-worked small vocabularies.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "engine/sampler.h"

using namespace jllm;

namespace {
SamplingParams greedy() {
    SamplingParams p;
    p.temperature = 0.0f;
    p.repeat_penalty = 1.0f;
    return p;
}
}  // namespace

TEST(Sampler, GreedyPicksArgmax) {
    Sampler s(5, greedy());
    std::vector<float> l = {0.1f, 2.0f, -1.0f, 1.9f, 0.0f};
    EXPECT_EQ(s.sample(l.data(), {}), 1);
}

TEST(Sampler, LogitBiasChangesArgmax) {
    SamplingParams p = greedy();
    p.logit_bias = {{3, 0.5f}, {1, -100.0f}};
    Sampler s(5, p);
    std::vector<float> l = {0.1f, 2.0f, -1.0f, 1.9f, 0.0f};
    EXPECT_EQ(s.sample(l.data(), {}), 3);
}

TEST(Sampler, RepeatPenaltyDividesPositiveMultipliesNegative) {
    SamplingParams p = greedy();
    p.repeat_penalty = 2.0f;
    p.repeat_last_n = 2;
    Sampler s(4, p);
    std::vector<float> l = {3.0f, 2.0f, -1.0f, 1.0f};
    // window = last 2 of history {0, 0, 2}: tokens 0 and 2
    EXPECT_EQ(s.sample(l.data(), {0, 0, 2}), 1);  // 3/2 = 1.5 < 2.0
    EXPECT_FLOAT_EQ(l[0], 1.5f);
    EXPECT_FLOAT_EQ(l[2], -2.0f);
    EXPECT_FLOAT_EQ(l[1], 2.0f);
}

TEST(Sampler, PresenceAndFrequencyPenalties) {
    SamplingParams p = greedy();
    p.presence_penalty = 0.5f;
    p.frequency_penalty = 0.25f;
    p.repeat_last_n = -1;
    Sampler s(3, p);
    std::vector<float> l = {1.0f, 1.0f, 1.0f};
    s.sample(l.data(), {0, 0, 0, 1});
    EXPECT_FLOAT_EQ(l[0], 1.0f - 0.5f - 3 * 0.25f);
    EXPECT_FLOAT_EQ(l[1], 1.0f - 0.5f - 1 * 0.25f);
    EXPECT_FLOAT_EQ(l[2], 1.0f);
    // counts are reset between calls
    std::vector<float> l2 = {1.0f, 1.0f, 1.0f};
    s.sample(l2.data(), {2});
    EXPECT_FLOAT_EQ(l2[0], 1.0f);
    EXPECT_FLOAT_EQ(l2[2], 0.25f);
}

TEST(Sampler, TopKOneIsGreedy) {
    SamplingParams p;
    p.temperature = 1.0f;
    p.top_k = 1;
    p.top_p = 1.0f;
    p.repeat_penalty = 1.0f;
    p.seed = 7;
    Sampler s(6, p);
    for (int i = 0; i < 50; ++i) {
        std::vector<float> l = {0.0f, 1.0f, 5.0f, 4.9f, 0.0f, 0.0f};
        EXPECT_EQ(s.sample(l.data(), {}), 2);
    }
}

TEST(Sampler, TopPKeepsSmallestSetAboveP) {
    // probabilities 0.5, 0.3, 0.2 at T=1: top_p 0.6 keeps {0, 1}; token 2 never drawn
    SamplingParams p;
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 0.6f;
    p.repeat_penalty = 1.0f;
    p.seed = 123;
    Sampler s(3, p);
    std::map<int, int> hist;
    for (int i = 0; i < 2000; ++i) {
        std::vector<float> l = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
        hist[s.sample(l.data(), {})]++;
    }
    EXPECT_EQ(hist[2], 0);
    // renormalised 0.625 / 0.375
    EXPECT_NEAR(hist[0] / 2000.0, 0.625, 0.05);
}

TEST(Sampler, MinPDropsUnlikely) {
    SamplingParams p;
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.5f;
    p.repeat_penalty = 1.0f;
    p.seed = 9;
    Sampler s(3, p);
    for (int i = 0; i < 500; ++i) {
        std::vector<float> l = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
        const int32_t id = s.sample(l.data(), {});
        EXPECT_NE(id, 2);  // 0.2 < 0.5 * 0.5
    }
}

TEST(Sampler, SameSeedSameSequence) {
    SamplingParams p;
    p.temperature = 1.5f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.repeat_penalty = 1.0f;
    p.seed = 42;
    Sampler a(50, p), b(50, p);
    std::vector<int32_t> sa, sb;
    for (int i = 0; i < 100; ++i) {
        std::vector<float> la(50), lb(50);
        for (int k = 0; k < 50; ++k) la[k] = lb[k] = std::sin(k * 0.7f + i);
        sa.push_back(a.sample(la.data(), {}));
        sb.push_back(b.sample(lb.data(), {}));
    }
    EXPECT_EQ(sa, sb);
    std::set<int32_t> distinct(sa.begin(), sa.end());
    EXPECT_GT(distinct.size(), 5u);  // it really samples
}

TEST(Sampler, TemperatureSharpens) {
    SamplingParams p;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.repeat_penalty = 1.0f;
    p.seed = 5;
    auto freq_top = [&](float t) {
        p.temperature = t;
        Sampler s(2, p);
        int n = 0;
        for (int i = 0; i < 3000; ++i) {
            std::vector<float> l = {1.0f, 0.0f};
            n += s.sample(l.data(), {}) == 0;
        }
        return n / 3000.0;
    };
    // P(top) = 1/(1+e^{-1/T}): T=1 -> 0.731, T=0.25 -> 0.982
    EXPECT_NEAR(freq_top(1.0f), 0.731, 0.03);
    EXPECT_NEAR(freq_top(0.25f), 0.982, 0.01);
}

TEST(Sampler, LogprobAndTop) {
    std::vector<float> l = {0.0f, std::log(3.0f), 0.0f};  // probs 0.2, 0.6, 0.2
    std::vector<TokenLogprob> top;
    const float lp = token_logprob(l.data(), 3, 1, 2, &top);
    EXPECT_NEAR(lp, std::log(0.6f), 1e-5);
    ASSERT_EQ(top.size(), 2u);
    EXPECT_EQ(top[0].token, 1);
    EXPECT_NEAR(top[1].logprob, std::log(0.2f), 1e-5);
}

// The GPU's candidate path: sampling from the top (top_k + window) raw logits gives the same
// token as sampling from all of them, for greedy and top-k sampling with penalties, seed for
// seed; parameters it cannot serve exactly are refused.
TEST(Sampler, CandidatesMatchFullSampling) {
    const int32_t V = 5000;
    std::mt19937 rng(77);
    std::normal_distribution<float> nd(0.0f, 3.0f);
    std::uniform_int_distribution<int32_t> tok(0, V - 1);
    struct Case {
        float temp;
        int top_k;
        float top_p, min_p, rep, pres, freq;
        int window;
    };
    const Case cases[] = {{0.0f, 40, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f, 64},  {0.0f, 0, 1.0f, 0.0f, 1.3f, 0.5f, 0.2f, 64},
                          {0.8f, 40, 0.9f, 0.0f, 1.1f, 0.0f, 0.0f, 64},  {1.2f, 20, 1.0f, 0.05f, 1.5f, 1.0f, 0.5f, 32},
                          {0.7f, 1, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f, 0}};
    for (const Case& c : cases) {
        SamplingParams p;
        p.temperature = c.temp;
        p.top_k = c.top_k;
        p.top_p = c.top_p;
        p.min_p = c.min_p;
        p.repeat_penalty = c.rep;
        p.presence_penalty = c.pres;
        p.frequency_penalty = c.freq;
        p.repeat_last_n = c.window;
        p.seed = 1234;
        Sampler full(V, p), cands(V, p);
        int k = 0;
        ASSERT_TRUE(cands.candidates_suffice(128, &k));
        for (int step = 0; step < 200; ++step) {
            std::vector<float> logits(static_cast<size_t>(V));
            for (float& l : logits) l = nd(rng);
            std::vector<int32_t> history;
            for (int i = 0; i < 80; ++i) history.push_back(tok(rng));
            // make penalized tokens compete for the top: give some history tokens the largest logits
            for (int i = 0; i < 10; ++i) logits[static_cast<size_t>(history[static_cast<size_t>(70 + i)])] = 12.0f + i;
            std::vector<int32_t> idx(static_cast<size_t>(V));
            for (int32_t i = 0; i < V; ++i) idx[static_cast<size_t>(i)] = i;
            std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int32_t a, int32_t b) {
                return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)] ||
                       (logits[static_cast<size_t>(a)] == logits[static_cast<size_t>(b)] && a < b);
            });
            std::vector<int32_t> ids(idx.begin(), idx.begin() + k);
            std::vector<float> vals;
            for (int32_t id : ids) vals.push_back(logits[static_cast<size_t>(id)]);
            std::vector<float> lf = logits;
            const int32_t a = full.sample(lf.data(), history);
            const int32_t b = cands.sample_candidates(ids.data(), vals.data(), k, history);
            ASSERT_EQ(a, b) << "step " << step << " temp " << c.temp;
        }
    }
    // Not servable from candidates: full-distribution sampling, bias, raising penalties, an
    // unbounded window, too many candidates.
    SamplingParams p;
    int k = 0;
    p.temperature = 0.8f;
    p.top_k = 0;
    EXPECT_FALSE(Sampler(V, p).candidates_suffice(128, &k));
    p.top_k = 40;
    p.logit_bias = {{3, 1.0f}};
    EXPECT_FALSE(Sampler(V, p).candidates_suffice(128, &k));
    p.logit_bias.clear();
    p.repeat_penalty = 0.9f;
    EXPECT_FALSE(Sampler(V, p).candidates_suffice(128, &k));
    p.repeat_penalty = 1.1f;
    p.repeat_last_n = -1;
    EXPECT_FALSE(Sampler(V, p).candidates_suffice(128, &k));
    p.repeat_last_n = 100;
    EXPECT_FALSE(Sampler(V, p).candidates_suffice(128, &k));
    p.repeat_last_n = 64;
    EXPECT_TRUE(Sampler(V, p).candidates_suffice(128, &k));
    EXPECT_EQ(k, 104);
}
