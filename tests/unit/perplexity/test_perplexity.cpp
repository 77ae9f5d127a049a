// tests/unit/perplexity/test_perplexity.cpp — jllm-perplexity's arithmetic without a model:
// chunking (BOS replacement, counts, refusals), the log-softmax rows and what a file keeps of
// them, the KL bracket against the exact divergence on random distributions, the file's round
// trip and its refusals of damaged files, and the statistics.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "perplexity.h"

using namespace jllm::ppl;

namespace {

std::vector<float> random_logits(std::mt19937& rng, size_t V, double scale) {
    std::normal_distribution<double> n(0.0, scale);
    std::vector<float> v(V);
    for (float& x : v) x = static_cast<float>(n(rng));
    return v;
}

double exact_kl(const std::vector<double>& p, const std::vector<double>& q) {
    double s = 0;
    for (size_t i = 0; i < p.size(); i++) s += std::exp(p[i]) * (p[i] - q[i]);
    return s;
}

std::string tmp_path(const char* name) { return testing::TempDir() + name; }

}  // namespace

TEST(PerplexityChunks, CutsReplacesBosAndRefusesShortTexts) {
    std::vector<int32_t> t(100);
    for (size_t i = 0; i < t.size(); i++) t[i] = static_cast<int32_t>(i + 10);
    auto c = make_chunks(t, 16, 0, 1, 2);
    ASSERT_EQ(c.size(), 6u);  // 100 / 16, the partial chunk left out
    EXPECT_EQ(c[0][0], 1);
    EXPECT_EQ(c[2][0], 1);
    EXPECT_EQ(c[2][1], 10 + 33);
    EXPECT_EQ(c[5][15], 10 + 95);
    c = make_chunks(t, 16, 3, -1, 2);
    ASSERT_EQ(c.size(), 3u);
    EXPECT_EQ(c[1][0], 10 + 16);  // no BOS: the token stays
    EXPECT_THROW(make_chunks(t, 16, 7, -1, 2), std::runtime_error);   // more chunks than the text has
    EXPECT_THROW(make_chunks(t, 64, 0, -1, 2), std::runtime_error);   // one chunk only
    EXPECT_THROW(make_chunks(t, 4, 0, -1, 2), std::runtime_error);    // -c too small
    EXPECT_NO_THROW(make_chunks(t, 64, 0, -1, 1));
}

TEST(PerplexityRows, LogSoftmaxTopAndSample) {
    std::mt19937 rng(7);
    const std::vector<int32_t> sample = sample_vocabulary(5000, 128);
    ASSERT_EQ(sample.size(), 128u);
    for (size_t i = 1; i < sample.size(); i++) EXPECT_LT(sample[i - 1], sample[i]);  // distinct, ascending
    EXPECT_EQ(sample, sample_vocabulary(5000, 128));                                  // fixed
    EXPECT_EQ(sample_vocabulary(10, 128).size(), 10u);
    for (double scale : {0.5, 3.0, 8.0}) {
        const std::vector<float> logits = random_logits(rng, 5000, scale);
        std::vector<double> lsm;
        const Row r = make_row(logits.data(), 5000, 42, 64, sample, lsm);
        double total = 0;
        for (double x : lsm) total += std::exp(x);
        EXPECT_NEAR(total, 1.0, 1e-12);
        EXPECT_DOUBLE_EQ(r.logp_next, lsm[42]);
        ASSERT_EQ(r.ids.size(), 64u);
        EXPECT_EQ(r.ids[0], r.argmax);
        std::vector<double> sorted = lsm;
        std::sort(sorted.begin(), sorted.end(), std::greater<double>());
        for (size_t j = 0; j < r.ids.size(); j++) {
            EXPECT_FLOAT_EQ(r.logp[j], static_cast<float>(sorted[j]));  // the 64 largest, descending
            EXPECT_FLOAT_EQ(r.logp[j], static_cast<float>(lsm[static_cast<size_t>(r.ids[j])]));
        }
        ASSERT_EQ(r.sample_logp.size(), 128u);
        for (size_t j = 0; j < sample.size(); j++) {
            EXPECT_FLOAT_EQ(r.sample_logp[j], static_cast<float>(lsm[static_cast<size_t>(sample[j])]));
        }
    }
}

// Over many positions the estimate's mean follows the exact mean KL; the bucket stays below it;
// a whole-vocabulary top gives the exact value at every position.
TEST(PerplexityDivergence, EstimateFollowsTheExactKl) {
    std::mt19937 rng(11);
    const size_t V = 20000;
    const std::vector<int32_t> sample = sample_vocabulary(static_cast<uint32_t>(V), 128);
    for (double noise_sd : {0.03, 0.1, 0.3}) {
        double sum_exact = 0, sum_est = 0, sum_bucket = 0, sum_tail = 0;
        const int n = 150;
        for (int trial = 0; trial < n; trial++) {
            const std::vector<float> lp = random_logits(rng, V, 2.0 + (trial % 5));
            std::vector<float> lq = lp;
            std::normal_distribution<double> noise(0.0, noise_sd);
            for (float& x : lq) x += static_cast<float>(noise(rng));
            std::vector<double> p, q;
            const Row base = make_row(lp.data(), static_cast<int64_t>(V), 0, 64, sample, p);
            const Row ours = make_row(lq.data(), static_cast<int64_t>(V), 0, 1, {}, q);
            const double kl = exact_kl(p, q);
            const Divergence d = divergence(base, sample, q, ours.argmax);
            EXPECT_LE(d.bucket, kl + 1e-9) << trial;
            EXPECT_EQ(d.same_top, base.argmax == ours.argmax);
            sum_exact += kl;
            sum_est += d.kl;
            sum_bucket += d.bucket;
            sum_tail += d.tail_mass;
        }
        std::printf("[perplexity] noise %.2f: exact mean KL %.5f, estimate %.5f, bucket %.5f, tail mass %.3f\n",
                    noise_sd, sum_exact / n, sum_est / n, sum_bucket / n, sum_tail / n);
        EXPECT_GT(sum_tail / n, 0.2);  // heavy tails: the estimate matters
        EXPECT_LT(sum_bucket, 0.9 * sum_exact);
        EXPECT_NEAR(sum_est / sum_exact, 1.0, 0.03);
    }
    // the whole vocabulary stored: exact
    std::vector<float> l = random_logits(rng, 300, 3.0), m = l;
    for (float& x : m) x += 0.2f * std::sin(x * 7.0f);
    std::vector<double> p, q;
    const Row b = make_row(l.data(), 300, 3, 300, {}, p);
    const Row o = make_row(m.data(), 300, 3, 1, {}, q);
    const Divergence d = divergence(b, {}, q, o.argmax);
    EXPECT_NEAR(d.kl, exact_kl(p, q), 1e-6);
    EXPECT_NEAR(d.bucket, d.kl, 1e-12);
    // a distribution against itself: zero, same top
    const Row r = make_row(l.data(), 300, 3, 16, sample_vocabulary(300, 64), p);
    const Divergence z = divergence(r, sample_vocabulary(300, 64), p, r.argmax);
    EXPECT_NEAR(z.kl, 0.0, 1e-7);
    EXPECT_TRUE(z.same_top);
}

TEST(PerplexityFile, RoundTripAndRefusals) {
    const std::string path = tmp_path("ppl_roundtrip.kld");
    LogProbHeader h;
    h.n_vocab = 500;
    h.n_ctx = 16;
    h.n_chunks = 2;
    h.first = 8;
    h.n_top = 8;
    h.n_sample = 12;
    h.name = "test model";
    h.sample_ids = sample_vocabulary(500, 12);
    for (int i = 0; i < 32; i++) h.tokens.push_back(i * 7 % 500);
    std::mt19937 rng(3);
    std::vector<Row> rows;
    {
        LogProbWriter w(path, h);
        for (size_t i = 0; i < 2 * h.scored_per_chunk(); i++) {
            const std::vector<float> l = random_logits(rng, 500, 2.0 + static_cast<double>(i));
            std::vector<double> lsm;
            rows.push_back(make_row(l.data(), 500, static_cast<int32_t>(i), 8, h.sample_ids, lsm));
            w.add(rows.back());
        }
        Row wrong = rows.back();
        wrong.sample_logp.pop_back();
        EXPECT_THROW(w.add(wrong), std::logic_error);
        w.close();
    }
    const LogProbFile f = read_logprob_file(path);
    EXPECT_EQ(f.header.n_vocab, 500u);
    EXPECT_EQ(f.header.n_ctx, 16u);
    EXPECT_EQ(f.header.n_chunks, 2u);
    EXPECT_EQ(f.header.n_top, 8u);
    EXPECT_EQ(f.header.name, "test model");
    EXPECT_EQ(f.header.sample_ids, h.sample_ids);
    EXPECT_EQ(f.header.tokens, h.tokens);
    ASSERT_EQ(f.rows.size(), rows.size());
    for (size_t i = 0; i < rows.size(); i++) {
        EXPECT_FLOAT_EQ(static_cast<float>(f.rows[i].logp_next), static_cast<float>(rows[i].logp_next));
        EXPECT_EQ(f.rows[i].ids, rows[i].ids);
        EXPECT_EQ(f.rows[i].logp, rows[i].logp);
        EXPECT_EQ(f.rows[i].sample_logp, rows[i].sample_logp);
        EXPECT_EQ(f.rows[i].argmax, rows[i].ids[0]);
    }
    // damaged copies
    std::ifstream in(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto write = [&](const std::string& b) {
        const std::string p = tmp_path("ppl_damaged.kld");
        std::ofstream(p, std::ios::binary) << b;
        return p;
    };
    EXPECT_NO_THROW(read_logprob_file(write(bytes)));
    EXPECT_THROW(read_logprob_file(write(bytes.substr(0, bytes.size() - 3))), std::runtime_error);  // truncated
    EXPECT_THROW(read_logprob_file(write(bytes + "x")), std::runtime_error);                          // trailing
    EXPECT_THROW(read_logprob_file(write("JLLMLGT1" + bytes.substr(8))), std::runtime_error);        // magic
    std::string bad = bytes;
    bad[12] = 5;  // n_ctx 5: below the smallest chunk
    EXPECT_THROW(read_logprob_file(write(bad)), std::runtime_error);
    bad = bytes;
    const size_t samples0 = 8 + 24 + 4 + h.name.size();
    bad[samples0 + 3] = 0x7f;  // sample id 0 far past the vocabulary
    EXPECT_THROW(read_logprob_file(write(bad)), std::runtime_error);
    bad = bytes;
    const size_t rec0_logp0 = samples0 + 4 * 12 + 4 * 32 + 4 + 4 * 8;
    const float positive = 0.5f;
    std::memcpy(&bad[rec0_logp0], &positive, 4);  // a log-probability above 0
    EXPECT_THROW(read_logprob_file(write(bad)), std::runtime_error);
    EXPECT_THROW(read_logprob_file(tmp_path("no_such_file.kld")), std::runtime_error);
    std::remove(path.c_str());
}

TEST(PerplexityStats, PplErrorRatioAndQuantiles) {
    Stats s;
    const std::vector<double> nll = {1.0, 2.0, 3.0, 2.0};
    for (double x : nll) s.add_nll(x);
    EXPECT_NEAR(s.ppl(), std::exp(2.0), 1e-12);
    // sample sd of {1,2,3,2} = sqrt(2/3); error = ppl * sd / sqrt(n)
    EXPECT_NEAR(s.ppl_error(), std::exp(2.0) * std::sqrt(2.0 / 3.0) / 2.0, 1e-12);
    Stats p;
    for (int i = 0; i < 100; i++) {
        p.add_nll(2.0 + 0.01);
        Divergence d;
        d.kl = i / 1000.0;
        d.bucket = d.kl - 1e-4;
        d.tail_mass = 0.25;
        d.same_top = i % 10 != 0;
        p.add_pair(2.0, d);
    }
    EXPECT_NEAR(p.ppl_ratio(), std::exp(0.01), 1e-12);
    EXPECT_NEAR(p.ppl_ratio_error(), 0.0, 1e-12);  // the same difference everywhere
    EXPECT_NEAR(p.base_ppl(), std::exp(2.0), 1e-12);
    EXPECT_NEAR(p.kl_mean(), 0.0495, 1e-12);
    EXPECT_NEAR(p.kl_bucket_mean(), 0.0494, 1e-12);
    EXPECT_NEAR(p.tail_mass_mean(), 0.25, 1e-12);
    EXPECT_NEAR(p.kl_quantile(0.99), 0.098, 1e-12);
    EXPECT_NEAR(p.kl_quantile(0.5), 0.049, 1e-12);
    EXPECT_NEAR(p.kl_max(), 0.099, 1e-12);
    EXPECT_NEAR(p.top1_agreement(), 0.9, 1e-12);
}
