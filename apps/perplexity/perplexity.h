// apps/perplexity/perplexity.h — perplexity and KL divergence as llama-perplexity defines them,
// and the log-probability file that carries one model's distributions to another run.
//
// Chunks: the text's tokens (BOS first where the model adds one) are cut into n_chunks chunks of
// n_ctx tokens; each chunk is evaluated from an empty context with its first token replaced by
// BOS (where the model adds one); the positions j in [n_ctx/2, n_ctx - 1) are scored: the model's
// distribution at j against token j + 1. Scores are natural-log likelihoods.
//
// Log-probability file (little-endian), one fixed-size record per scored position in chunk order:
//   magic "JLLMKLD1"
//   u32 n_vocab, u32 n_ctx, u32 n_chunks, u32 first (= n_ctx / 2), u32 n_top, u32 n_sample
//   u32 name_len, char name[name_len]          the writer's model name (informational)
//   i32 sample_ids[n_sample]                   a fixed uniform sample of the vocabulary
//   i32 tokens[n_chunks * n_ctx]               the evaluated tokens, BOS replacements included
//   per scored position:
//     f32 logp_next                            log p(token j + 1)
//     i32 top_ids[n_top], f32 top_logp[n_top]  the most probable tokens, descending
//     f32 sample_logp[n_sample]                log p of sample_ids
// A full row of a 151,936-token vocabulary is 600 KB, and small models' distributions have heavy
// tails (SmolLM2-135M on English prose: 290 tokens hold 99% of the mass at the median position,
// more than 1,024 at 29% of them), so a file keeps the top exactly and the tail by a sample. KL(P || Q) of a stored P against a full Q is
//   KL = sum_{i in S} P_i log(P_i / Q_i) + P_t log(P_t / Q_t)  +  P_t KL(P~ || Q~)
// (S the stored top, P_t and Q_t the masses outside it, P~ and Q~ the tail distributions
// normalized): the first two terms are exact (the KL of the pair with the tail merged into one
// bucket, a lower bound of the KL); the last is estimated from the sample: with
// r_i = log(P~_i / Q~_i), KL(P~ || Q~) = E_P~[r + exp(-r) - 1] (as E_P~[exp(-r)] = 1), a
// non-negative integrand of second order in r, estimated by its P-weighted mean over
// R = sample \ S (tests/unit/perplexity: within 1% of the exact mean on heavy-tailed pairs).
// With the whole vocabulary stored (n_top = n_vocab) the figure is llama-perplexity's exactly.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace jllm::ppl {

constexpr uint32_t DEFAULT_TOP = 64;
constexpr uint32_t DEFAULT_SAMPLE = 128;

// The evaluated tokens of each chunk: tokens [c * n_ctx, (c + 1) * n_ctx) of `text_tokens`, the
// first replaced by `bos` when bos >= 0. n_chunks 0: every whole chunk. Throws when the text
// holds fewer than `min_chunks` whole chunks.
std::vector<std::vector<int32_t>> make_chunks(const std::vector<int32_t>& text_tokens, int n_ctx, int n_chunks,
                                              int32_t bos, int min_chunks);

// n distinct token ids drawn uniformly from [0, n_vocab) with a fixed seed, ascending.
std::vector<int32_t> sample_vocabulary(uint32_t n_vocab, uint32_t n, uint64_t seed = 1);

// One position's distribution: log-softmax of `logits`, the score of `next` and what a file
// stores of it.
struct Row {
    double logp_next = 0;
    int32_t argmax = 0;
    std::vector<int32_t> ids;  // the n_top most probable, descending (ties: lower id first)
    std::vector<float> logp;
    std::vector<float> sample_logp;  // of the file's sample_ids
};
// logsm: scratch, resized to n_vocab; receives the full log-softmax (double precision sums).
Row make_row(const float* logits, int64_t n_vocab, int32_t next, uint32_t n_top,
             const std::vector<int32_t>& sample_ids, std::vector<double>& logsm);

// KL(P || Q) of a stored P against Q's full log-softmax (see the header comment).
struct Divergence {
    double kl = 0;      // bucket + the tail's estimate
    double bucket = 0;  // the exact part: the tail merged into one bucket (<= the KL)
    double tail_mass = 0;  // P_t
    bool same_top = false;
    // Where the most probable tokens differ: the base's probability of its top token less its
    // probability of Q's (a near tie when small; the smallest stored probability stands in for a
    // token outside the stored top, which makes the gap a lower bound).
    double top_gap = 0;
};
Divergence divergence(const Row& base, const std::vector<int32_t>& sample_ids, const std::vector<double>& logsm_q,
                      int32_t argmax_q);

// The file, read whole or written record by record.
struct LogProbHeader {
    uint32_t n_vocab = 0, n_ctx = 0, n_chunks = 0, first = 0, n_top = DEFAULT_TOP, n_sample = DEFAULT_SAMPLE;
    std::string name;
    std::vector<int32_t> sample_ids;  // n_sample
    std::vector<int32_t> tokens;  // n_chunks * n_ctx
    size_t scored_per_chunk() const { return n_ctx - 1 - first; }
};
struct LogProbFile {
    LogProbHeader header;
    std::vector<Row> rows;  // n_chunks * scored_per_chunk(), argmax = ids[0]
};
LogProbFile read_logprob_file(const std::string& path);  // throws with the reason

class LogProbWriter {
public:
    LogProbWriter(const std::string& path, const LogProbHeader& header);  // throws
    ~LogProbWriter();
    LogProbWriter(const LogProbWriter&) = delete;
    LogProbWriter& operator=(const LogProbWriter&) = delete;
    void add(const Row& row);  // row.ids / row.sample_logp of the header's n_top / n_sample
    void close();  // throws on a write error; the destructor closes silently
private:
    std::FILE* f_ = nullptr;
    std::string path_;
    uint32_t n_top_ = 0, n_sample_ = 0;
};

// Running statistics of the scored positions.
class Stats {
public:
    void add_nll(double nll) { nll_.push_back(nll); }
    void add_pair(double nll_base, const Divergence& d);
    size_t n() const { return nll_.size(); }
    // exp(mean nll) and its standard error (llama-perplexity's: ppl * sqrt(var(nll) / (n - 1))).
    double ppl() const;
    double ppl_error() const;
    // Against a base file (add_pair for every position).
    size_t n_pairs() const { return kl_.size(); }
    double base_ppl() const;
    double ppl_ratio() const;        // exp(mean(nll - nll_base)) = PPL / PPL(base)
    double ppl_ratio_error() const;  // from the paired differences
    double kl_mean() const;
    double kl_mean_error() const;
    double kl_bucket_mean() const;   // the exact part alone (a lower bound of the mean)
    double tail_mass_mean() const;
    double kl_quantile(double q) const;  // of the lower values
    double kl_max() const;
    double top1_agreement() const;   // fraction of positions with the same most probable token
    size_t top1_differ() const { return gaps_.size(); }
    double top1_gap_median() const;  // of Divergence::top_gap where the top tokens differ
private:
    std::vector<double> nll_, nll_base_, kl_, kl_bucket_, tail_, gaps_;
    size_t same_top_ = 0;
};

}  // namespace jllm::ppl
