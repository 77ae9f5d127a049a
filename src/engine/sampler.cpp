// engine/sampler.cpp — see sampler.h for the order of operations.
#include "engine/sampler.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace jllm {

Sampler::Sampler(int32_t n_vocab, const SamplingParams& params)
    : n_vocab_(n_vocab), p_(params), cand_(static_cast<size_t>(n_vocab)), counts_(static_cast<size_t>(n_vocab), 0) {
    uint64_t seed = params.seed;
    if (seed == 0xFFFFFFFFFFFFFFFFull) seed = std::random_device{}() ^ (static_cast<uint64_t>(std::random_device{}()) << 32);
    rng_.seed(seed);
    touched_.reserve(4096);
}

void Sampler::apply_penalties(float* logits, const std::vector<int32_t>& history) {
    const bool any = p_.repeat_penalty != 1.0f || p_.presence_penalty != 0.0f || p_.frequency_penalty != 0.0f;
    if (!any || p_.repeat_last_n == 0 || history.empty()) return;
    const size_t n = p_.repeat_last_n < 0 ? history.size()
                                          : std::min(history.size(), static_cast<size_t>(p_.repeat_last_n));
    touched_.clear();
    for (size_t i = history.size() - n; i < history.size(); ++i) {
        const int32_t id = history[i];
        if (id < 0 || id >= n_vocab_) continue;
        if (counts_[static_cast<size_t>(id)]++ == 0) touched_.push_back(id);
    }
    for (int32_t id : touched_) {
        float& l = logits[id];
        const float cnt = counts_[static_cast<size_t>(id)];
        if (p_.repeat_penalty != 1.0f) l = l > 0.0f ? l / p_.repeat_penalty : l * p_.repeat_penalty;
        l -= cnt * p_.frequency_penalty + p_.presence_penalty;
        counts_[static_cast<size_t>(id)] = 0;
    }
}

int32_t Sampler::sample(float* logits, const std::vector<int32_t>& history, const uint32_t* allowed) {
    for (const auto& [id, bias] : p_.logit_bias) {
        if (id >= 0 && id < n_vocab_) logits[id] += bias;
    }
    apply_penalties(logits, history);
    auto ok = [allowed](int32_t i) { return allowed == nullptr || ((allowed[i >> 5] >> (i & 31)) & 1u) != 0; };

    if (p_.temperature <= 0.0f) {
        int32_t best = -1;
        for (int32_t i = 0; i < n_vocab_; ++i) {
            if (ok(i) && (best < 0 || logits[i] > logits[best])) best = i;
        }
        return best < 0 ? 0 : best;
    }

    size_t n = 0;
    int32_t first_allowed = -1;
    const float inv_t = 1.0f / p_.temperature;
    for (int32_t i = 0; i < n_vocab_; ++i) {
        if (!ok(i)) continue;
        if (first_allowed < 0) first_allowed = i;
        if (std::isfinite(logits[i]) || logits[i] > 0) cand_[n++] = Cand{logits[i] * inv_t, i};
    }
    // Every allowed logit -inf (a bias of -inf on them): the first allowed token, never another.
    if (n == 0 && first_allowed >= 0) return first_allowed;
    return draw(n);
}

bool Sampler::candidates_suffice(int max_k, int* k) const {
    if (!p_.logit_bias.empty()) return false;
    const bool penalties = p_.repeat_last_n != 0 &&
                           (p_.repeat_penalty != 1.0f || p_.presence_penalty != 0.0f || p_.frequency_penalty != 0.0f);
    if (penalties && (p_.repeat_penalty < 1.0f || p_.presence_penalty < 0.0f || p_.frequency_penalty < 0.0f)) {
        return false;  // a penalty that raises logits could lift a token from outside the candidates
    }
    const int window = penalties ? p_.repeat_last_n : 0;
    if (window < 0) return false;  // the whole context: unbounded
    const int base = p_.temperature <= 0.0f ? 1 : p_.top_k;
    if (base <= 0) return false;  // sampling from the full distribution
    const int64_t need = static_cast<int64_t>(base) + window;
    if (need > max_k || need > n_vocab_) return false;
    *k = static_cast<int>(need);
    return true;
}

int32_t Sampler::sample_candidates(int32_t* ids, float* vals, int n, const std::vector<int32_t>& history) {
    JLLM_ASSERT(n >= 1);
    // Penalties on the candidates (the window's counts, as apply_penalties).
    const bool any = p_.repeat_penalty != 1.0f || p_.presence_penalty != 0.0f || p_.frequency_penalty != 0.0f;
    if (any && p_.repeat_last_n != 0 && !history.empty()) {
        const size_t w = p_.repeat_last_n < 0 ? history.size()
                                              : std::min(history.size(), static_cast<size_t>(p_.repeat_last_n));
        touched_.clear();
        for (size_t i = history.size() - w; i < history.size(); ++i) {
            const int32_t id = history[i];
            if (id < 0 || id >= n_vocab_) continue;
            if (counts_[static_cast<size_t>(id)]++ == 0) touched_.push_back(id);
        }
        for (int c = 0; c < n; ++c) {
            if (ids[c] < 0 || ids[c] >= n_vocab_) continue;
            const float cnt = counts_[static_cast<size_t>(ids[c])];
            if (cnt == 0) continue;
            float& l = vals[c];
            if (p_.repeat_penalty != 1.0f) l = l > 0.0f ? l / p_.repeat_penalty : l * p_.repeat_penalty;
            l -= cnt * p_.frequency_penalty + p_.presence_penalty;
        }
        for (int32_t id : touched_) counts_[static_cast<size_t>(id)] = 0;
    }
    if (p_.temperature <= 0.0f) {  // first maximum by id, as the full argmax
        int best = -1;
        for (int c = 0; c < n; ++c) {
            if (ids[c] < 0 || vals[c] == -INFINITY) continue;
            if (best < 0 || vals[c] > vals[best] || (vals[c] == vals[best] && ids[c] < ids[best])) best = c;
        }
        return best < 0 ? ids[0] : ids[best];
    }
    size_t m = 0;
    const float inv_t = 1.0f / p_.temperature;
    for (int c = 0; c < n; ++c) {
        if (ids[c] >= 0 && (std::isfinite(vals[c]) || vals[c] > 0)) cand_[m++] = Cand{vals[c] * inv_t, ids[c]};
    }
    return draw(m);
}

int32_t Sampler::draw(size_t n) {
    if (n == 0) return 0;
    auto by_logit = [](const Cand& a, const Cand& b) { return a.logit > b.logit || (a.logit == b.logit && a.id < b.id); };
    if (p_.top_k > 0 && static_cast<size_t>(p_.top_k) < n) {
        std::partial_sort(cand_.begin(), cand_.begin() + p_.top_k, cand_.begin() + static_cast<long>(n), by_logit);
        n = static_cast<size_t>(p_.top_k);
    } else {
        std::sort(cand_.begin(), cand_.begin() + static_cast<long>(n), by_logit);
    }
    // softmax over the survivors (sorted, highest first); `logit` becomes the probability
    const float mx = cand_[0].logit;
    double sum = 0.0;
    for (size_t i = 0; i < n; ++i) {
        cand_[i].logit = std::exp(cand_[i].logit - mx);
        sum += cand_[i].logit;
    }
    for (size_t i = 0; i < n; ++i) cand_[i].logit = static_cast<float>(cand_[i].logit / sum);
    if (p_.top_p > 0.0f && p_.top_p < 1.0f) {
        double cum = 0.0;
        size_t keep = n;
        for (size_t i = 0; i < n; ++i) {
            cum += cand_[i].logit;
            if (cum >= p_.top_p) {
                keep = i + 1;
                break;
            }
        }
        n = keep;
    }
    if (p_.min_p > 0.0f) {
        const float floor_p = cand_[0].logit * p_.min_p;
        size_t keep = 1;
        while (keep < n && cand_[keep].logit >= floor_p) keep++;
        n = keep;
    }
    double total = 0.0;
    for (size_t i = 0; i < n; ++i) total += cand_[i].logit;
    std::uniform_real_distribution<double> uni(0.0, total);
    const double r = uni(rng_);
    double acc = 0.0;
    for (size_t i = 0; i < n; ++i) {
        acc += cand_[i].logit;
        if (r < acc) return cand_[i].id;
    }
    return cand_[n - 1].id;
}

float token_logprob(const float* logits, int32_t n_vocab, int32_t id, int top_n, std::vector<TokenLogprob>* top) {
    float mx = logits[0];
    for (int32_t i = 1; i < n_vocab; ++i) mx = std::max(mx, logits[i]);
    double sum = 0.0;
    for (int32_t i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(logits[i] - mx));
    const float lse = mx + static_cast<float>(std::log(sum));
    if (top != nullptr && top_n > 0) {
        top->clear();
        // keep the top_n largest by insertion into a small sorted list
        for (int32_t i = 0; i < n_vocab; ++i) {
            const float lp = logits[i] - lse;
            if (static_cast<int>(top->size()) < top_n || lp > top->back().logprob) {
                TokenLogprob t;
                t.token = i;
                t.logprob = lp;
                auto it = std::upper_bound(top->begin(), top->end(), t,
                                           [](const TokenLogprob& a, const TokenLogprob& b) { return a.logprob > b.logprob; });
                top->insert(it, t);
                if (static_cast<int>(top->size()) > top_n) top->pop_back();
            }
        }
    }
    return logits[id] - lse;
}

}  // namespace jllm
