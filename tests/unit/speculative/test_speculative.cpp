// tests/unit/speculative/test_speculative.cpp — speculative decoding (engine/speculative.h):
// prompt lookup's matches, the tuner's choices, and through the Engine on a synthetic tiny Qwen3
// (CPU): greedy output and the KV cache it leaves identical with --spec off, ngram and draft
// (drafts both accepted and rejected), sampled output identical for a seed in every mode, and
// the tokens of drafted positions distributed as without speculation over 2,000 seeds
// (chi-square), free and under a grammar.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "speculative_engines.h"
#include "backend/backend.h"
#include "backend/backend_registry.h"
#include "backend/cpu/cpu_backend.h"
#include "engine/speculative.h"
#include "gguf/gguf.h"
#include "model/model_config.h"
#include "tokenizer/tokenizer.h"
#include "jllm_engine.h"
#include "test_paths.h"
#include "tiny_qwen3.h"
#include "verification_rows.h"

namespace jllm {
namespace {

// ---- chi-square test of homogeneity ----

// Regularized upper incomplete gamma Q(a, x): the series below a + 1, the continued fraction above.
double gamma_q(double a, double x) {
    if (x <= 0) return 1.0;
    const double lg = std::lgamma(a);
    if (x < a + 1) {
        double sum = 1.0 / a, term = sum;
        for (int n = 1; n < 1000; ++n) {
            term *= x / (a + n);
            sum += term;
            if (std::fabs(term) < std::fabs(sum) * 1e-14) break;
        }
        return 1.0 - sum * std::exp(-x + a * std::log(x) - lg);
    }
    // Lentz's method for the continued fraction of Q.
    double b = x + 1 - a, c = 1e300, d = 1 / b, h = d;
    for (int i = 1; i < 1000; ++i) {
        const double an = -i * (i - a);
        b += 2;
        d = an * d + b;
        if (std::fabs(d) < 1e-300) d = 1e-300;
        c = b + an / c;
        if (std::fabs(c) < 1e-300) c = 1e-300;
        d = 1 / d;
        const double del = d * c;
        h *= del;
        if (std::fabs(del - 1) < 1e-14) break;
    }
    return std::exp(-x + a * std::log(x) - lg) * h;
}

TEST(ChiSquare, KnownQuantiles) {
    // chi2 with 1 df: P(X > 3.841) = 0.05; 10 df: P(X > 23.209) = 0.01.
    EXPECT_NEAR(gamma_q(0.5, 3.841 / 2), 0.05, 1e-3);
    EXPECT_NEAR(gamma_q(5.0, 23.209 / 2), 0.01, 1e-4);
    EXPECT_NEAR(gamma_q(5.0, 1.0), 0.99634, 1e-4);
}

// Two samples of counts over the same outcomes: the p-value that they come from one distribution.
// Outcomes seen fewer than 10 times in both together are pooled into one bin.
double homogeneity_p(const std::map<int32_t, int>& a, const std::map<int32_t, int>& b, int* bins = nullptr) {
    std::map<int32_t, std::pair<double, double>> all;
    for (const auto& [k, n] : a) all[k].first += n;
    for (const auto& [k, n] : b) all[k].second += n;
    double na = 0, nb = 0;
    for (const auto& [k, v] : all) {
        na += v.first;
        nb += v.second;
    }
    std::vector<std::pair<double, double>> cells;
    std::pair<double, double> rest{0, 0};
    for (const auto& [k, v] : all) {
        if (v.first + v.second < 10) {
            rest.first += v.first;
            rest.second += v.second;
        } else {
            cells.push_back(v);
        }
    }
    if (rest.first + rest.second > 0) cells.push_back(rest);
    if (bins) *bins = static_cast<int>(cells.size());
    if (cells.size() < 2) return 1.0;
    double stat = 0;
    const double N = na + nb;
    for (const auto& [x, y] : cells) {
        const double t = x + y;
        const double ea = t * na / N, eb = t * nb / N;
        stat += (x - ea) * (x - ea) / ea + (y - eb) * (y - eb) / eb;
    }
    return gamma_q((cells.size() - 1) / 2.0, stat / 2);
}

// ---- prompt lookup ----

TEST(NgramDraft, LongestMatchWinsThenTheLatest) {
    std::vector<int32_t> out;
    // Suffix "1 2 3": at the start (followed by 4) and later (followed by 5); equal length: latest.
    const std::vector<int32_t> a = {1, 2, 3, 4, 9, 1, 2, 3, 5, 6, 8, 1, 2, 3};
    ASSERT_EQ(ngram_draft(a.data(), a.size(), 3, out), 3);
    EXPECT_EQ(out, (std::vector<int32_t>{5, 6, 8}));
    // "7 1 2 3" matches only the first occurrence, longer: it wins over the later "1 2 3".
    const std::vector<int32_t> b = {7, 1, 2, 3, 4, 9, 1, 2, 3, 5, 7, 1, 2, 3};
    ASSERT_EQ(ngram_draft(b.data(), b.size(), 2, out), 2);
    EXPECT_EQ(out, (std::vector<int32_t>{4, 9}));
}

TEST(NgramDraft, CappedByMaxAndBySequenceEnd) {
    std::vector<int32_t> out;
    const std::vector<int32_t> a = {5, 6, 7, 8, 5, 6};
    EXPECT_EQ(ngram_draft(a.data(), a.size(), 8, out), 4);  // 7 8 5 6: to the end of the sequence
    EXPECT_EQ(out, (std::vector<int32_t>{7, 8, 5, 6}));
    EXPECT_EQ(ngram_draft(a.data(), a.size(), 1, out), 1);
    EXPECT_EQ(out, (std::vector<int32_t>{7}));
    EXPECT_EQ(ngram_draft(a.data(), a.size(), 0, out), 0);
    // A repeated token: overlapping occurrences still propose it.
    const std::vector<int32_t> r = {3, 3, 3};
    EXPECT_EQ(ngram_draft(r.data(), r.size(), 4, out), 1);
    EXPECT_EQ(out, (std::vector<int32_t>{3}));
}

TEST(NgramDraft, OneRecurringTokenIsAMatchOfOne) {
    std::vector<int32_t> out;
    int match = -1;
    const std::vector<int32_t> a = {1, 2, 3, 4, 1};  // only the last token recurs
    EXPECT_EQ(ngram_draft(a.data(), a.size(), 4, out, &match), 4);
    EXPECT_EQ(out, (std::vector<int32_t>{2, 3, 4, 1}));
    EXPECT_EQ(match, 1);
    const std::vector<int32_t> b = {9, 1, 2, 3, 9, 1, 2};  // "9 1 2": three
    EXPECT_EQ(ngram_draft(b.data(), b.size(), 2, out, &match), 2);
    EXPECT_EQ(out, (std::vector<int32_t>{3, 9}));
    EXPECT_EQ(match, 3);
    const std::vector<int32_t> c = {1, 2, 3, 4};  // the last token is new
    EXPECT_EQ(ngram_draft(c.data(), c.size(), 4, out, &match), 0);
    EXPECT_TRUE(out.empty());
    EXPECT_EQ(match, 0);
    EXPECT_EQ(ngram_draft(c.data(), 1, 4, out), 0);
    EXPECT_EQ(ngram_draft(c.data(), 0, 4, out), 0);
}

// ---- tuner ----

// The tuner's drafters in these tests: prompt lookup's longest matches, and the draft model.
constexpr Drafter NG = Drafter::lookup(NGRAM_MAX), DM = Drafter::model();

TEST(SpecTuner, AutoMeasuresAPlainStepFirstAskedDraftsAtOnce) {
    SpecTuner t;
    EXPECT_EQ(t.length(NG, 8, false), 0);
    EXPECT_EQ(t.length(NG, 8, true), 8);
}

TEST(SpecTuner, LongDraftsWhenAcceptedNoneWhenRejected) {
    SpecTuner t;
    t.forward_done(1, 10.0);
    for (int n = 2; n <= 9; ++n) t.forward_done(n, 10.0 + n);  // cheap batches (bandwidth-bound)
    for (int i = 0; i < 20; ++i) t.verified(NG, 8, 8);
    EXPECT_GE(t.length(NG, 8, false), 6);
    EXPECT_GT(t.acceptance(NG), 0.9);
    for (int i = 0; i < 40; ++i) t.verified(NG, 4, 0);
    EXPECT_LT(t.acceptance(NG), 0.1);
    EXPECT_EQ(t.length(NG, 8, false), 0);
    EXPECT_GE(t.length(NG, 8, true), 1);  // asked for: drafts anyway
    // Off, it still probes now and then (acceptance is learned only while drafting).
    int probes = 0;
    for (int i = 0; i < 64; ++i) probes += t.length(NG, 8, false) > 0;
    EXPECT_EQ(probes, 2);
    for (int i = 0; i < 64; ++i) EXPECT_EQ(t.length(NG, 8, false, false), 0) << "no probe allowed";
    // The drafters' acceptance is separate, and carried into the next request at the weight of
    // a few verifications: the request's first one moves it at once (uncapped, the 40 rejections
    // above would hold it near 0.3 after one accepted draft).
    EXPECT_NEAR(t.acceptance(DM), 0.5, 1e-9);
    const double before = t.acceptance(NG);
    t.reset_request();
    EXPECT_NEAR(t.acceptance(NG), before, 1e-9);
    EXPECT_NEAR(t.acceptance(DM), 0.5, 1e-9);
    // A drafter that does not pay is probed at the request's first step, then as before.
    EXPECT_EQ(t.length(NG, 8, false), 2);
    EXPECT_EQ(t.length(NG, 8, false), 0);
    t.verified(NG, 4, 4);
    EXPECT_GT(t.acceptance(NG), 0.45);
}

// Prompt lookup's acceptance is learned per match length: one-token matches that are mostly
// wrong stop drafting (but for the probes) while six-token matches that are right draft long,
// and the rate auto compares is each one's own.
TEST(SpecTuner, MatchLengthsLearnTheirOwnAcceptance) {
    SpecTuner t;
    t.forward_done(1, 10.0);
    for (int n = 2; n <= 9; ++n) t.forward_done(n, 12.0 + n);  // 1.4 steps for 2, then +0.1 a token
    const Drafter one = Drafter::lookup(1), six = Drafter::lookup(6);
    for (int i = 0; i < 30; ++i) {
        t.verified(one, 2, 0);
        t.verified(six, 8, 8);
    }
    EXPECT_LT(t.acceptance(one), 0.1);
    EXPECT_GT(t.acceptance(six), 0.9);
    EXPECT_NEAR(t.acceptance(Drafter::lookup(3)), 0.5, 1e-9);  // untouched
    EXPECT_EQ(t.length(one, 8, false, false), 0);
    EXPECT_GE(t.length(six, 8, false), 6);
    EXPECT_EQ(t.length(one, 8, true), 1);  // asked for (--spec ngram): the shortest
    EXPECT_LT(t.rate(one, 1), 1.0);
    EXPECT_GT(t.rate(six, 6), 3.0);
    // Out-of-range lengths are the nearest class.
    EXPECT_EQ(Drafter::lookup(0).index(), Drafter::lookup(NGRAM_MIN).index());
    EXPECT_EQ(Drafter::lookup(NGRAM_MAX + 5).index(), six.index());
    EXPECT_NE(Drafter::model().index(), Drafter::lookup(NGRAM_MIN).index());
}

// What auto compares: the expected tokens per step of each drafter's draft. A drafter that is
// mostly right beats one that is mostly wrong at the same length; no draft, or nothing measured
// yet, is one token a step.
TEST(SpecTuner, RateOrdersTheDrafters) {
    SpecTuner t;
    EXPECT_EQ(t.rate(NG, 3), 1.0);  // nothing measured
    t.forward_done(1, 10.0);
    for (int n = 2; n <= 9; ++n) t.forward_done(n, 10.0 + n);
    for (int i = 0; i < 20; ++i) {
        t.verified(NG, 4, 0);
        t.verified(DM, 4, 4);
    }
    t.draft_step_done(1.0);  // a draft-model token: 0.1 of a step
    EXPECT_EQ(t.rate(DM, 0), 1.0);
    EXPECT_GT(t.rate(DM, 4), 2.5);
    EXPECT_LT(t.rate(NG, 4), 1.0);
    EXPECT_GT(t.rate(DM, 4), t.rate(NG, 4));
    // The draft model's steps count: at a whole step a token it no longer pays.
    for (int i = 0; i < 40; ++i) t.draft_step_done(10.0);
    EXPECT_LT(t.rate(DM, 4), 1.0);
}

TEST(SpecTuner, DraftModelPaysOnlyWhenItsStepsAreCheap) {
    SpecTuner t;
    t.forward_done(1, 10.0);
    for (int n = 2; n <= 9; ++n) t.forward_done(n, 11.0);
    for (int i = 0; i < 20; ++i) t.verified(DM, 4, 2);  // a ~ 2/3
    t.draft_step_done(6.0);  // a draft token costs 0.6 of a model step: never pays
    EXPECT_EQ(t.length(DM, 8, false), 0);
    for (int i = 0; i < 40; ++i) t.draft_step_done(0.5);  // 0.05 of a step: pays
    EXPECT_GE(t.length(DM, 8, false), 2);
}

// A compute-bound machine (each token adds a third of a step): with T(2) and T(9) measured, the
// lengths between cost the line through them, not T(2) — so a 2/3 acceptance drafts one token
// (as the largest measured below, T(4) = T(2) would have made four look best).
TEST(SpecTuner, UnmeasuredLengthsBetweenMeasuredOnesCostTheLineThroughThem) {
    SpecTuner t;
    t.forward_done(1, 10.0);
    t.forward_done(2, 13.0);
    t.forward_done(9, 46.0);
    for (int i = 0; i < 40; ++i) t.verified(NG, 4, 2);  // a -> 2/3
    EXPECT_NEAR(t.acceptance(NG), 2.0 / 3.0, 0.02);
    EXPECT_EQ(t.length(NG, 8, true), 1);
    // Measured cheap after all (a gemm path from 3 tokens, say): longer drafts again.
    for (int i = 0; i < 20; ++i) t.forward_done(3, 13.5);
    EXPECT_GE(t.length(NG, 8, true), 2);
}

// `--spec draft` never takes a plain step, so T(1) is never measured: the length still follows
// the acceptance and the measured forwards (the real pair on an AVX2 host: a draft token 0.58 of
// a step, T(9) = 4.6 steps, 62% accepted: one token a draft, not the maximum).
TEST(SpecTuner, AskedDraftsAdaptWithoutAPlainStep) {
    SpecTuner t;
    EXPECT_EQ(t.length(DM, 8, true), 8);  // nothing measured yet
    t.forward_done(9, 242.0);
    t.draft_step_done(30.8);
    for (int i = 0; i < 40; ++i) t.verified(DM, 8, 5);  // a -> 5/6 per token, 62% drafted
    for (int i = 0; i < 40; ++i) t.verified(DM, 2, 0);
    EXPECT_LT(t.acceptance(DM), 0.7);
    EXPECT_EQ(t.length(DM, 8, true), 1);
    t.forward_done(2, 61.5);
    EXPECT_EQ(t.length(DM, 8, true), 1);
    // Everything accepted and a cheap draft: long drafts again.
    for (int i = 0; i < 80; ++i) t.verified(DM, 8, 8);
    for (int i = 0; i < 40; ++i) t.draft_step_done(2.0);
    EXPECT_GE(t.length(DM, 8, true), 6);
}

TEST(SpecTuner, UnmeasuredDraftCostsItsPrior) {
    SpecTuner t;
    t.forward_done(1, 10.0);
    for (int n = 2; n <= 9; ++n) t.forward_done(n, 14.0);
    t.set_draft_prior(0.45);  // a 0.5B draft for a 1.5B model: not worth trying at a ~ 1/2
    EXPECT_EQ(t.length(DM, 8, false), 0);
    t.set_draft_prior(0.02);  // a tiny draft: tried
    EXPECT_GE(t.length(DM, 8, false), 1);
}

// ---- through the Engine ----

std::string tiny_model() { return test::spec_model(); }
std::string other_tiny_model() { return test::spec_other_model(); }

std::unique_ptr<Engine> load(SpecMode spec, const std::string& draft, int draft_max = 8, int draft_vocab = -1,
                             float draft_p_min = 0.0f) {
    return test::spec_engine(DeviceKind::Cpu, spec, draft, draft_max, draft_vocab, draft_p_min);
}

std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

struct GenRun {
    std::vector<int32_t> tokens;  // the resident sequence after the generation
    std::string text, kv;         // the output; the sequence's KV as a snapshot file
    GenerateStats st;
};

GenRun greedy(Engine& e, const std::string& prompt, int n, float repeat_penalty) {
    GenerateRequest r;
    r.prompt = prompt;
    r.sampling.temperature = 0;
    r.sampling.repeat_penalty = repeat_penalty;
    r.max_tokens = n;
    const GenerateResult res = e.generate(r, nullptr);
    EXPECT_NE(res.finish, FinishReason::Error) << res.error;
    GenRun out;
    out.tokens = e.resident_tokens();
    out.text = res.text;
    out.st = res.stats;
    // A file per test: ctest runs the tests in parallel processes.
    const std::string path = std::string(JLLM_BINARY_DIR) + "/spec_kv_" +
                             testing::UnitTest::GetInstance()->current_test_info()->name() + ".bin";
    EXPECT_TRUE(e.save_sequence(path, nullptr, nullptr).ok);
    out.kv = read_file(path);
    std::remove(path.c_str());
    return out;
}

// A CPU backend over a draft model's weights (256 positions): the reference of its drafts.
std::unique_ptr<Backend> reference_backend(const DraftModel& d) {
    BackendOptions bo;
    bo.cpu.n_threads = 2;
    auto ref = create_backend(DeviceKind::Cpu, d.config(), bo);
    ref->bind_weights(d.weights(), WeightPlacement::Auto);
    ref->allocate(256, 64, KvType::Int8);
    return ref;
}

// A restricted draft vocabulary: each draft is the greedy continuation over the allowed tokens
// (ids below the bound, the special tokens, the sequence's own), the masked argmax of every
// logit; a sequence that does not extend the last one drops the last one's tokens.
TEST(DraftModelVocabulary, DraftsTheBestAllowedToken) {
    const std::string path = tiny_model();
    const std::unique_ptr<GgufFile> file = GgufFile::open(path);
    const std::unique_ptr<Tokenizer> tok = Tokenizer::from_gguf(*file);
    const int32_t V = tok->n_vocab();
    DraftModel narrow(path, DeviceKind::Cpu, 2, WeightPlacement::Auto, *tok, 1024);
    DraftModel whole(path, DeviceKind::Cpu, 2, WeightPlacement::Auto, *tok, 0);
    narrow.allocate(256, KvType::Int8);
    EXPECT_EQ(whole.base_tokens(), V);
    EXPECT_EQ(whole.output_fraction(), 1.0);
    int specials = 0;
    for (int32_t id = 1024; id < V; ++id) specials += tok->token_type(id) != TokenType::NORMAL;
    EXPECT_GT(specials, 0);
    EXPECT_EQ(narrow.base_tokens(), 1024 + specials);
    EXPECT_LT(narrow.output_fraction(), 0.02);
    auto ref = reference_backend(whole);
    std::vector<float> logits(static_cast<size_t>(V));
    // The masked greedy chain of `n` tokens after seq on the reference backend.
    auto chain = [&](const std::vector<int32_t>& seq, int n, bool masked) {
        auto ok = [&](int32_t id) {
            return !masked || id < 1024 || tok->token_type(id) != TokenType::NORMAL ||
                   std::find(seq.begin(), seq.end(), id) != seq.end();
        };
        auto best = [&]() {
            int32_t b = -1;
            for (int32_t id = 0; id < V; ++id) {
                if (ok(id) && (b < 0 || logits[static_cast<size_t>(id)] > logits[static_cast<size_t>(b)])) b = id;
            }
            return b;
        };
        ref->truncate_kv(0);
        ref->forward(seq.data(), static_cast<int>(seq.size()), 0, LogitsMode::Last, logits.data());
        std::vector<int32_t> out = {best()};
        while (static_cast<int>(out.size()) < n) {
            ref->forward(&out.back(), 1, static_cast<int>(seq.size() + out.size() - 1), LogitsMode::Last, logits.data());
            out.push_back(best());
        }
        return out;
    };
    const std::vector<int32_t> a = {100, 2000, 151000, 70000, 5, 99999, 151000};
    const std::vector<int32_t> b = {7, 8, 9, 1500, 300};
    // Seed the first sequence with the whole vocabulary's first choice after the second one, so
    // a mask that kept the first sequence's tokens would draft it.
    const int32_t lure = chain(b, 1, false)[0];
    std::vector<int32_t> a_lured = a;
    a_lured.push_back(lure);
    const std::vector<int32_t>* seqs[] = {&a, &a_lured, &b};
    for (const std::vector<int32_t>* seq : seqs) {
        std::vector<int32_t> out;
        double prefill_ms = 0, step_ms = 0;
        ASSERT_EQ(narrow.draft(*seq, 6, 0.0f, out, &prefill_ms, &step_ms), 6);
        EXPECT_EQ(out, chain(*seq, 6, true));
        // The draft continued after two of its tokens were accepted: its own catch-up (one
        // token, the cache held the rest), part of drafting.
        std::vector<int32_t> longer = *seq;
        longer.insert(longer.end(), out.begin(), out.begin() + 2);
        ASSERT_EQ(narrow.draft(longer, 4, 0.0f, out, &prefill_ms, &step_ms), 4);
        EXPECT_EQ(out, chain(longer, 4, true));
        EXPECT_EQ(prefill_ms, 0.0);
        EXPECT_GT(step_ms, 0.0);
        // Its first token accepted, then three generated without it: a catch-up of three, not
        // drafting's cost.
        longer.insert(longer.end(), {out[0], 11, 12, 13});
        ASSERT_EQ(narrow.draft(longer, 2, 0.0f, out, &prefill_ms, &step_ms), 2);
        EXPECT_EQ(out, chain(longer, 2, true));
        EXPECT_GT(prefill_ms, 0.0);
    }
    if (lure < 1024 || tok->token_type(lure) != TokenType::NORMAL) {
        std::printf("[draft vocabulary] the lure %d is in the base vocabulary: that check is vacuous\n", lure);
    }
}

// The confidence floor: a draft ends before the first token after its first whose probability
// among the draft model's DRAFT_CONF_K best allowed logits is below p_min (computed here from the
// reference's whole rows of logits); 0 drafts the whole length, a floor above every token one.
TEST(DraftModelConfidence, DraftEndsBeforeTheFirstUnsureToken) {
    const std::string path = tiny_model();
    const std::unique_ptr<GgufFile> file = GgufFile::open(path);
    const std::unique_ptr<Tokenizer> tok = Tokenizer::from_gguf(*file);
    const int32_t V = tok->n_vocab();
    const std::vector<std::vector<int32_t>> seqs = {{100, 2000, 151000, 70000, 5, 99999, 151000, 7, 8, 9},
                                                    {7, 8, 9, 1500, 300},
                                                    {42, 42, 42, 42},
                                                    {3000, 1, 4, 1, 5, 9, 2, 6}};
    int cut = 0;  // floors tested that end a draft after some of its tokens
    for (const int vocab : {0, 1024}) {
        DraftModel d(path, DeviceKind::Cpu, 2, WeightPlacement::Auto, *tok, vocab);
        d.allocate(256, KvType::Int8);
        auto ref = reference_backend(d);
        std::vector<float> logits(static_cast<size_t>(V));
        for (const std::vector<int32_t>& seq : seqs) {
            auto ok = [&](int32_t id) {
                return vocab == 0 || id < vocab || tok->token_type(id) != TokenType::NORMAL ||
                       std::find(seq.begin(), seq.end(), id) != seq.end();
            };
            // The greedy chain of 8 tokens after seq and each token's confidence.
            std::vector<int32_t> chain;
            std::vector<double> conf;
            ref->truncate_kv(0);
            ref->forward(seq.data(), static_cast<int>(seq.size()), 0, LogitsMode::Last, logits.data());
            while (true) {
                std::vector<std::pair<float, int32_t>> best;  // (logit, -id): ties to the lower id
                for (int32_t id = 0; id < V; ++id) {
                    if (ok(id)) best.emplace_back(logits[static_cast<size_t>(id)], -id);
                }
                std::partial_sort(best.begin(), best.begin() + DRAFT_CONF_K, best.end(), std::greater<>());
                double z = 0;
                for (int i = 0; i < DRAFT_CONF_K; ++i) z += std::exp(static_cast<double>(best[i].first) - best[0].first);
                chain.push_back(-best[0].second);
                conf.push_back(1.0 / z);
                if (chain.size() == 8) break;
                ref->forward(&chain.back(), 1, static_cast<int>(seq.size() + chain.size() - 1), LogitsMode::Last,
                             logits.data());
            }
            std::vector<int32_t> out;
            double prefill_ms = 0, step_ms = 0;
            d.clear();
            ASSERT_EQ(d.draft(seq, 8, 0.0f, out, &prefill_ms, &step_ms), 8);
            EXPECT_EQ(out, chain);
            // A floor between token n's confidence and the lowest of tokens 1 .. n - 1: n tokens
            // drafted (token 0 whatever its confidence).
            double lowest = 2;
            for (size_t n = 1; n < chain.size(); lowest = std::min(lowest, conf[n]), ++n) {
                if (lowest - conf[n] < 1e-4) continue;  // not below every earlier one (or too close to part)
                const auto p_min = static_cast<float>((std::min(lowest, 1.0) + conf[n]) / 2);
                d.clear();
                ASSERT_EQ(d.draft(seq, 8, p_min, out, &prefill_ms, &step_ms), static_cast<int>(n)) << "p_min " << p_min;
                EXPECT_EQ(out, std::vector<int32_t>(chain.begin(), chain.begin() + static_cast<long>(n)));
                cut += n > 1;
            }
            d.clear();
            EXPECT_EQ(d.draft(seq, 8, 1.0f, out, &prefill_ms, &step_ms), 1) << "no token is sure beyond doubt";
        }
    }
    EXPECT_GT(cut, 0) << "no floor ended a draft after two or more of its tokens: the test checked only the ends";
}

// The CPU backend's verification forward: every row of a batch the bits of the same tokens run
// one at a time, for every batch a verification takes (exact_rows), on the row-wise Q8_0 and the
// K-quant dot products, both KV types.
TEST(CpuVerification, RowsAreOneTokenStepsBitForBit) {
    for (QuantRecipe recipe : {QuantRecipe::Q8_0, QuantRecipe::Q4_K_M}) {
        const test::TinyQwen3 m =
            test::tiny_qwen3(std::string("cpu_rows_tiny_qwen3_") + quant_recipe_name(recipe) + ".gguf", 11, recipe);
        const size_t V = static_cast<size_t>(m.c.n_vocab);
        std::vector<int32_t> prefix(29);
        for (size_t i = 0; i < prefix.size(); ++i) prefix[i] = static_cast<int32_t>((i * 7919 + 3) % V);
        for (KvType kv : {KvType::Int8, KvType::Fp16}) {
            auto b = create_cpu_backend(m.c, CpuOptions{2});
            b->bind_weights(m.w, WeightPlacement::Auto);
            b->allocate(96, 32, kv);
            EXPECT_GE(b->exact_rows(), SPEC_DRAFT_MAX + 1);
            for (int n : {2, 4, 5, 9, SPEC_DRAFT_MAX + 1}) {
                std::vector<int32_t> batch(static_cast<size_t>(n));
                for (int i = 0; i < n; ++i) batch[static_cast<size_t>(i)] = static_cast<int32_t>((i * 104729 + 101) % V);
                std::vector<float> rows, steps;
                test::verification_rows_and_steps(*b, prefix, batch, V, rows, steps);
                for (int i = 0; i < n; ++i) {
                    EXPECT_EQ(0, std::memcmp(rows.data() + i * V, steps.data() + i * V, V * sizeof(float)))
                        << quant_recipe_name(recipe) << " " << kv_type_name(kv) << ", " << n << " tokens, row " << i;
                }
            }
        }
    }
}

TEST(EngineSpeculative, GreedyOutputAndCacheIdenticalInEveryMode) {
    const std::vector<std::string> prompts = {
        "light.kitchen is on, light.hall is off, light.porch is on. light.kitchen is",
        "def add(a, b):\n    return a + b\n\ndef add(a, b):\n",
        "one two three four one two three four one two",
        "The weather today is",
    };
    auto off = load(SpecMode::Off, "");
    auto ngram = load(SpecMode::Ngram, "");
    auto self = load(SpecMode::Draft, tiny_model(), 4, 0);      // drafts the model accepts
    auto other = load(SpecMode::Draft, other_tiny_model(), 3);  // drafts it mostly rejects
    auto autom = load(SpecMode::Auto, other_tiny_model());
    // The model as its own draft over 2,048 of its 151,936 tokens (and the prompt's): its drafts
    // accepted where the model's choice is among them.
    auto narrow = load(SpecMode::Draft, tiny_model(), 4, 2048);
    // The model as its own draft while it is sure enough (the tiny random model's confidences
    // are 0.07-0.17): its drafts end early.
    auto sure = load(SpecMode::Draft, tiny_model(), 4, 0, 0.14f);
    // Never sure enough: drafts of one token (the first, whatever its confidence).
    auto never = load(SpecMode::Auto, tiny_model(), 4, 0, 1.0f);
    int ngram_acc = 0, ngram_drafted = 0, self_acc = 0, self_drafted = 0, other_drafted = 0, other_acc = 0,
        narrow_drafted = 0, narrow_acc = 0, sure_drafted = 0;
    // Without penalties the model's own greedy drafts are its output: all accepted. With the
    // default repeat penalty (applied to the model's logits at every verified position, not to
    // the drafter's) some are not; the output is the same either way.
    for (const float penalty : {1.0f, 1.1f}) {
        for (const std::string& p : prompts) {
            const GenRun a = greedy(*off, p, 48, penalty);
            EXPECT_EQ(a.st.drafted(), 0);
            EXPECT_EQ(a.st.decode_forwards, 48);
            for (Engine* e : {ngram.get(), self.get(), other.get(), autom.get(), narrow.get(), sure.get(), never.get()}) {
                const GenRun b = greedy(*e, p, 48, penalty);
                EXPECT_EQ(a.tokens, b.tokens) << p;
                EXPECT_EQ(a.text, b.text) << p;
                EXPECT_TRUE(a.kv == b.kv) << "the KV after rejected drafts differs from the plain decode's: " << p;
                EXPECT_EQ(b.st.completion_tokens, 48);
                EXPECT_LE(b.st.accepted(), b.st.drafted());
                if (e == ngram.get()) {
                    ngram_acc += b.st.ngram_accepted;
                    ngram_drafted += b.st.ngram_drafted;
                    EXPECT_EQ(b.st.model_drafted, 0);
                }
                if (e == self.get()) {
                    self_acc += b.st.model_accepted;
                    self_drafted += b.st.model_drafted;
                    if (penalty == 1.0f) {
                        EXPECT_EQ(b.st.model_accepted, b.st.model_drafted) << "the model's own greedy drafts";
                    }
                    EXPECT_LT(b.st.decode_forwards, 48);
                }
                if (e == other.get()) {
                    other_drafted += b.st.model_drafted;
                    other_acc += b.st.model_accepted;
                }
                if (e == narrow.get()) {
                    narrow_drafted += b.st.model_drafted;
                    narrow_acc += b.st.model_accepted;
                }
                if (e == sure.get()) sure_drafted += b.st.model_drafted;
                if (e == never.get()) {
                    EXPECT_LE(b.st.model_drafted, b.st.decode_forwards);
                }
            }
        }
    }
    EXPECT_GT(ngram_drafted, 0);
    EXPECT_GT(ngram_acc, 0);
    EXPECT_GT(self_acc, 0);
    EXPECT_GT(other_drafted, other_acc) << "the other model's drafts were meant to be rejected too";
    EXPECT_GT(narrow_acc, 0);
    EXPECT_GT(narrow_drafted, narrow_acc) << "a random model's choices outside 2,048 ids are drafted wrong";
    // The floor's cuts themselves: DraftModelConfidence. Here only that it drafts: the drafted
    // totals of `sure` and `self` are not ordered (shorter drafts mean more rounds; 192 vs 190 seen).
    EXPECT_GT(sure_drafted, 0);
    EXPECT_GT(self_drafted, 0);
}

// The draft model reads the prompt in the prompt phase (its time in TTFT, not in the decode),
// keeps it for the next request of the same prefix, and forgets it with the model's cache.
TEST(EngineSpeculative, DraftModelReadsThePromptInThePromptPhase) {
    const std::string p = "light.kitchen is on, light.hall is off, light.porch is on. light.kitchen is";
    auto off = load(SpecMode::Off, "");
    auto ngram = load(SpecMode::Ngram, "");
    auto self = load(SpecMode::Draft, tiny_model(), 4, 0);
    const GenRun a = greedy(*off, p, 16, 1.0f);
    EXPECT_EQ(a.st.draft_prefill_ms, 0.0);
    EXPECT_EQ(greedy(*ngram, p, 16, 1.0f).st.draft_prefill_ms, 0.0);
    const GenRun cold = greedy(*self, p, 16, 1.0f);
    EXPECT_EQ(cold.tokens, a.tokens);
    EXPECT_GT(cold.st.draft_prefill_ms, 0.0) << "a cold draft cache reads the prompt before the first token";
    EXPECT_GE(cold.st.ttft_ms, cold.st.prefill_ms + cold.st.draft_prefill_ms);
    EXPECT_EQ(cold.st.model_accepted, cold.st.model_drafted) << "the model's own greedy drafts";
    const GenRun warm = greedy(*self, p, 16, 1.0f);  // the same prompt: both caches hold it
    EXPECT_EQ(warm.tokens, a.tokens);
    EXPECT_EQ(warm.st.draft_prefill_ms, 0.0);
    self->clear_cache();
    const GenRun again = greedy(*self, p, 16, 1.0f);
    EXPECT_EQ(again.tokens, a.tokens);
    EXPECT_GT(again.st.draft_prefill_ms, 0.0) << "clear_cache() empties the draft model's cache too";
    self->clear_cache();
    EXPECT_EQ(greedy(*self, p, 1, 1.0f).st.draft_prefill_ms, 0.0) << "one token: nothing to draft";
}

// Sampled output: a drafted position is sampled with the same draw as without a draft, so a seed
// gives the same tokens in every mode (and the drafts are accepted with their probability).
TEST(EngineSpeculative, SampledOutputIdenticalForASeed) {
    auto off = load(SpecMode::Off, "");
    auto ngram = load(SpecMode::Ngram, "");
    auto self = load(SpecMode::Draft, tiny_model(), 3);
    auto other = load(SpecMode::Draft, other_tiny_model(), 3);
    int drafted = 0, accepted = 0;
    for (uint64_t seed = 1; seed <= 24; ++seed) {
        std::vector<int32_t> ref;
        for (Engine* e : {off.get(), ngram.get(), self.get(), other.get()}) {
            GenerateRequest r;
            r.prompt = "one two three four one two three four one two";
            r.sampling.temperature = 0.8f;
            r.sampling.top_k = 8;
            r.sampling.seed = seed;
            r.max_tokens = 32;
            const GenerateResult res = e->generate(r, nullptr);
            ASSERT_NE(res.finish, FinishReason::Error) << res.error;
            if (e == off.get()) {
                ref = e->resident_tokens();
                continue;
            }
            EXPECT_EQ(e->resident_tokens(), ref) << "seed " << seed;
            drafted += res.stats.drafted();
            accepted += res.stats.accepted();
        }
    }
    EXPECT_GT(accepted, 0);
    EXPECT_LT(accepted, drafted);
}

TEST(EngineSpeculative, RefusesWhatCannotWork) {
    EngineConfig c;
    c.model_path = tiny_model();
    c.device = DeviceKind::Cpu;
    c.n_ctx = 256;
    Engine e;
    c.spec = SpecMode::Draft;
    Status s = e.load(c);
    EXPECT_FALSE(s.ok);
    EXPECT_NE(s.message.find("needs a draft model"), std::string::npos) << s.message;
    c.spec = SpecMode::Ngram;
    c.draft_model_path = other_tiny_model();
    s = e.load(c);
    EXPECT_FALSE(s.ok);
    EXPECT_NE(s.message.find("--spec auto or draft"), std::string::npos) << s.message;
    c.spec = SpecMode::Auto;
    c.draft_max = 17;
    s = e.load(c);
    EXPECT_FALSE(s.ok);
    EXPECT_NE(s.message.find("--draft-max"), std::string::npos) << s.message;
    c.draft_max = 8;
    c.draft_vocab = -2;
    s = e.load(c);
    EXPECT_FALSE(s.ok);
    EXPECT_NE(s.message.find("--draft-vocab"), std::string::npos) << s.message;
    c.draft_vocab = -1;
    // Another vocabulary: SmolLM2's (49,152 tokens) against Qwen3's.
    const std::string smol = test::models_dir() + "/SmolLM2-135M-Instruct.Q4_1.gguf";
    if (std::ifstream(smol).good()) {
        c.draft_max = 8;
        c.draft_model_path = smol;
        s = e.load(c);
        EXPECT_FALSE(s.ok);
        EXPECT_NE(s.message.find("same vocabulary"), std::string::npos) << s.message;
    }
    // And the memory plan counts the draft: a cap that holds the model alone refuses the pair.
    c.draft_model_path.clear();
    c.max_memory_mb = 0;
    c.cache_ram_mb = 0;  // the default session cache would shrink to fit a cap
    ASSERT_TRUE(e.load(c).ok);
    const MemoryReport alone = e.memory_report();
    EXPECT_EQ(alone.draft, 0);
    c.draft_model_path = other_tiny_model();
    ASSERT_TRUE(e.load(c).ok);
    const MemoryReport pair = e.memory_report();
    EXPECT_GT(pair.draft, 0);
    EXPECT_NE(pair.table().find("draft model"), std::string::npos);
    c.max_memory_mb = static_cast<int>((alone.ours() + pair.draft / 2) / MIB) + 1;
    s = e.load(c);
    EXPECT_FALSE(s.ok) << "a cap between the model's and the pair's needs";
}

// The token at a drafted position (the second generated; the draft model is the model itself,
// greedy, so the draft is the argmax and accepted with its probability), over 2,000 seeds.
void expect_engine_distribution(const OutputConstraint& con) {
    auto plain = load(SpecMode::Off, "");
    auto spec = load(SpecMode::Draft, tiny_model(), 1, 0);
    const std::string prompt = "<|im_start|>user\nName a colour.<|im_end|>\n<|im_start|>assistant\n";
    std::map<int32_t, int> a, b;
    int drafted = 0, accepted = 0;
    const size_t P = plain->tokenize(prompt, true, true).size();
    for (uint64_t seed = 0; seed < 2000; ++seed) {
        for (Engine* e : {plain.get(), spec.get()}) {
            GenerateRequest r;
            r.prompt = prompt;
            r.parse_special = true;
            r.sampling.temperature = 0.8f;
            r.sampling.top_k = 8;
            r.sampling.top_p = 1.0f;
            r.sampling.repeat_penalty = 1.0f;
            r.sampling.seed = seed * 2 + (e == spec.get());
            r.max_tokens = 3;  // room for a one-token draft after the first
            r.constraint = con;
            const GenerateResult res = e->generate(r, nullptr);
            ASSERT_NE(res.finish, FinishReason::Error) << res.error;
            const std::vector<int32_t>& t = e->resident_tokens();
            ASSERT_GE(t.size(), P + 1);
            // The second generated token (-1: the generation ended with the first).
            (e == spec.get() ? b : a)[t.size() >= P + 2 ? t[P + 1] : -1]++;
            if (e == spec.get()) {
                drafted += res.stats.model_drafted;
                accepted += res.stats.model_accepted;
            }
        }
    }
    int bins = 0;
    EXPECT_GT(homogeneity_p(a, b, &bins), 0.01) << bins << " bins";
    EXPECT_GE(bins, 3);
    EXPECT_GT(drafted, 1000);
    EXPECT_GT(accepted, 0);
    EXPECT_LT(accepted, drafted);
}

TEST(EngineSpeculative, SampledTokensKeepTheModelsDistribution) { expect_engine_distribution({}); }

TEST(EngineSpeculative, GrammarConstrainedSamplesKeepTheDistribution) {
    OutputConstraint c;
    c.kind = OutputConstraint::Kind::Grammar;
    c.text = "root ::= [a-f]+";
    expect_engine_distribution(c);
}

}  // namespace
}  // namespace jllm
