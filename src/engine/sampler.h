// engine/sampler.h — token selection: logit bias, repetition/presence/frequency penalties over
// a window, greedy, temperature, top-k, top-p, min-p, seeded sampling. Buffers are sized once
// per vocabulary; sampling a token allocates nothing.
//
// Order: bias -> penalties -> (temperature <= 0: argmax) -> temperature -> top-k -> softmax ->
// top-p -> min-p -> draw. Repeat penalty follows the common convention: a positive logit is
// divided by the penalty, a negative one multiplied.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "jllm_engine.h"

namespace jllm {

class Sampler {
public:
    Sampler(int32_t n_vocab, const SamplingParams& params);

    // `logits` [n_vocab] is modified in place (bias and penalties). `history` is the whole
    // token sequence so far (prompt + generated); the penalty window is its tail. `allowed` (a
    // bitmask over the vocabulary, bit t % 32 of word t / 32; null: every token): the others are
    // never drawn (a grammar's mask, applied before everything else).
    int32_t sample(float* logits, const std::vector<int32_t>& history, const uint32_t* allowed = nullptr);

    // Candidate sampling (the GPU's top-k path): if these parameters can be served from the k
    // largest raw logits, returns true and sets *k. Exact because bias is absent and penalties
    // only lower logits: a token outside the top (top_k + window) cannot rise into the top_k
    // after at most `window` tokens are penalized. Greedy needs 1 + window.
    bool candidates_suffice(int max_k, int* k) const;
    // The same pipeline as sample() on `n` candidates (ids, raw logits; modified in place). A
    // candidate whose logit is -inf (a token the backend's selection masked) is never drawn.
    int32_t sample_candidates(int32_t* ids, float* vals, int n, const std::vector<int32_t>& history);

    const SamplingParams& params() const { return p_; }

private:
    int32_t draw(size_t n);  // temperature-scaled, sorted candidates cand_[0..n) -> id
    struct Cand {
        float logit;
        int32_t id;
    };
    void apply_penalties(float* logits, const std::vector<int32_t>& history);

    int32_t n_vocab_;
    SamplingParams p_;
    std::mt19937_64 rng_;
    std::vector<Cand> cand_;       // [n_vocab]
    std::vector<uint16_t> counts_;  // [n_vocab] occurrences in the penalty window
    std::vector<int32_t> touched_;  // ids with counts_ > 0, for a cheap reset
};

// log-softmax of logits [n_vocab] for `id`, and optionally the top-n (id, logprob) pairs.
float token_logprob(const float* logits, int32_t n_vocab, int32_t id, int top_n, std::vector<TokenLogprob>* top);

}  // namespace jllm
