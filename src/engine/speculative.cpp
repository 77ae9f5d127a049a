// engine/speculative.cpp — see speculative.h.
#include "engine/speculative.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>

#include "backend/backend.h"
#include "backend/backend_registry.h"
#include "backend/cpu/select.h"
#include "core/error.h"
#include "core/timer.h"
#include "engine/env_options.h"
#include "gguf/gguf.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "sessions/session_cache.h"
#include "tokenizer/tokenizer.h"

namespace jllm {

const char* spec_mode_name(SpecMode m) {
    switch (m) {
        case SpecMode::Auto: return "auto";
        case SpecMode::Ngram: return "ngram";
        case SpecMode::Draft: return "draft";
        case SpecMode::Off: return "off";
    }
    return "?";
}

int ngram_draft(const int32_t* seq, size_t n, int max, std::vector<int32_t>& out, int* match) {
    out.clear();
    if (match != nullptr) *match = 0;
    if (max <= 0 || n < static_cast<size_t>(NGRAM_MIN) + 1) return 0;
    // One backward scan: at each earlier end j, the length of the common suffix of seq[0, j] and
    // seq[0, n) (at most NGRAM_MAX); the longest wins, the latest among equals.
    const size_t last = n - 1;
    size_t best_len = 0, best_end = 0;
    for (size_t j = last; j-- > 0;) {
        if (seq[j] != seq[last]) continue;
        size_t len = 1;
        while (len < static_cast<size_t>(NGRAM_MAX) && len <= j && seq[j - len] == seq[last - len]) len++;
        if (len > best_len) {
            best_len = len;
            best_end = j;
            if (len == static_cast<size_t>(NGRAM_MAX)) break;
        }
    }
    if (best_len < static_cast<size_t>(NGRAM_MIN)) return 0;
    const size_t from = best_end + 1;
    const size_t k = std::min(static_cast<size_t>(max), n - from);
    out.assign(seq + from, seq + from + k);
    if (match != nullptr) *match = static_cast<int>(best_len);
    return static_cast<int>(k);
}

// ---- draft model ----

DraftModel::DraftModel(const std::string& path, DeviceKind device, int n_threads, WeightPlacement placement,
                       const Tokenizer& target, int vocab) {
    try {
        file_ = GgufFile::open(path);
    } catch (const std::exception& e) {
        throw JllmError(strfmt("draft model: %s", e.what()));
    }
    mc_ = std::make_unique<ModelConfig>(load_model_config(*file_));
    w_ = std::make_unique<ModelWeights>(bind_model_weights(*file_, *mc_));
    name_ = mc_->name;
    const std::unique_ptr<Tokenizer> tok = Tokenizer::from_gguf(*file_);
    if (tok->n_vocab() != target.n_vocab() || mc_->n_vocab != target.n_vocab()) {
        throw JllmError(strfmt("draft model %s: its vocabulary has %d tokens (output %" PRId64 "), the model's %d; a draft "
                               "needs the same vocabulary",
                               path.c_str(), tok->n_vocab(), mc_->n_vocab, target.n_vocab()));
    }
    for (int32_t id = 0; id < target.n_vocab(); ++id) {
        if (tok->token_text(id) != target.token_text(id)) {
            throw JllmError(strfmt("draft model %s: token %d is '%s' there and '%s' in the model; a draft needs the same "
                                   "vocabulary",
                                   path.c_str(), id, tok->token_text(id).c_str(), target.token_text(id).c_str()));
        }
    }
    const int32_t n_vocab = target.n_vocab();
    base_tokens_ = n_vocab;
    if (vocab > 0 && vocab < n_vocab) {
        base_mask_.assign(static_cast<size_t>(n_vocab + 31) / 32, 0u);
        base_tokens_ = 0;
        for (int32_t id = 0; id < n_vocab; ++id) {
            if (id < vocab || target.token_type(id) != TokenType::NORMAL) {
                base_mask_[static_cast<size_t>(id) / 32] |= 1u << (id % 32);
                base_tokens_++;
            }
        }
        mask_ = base_mask_;
    }
    BackendOptions bo = backend_options_from_env();
    bo.cpu.n_threads = n_threads;
    backend_ = create_backend(device, *mc_, bo);
    backend_->bind_weights(*w_, placement);
}

DraftModel::~DraftModel() { backend_.reset(); }

const ModelConfig& DraftModel::config() const { return *mc_; }
const ModelWeights& DraftModel::weights() const { return *w_; }

void DraftModel::allocate(int n_ctx, KvType kv_type) {
    n_ctx_ = n_ctx;
    n_batch_ = std::min(n_ctx, 512);
    backend_->allocate(n_ctx, n_batch_, kv_type);
    logits_.assign(static_cast<size_t>(mc_->n_vocab), 0.0f);
    backend_->warm_up(1);
    resident_.clear();
    resident_.reserve(static_cast<size_t>(n_ctx));
}

namespace {

// The best of k selected logits' probability among them.
float top_confidence(const float* vals, int k) {
    if (!std::isfinite(vals[0])) return 0.0f;
    double z = 0;
    for (int i = 0; i < k; ++i) {
        if (std::isfinite(vals[i])) z += std::exp(static_cast<double>(vals[i]) - vals[0]);
    }
    return static_cast<float>(1.0 / z);
}

}  // namespace

double DraftModel::output_fraction() const {
    if (base_mask_.empty()) return 1.0;
    int64_t blocks = 0;
    for (uint32_t wd : base_mask_) blocks += wd != 0;
    return std::min(1.0, static_cast<double>(blocks * 32) / static_cast<double>(std::max<int64_t>(1, mc_->n_vocab)));
}

void DraftModel::follow_mask(const std::vector<int32_t>& seq, size_t common) {
    if (base_mask_.empty()) return;
    // The tokens beyond the common prefix were another sequence's (the cache's own drafts are
    // allowed tokens already): the tokens of earlier requests do not accumulate.
    if (common < masked_) {
        std::copy(base_mask_.begin(), base_mask_.end(), mask_.begin());
        masked_ = 0;
    }
    for (size_t i = masked_; i < seq.size(); ++i) {
        const auto id = static_cast<uint32_t>(seq[i]);
        mask_[id / 32] |= 1u << (id % 32);
    }
    masked_ = seq.size();
}

size_t DraftModel::cold_tokens(const std::vector<int32_t>& seq) const {
    return seq.size() - common_token_prefix(resident_, seq);
}

void DraftModel::select_next(const int32_t* tokens, int n, int pos, const TokenSelection& sel, int32_t* next,
                             float* conf) {
    int32_t ids[DRAFT_CONF_K];
    float vals[DRAFT_CONF_K];
    if (!backend_->forward_select_last(tokens, n, pos, sel, ids, vals)) {
        backend_->forward(tokens, n, pos, LogitsMode::Last, logits_.data());
        select_top_k(logits_.data(), static_cast<int64_t>(logits_.size()), sel.k, sel.allowed, ids, vals);
    }
    *next = ids[0];
    *conf = sel.k > 1 ? top_confidence(vals, sel.k) : 1.0f;
}

size_t DraftModel::sync(const std::vector<int32_t>& seq, const TokenSelection* sel, int32_t* first, float* conf) {
    const size_t n = seq.size();
    const size_t common = std::min(common_token_prefix(resident_, seq), sel != nullptr ? n - 1 : n);
    resident_.resize(common);
    backend_->truncate_kv(static_cast<int>(common));
    follow_mask(seq, common);
    for (size_t pos = common; pos < n;) {
        const size_t b = std::min(n - pos, static_cast<size_t>(n_batch_));
        const bool last = sel != nullptr && pos + b == n;
        const int32_t* tokens = seq.data() + pos;
        if (!last) {
            backend_->forward(tokens, static_cast<int>(b), static_cast<int>(pos), LogitsMode::None, nullptr);
        } else {
            select_next(tokens, static_cast<int>(b), static_cast<int>(pos), *sel, first, conf);
        }
        resident_.insert(resident_.end(), seq.begin() + static_cast<long>(pos), seq.begin() + static_cast<long>(pos + b));
        pos += b;
    }
    return n - common;
}

double DraftModel::prefill(const std::vector<int32_t>& prompt) {
    // The next draft needs at least one slot after the prompt.
    if (prompt.empty() || prompt.size() + 1 >= static_cast<size_t>(n_ctx_)) return 0;
    const double t0 = now_ms();
    return sync(prompt, nullptr, nullptr, nullptr) > 0 ? now_ms() - t0 : 0;
}

int DraftModel::draft(const std::vector<int32_t>& seq, int max, float p_min, std::vector<int32_t>& out,
                      double* prefill_ms, double* step_ms) {
    out.clear();
    *prefill_ms = *step_ms = 0;
    if (max <= 0 || seq.empty() || seq.size() >= static_cast<size_t>(n_ctx_)) return 0;
    const double t0 = now_ms();
    TokenSelection sel;  // the best allowed token (and its confidence: the DRAFT_CONF_K best)
    sel.k = p_min > 0 ? DRAFT_CONF_K : 1;
    sel.allowed = base_mask_.empty() ? nullptr : mask_.data();  // sync brings it up to seq
    int32_t t = 0;
    float conf = 1;
    const size_t forwarded = sync(seq, &sel, &t, &conf);
    const double t1 = now_ms();
    // After a draft of its own the cache lacks at most the last accepted draft token and the
    // model's token: that catch-up is part of drafting. More was generated without this model
    // (plain steps, prompt lookup's drafts in auto, a new prompt): a catch-up paid once, not by
    // each drafted token (charged to drafting, it made auto stop drafting after a run of
    // prompt-lookup steps, and drafting less lengthened the next catch-up).
    if (forwarded > DRAFT_OWN_CATCHUP) *prefill_ms = t1 - t0;
    // The first token is drafted whatever its confidence: its forward (the catch-up) is paid, and
    // a row more costs the verification less than a plain step's chance of it being right.
    for (int i = 0; i < max && (i == 0 || conf >= p_min); ++i) {
        out.push_back(t);
        if (i + 1 == max || resident_.size() + 1 >= static_cast<size_t>(n_ctx_)) break;
        const int pos = static_cast<int>(resident_.size());
        int32_t next = 0;
        select_next(&t, 1, pos, sel, &next, &conf);
        resident_.push_back(t);
        t = next;
    }
    *step_ms = now_ms() - (*prefill_ms > 0 ? t1 : t0);
    return static_cast<int>(out.size());
}

// ---- tuner ----

namespace {
constexpr double DECAY = 0.9;   // acceptance counts: about the last ten verifications
constexpr double EMA = 0.25;    // forward times
constexpr int PROBE = 32;       // auto: steps between probes of a drafter that did not pay
constexpr double PRIOR_SLOPE = 0.1;  // an unmeasured forward: T(1) x (1 + 0.1 per extra token) at least
constexpr double CARRY = 4;     // acceptance counts carried into the next request
}  // namespace

SpecTuner::SpecTuner() {
    for (int i = 0; i < DRAFTER_CLASSES; ++i) {
        acc_[i] = rej_[i] = 1;
        idle_[i] = 0;
    }
}

void SpecTuner::reset_request() {
    // The last request's estimate is the best prior of the next one's (a home assistant's
    // requests are alike), at the weight of CARRY observations so the request's own first
    // verifications move it at once; the prior 1 / 1 (a = 0.5) made `auto` wait PROBE steps of
    // every request before it tried the draft model again.
    // A drafter that does not pay by that estimate is probed at once: this request's text may
    // suit it better (a code answer after a chat one), and the draft model is warm now (it read
    // the prompt), not after steps without it.
    for (int s = 0; s < DRAFTER_CLASSES; ++s) {
        const double w = acc_[s] + rej_[s];
        if (w > CARRY) {
            acc_[s] *= CARRY / w;
            rej_[s] *= CARRY / w;
        }
        idle_[s] = PROBE - 1;
    }
}

double SpecTuner::acceptance(Drafter d) const {
    const int i = d.index();
    return acc_[i] / (acc_[i] + rej_[i]);
}

double SpecTuner::rate(Drafter d, int k) const {
    const double t1 = step_ms();
    if (t1 <= 0 || k <= 0) return 1.0;
    k = std::min(k, SPEC_DRAFT_MAX);
    const double a = acceptance(d);
    const double td = d.source == DraftSource::Model ? (draft_ms_ > 0 ? draft_ms_ : draft_prior_ * t1) : 0.0;
    double e = 1.0, ak = 1.0;
    for (int j = 1; j <= k; ++j) {
        ak *= a;
        e += ak;
    }
    const double c = cost(k + 1) + k * td;
    return c > 0 ? e * t1 / c : e;
}

double SpecTuner::cost(int n) const {
    if (fwd_ms_[n] > 0) return fwd_ms_[n];
    // Not measured: between the nearest measured lengths below and above it, on the line through
    // them (a forward's cost grows about linearly with its tokens); with none above, as the
    // largest measured below it. At least T(1) plus 10% a token (a bandwidth-bound forward's
    // prior), so an unknown length is tried where it would pay at that, and then known.
    int lo = 0, hi = 0;
    for (int m = 1; m < n; ++m) {
        if (fwd_ms_[m] > 0) lo = m;
    }
    for (int m = n + 1; m <= SPEC_DRAFT_MAX + 1 && hi == 0; ++m) {
        if (fwd_ms_[m] > 0) hi = m;
    }
    double est = lo > 0 ? fwd_ms_[lo] : 0;
    if (lo > 0 && hi > 0) est += (fwd_ms_[hi] - fwd_ms_[lo]) * (n - lo) / (hi - lo);
    return std::max(est, step_ms() * (1.0 + PRIOR_SLOPE * (n - 1)));
}

double SpecTuner::step_ms() const {
    if (fwd_ms_[1] > 0) return fwd_ms_[1];
    // Never a plain step (`--spec draft` verifies a draft every step): the shortest measured
    // forward over the prior's growth to its length.
    for (int n = 2; n <= SPEC_DRAFT_MAX + 1; ++n) {
        if (fwd_ms_[n] > 0) return fwd_ms_[n] / (1.0 + PRIOR_SLOPE * (n - 1));
    }
    return 0;
}

int SpecTuner::length(Drafter d, int max, bool must, bool may_probe) {
    max = std::min(max, SPEC_DRAFT_MAX);
    if (max <= 0) return 0;
    const double t1 = step_ms();
    if (t1 <= 0) return must ? max : 0;  // auto: a plain step first, to measure what drafting must beat
    const int i = d.index();
    int best_k = 0;
    double best = must ? -1.0 : 1.0;  // k = 0: one token per T(1)
    for (int k = 1; k <= max; ++k) {
        const double r = rate(d, k);
        if (r > best) {
            best = r;
            best_k = k;
        }
    }
    if (best_k > 0) {
        idle_[i] = 0;
        return best_k;
    }
    if (++idle_[i] >= PROBE && may_probe) {  // acceptance is only learned while drafting: look again now and then
        idle_[i] = 0;
        return std::min(2, max);
    }
    return 0;
}

void SpecTuner::forward_done(int n_tokens, double ms) {
    if (n_tokens < 1 || n_tokens > SPEC_DRAFT_MAX + 1 || ms <= 0) return;
    double& t = fwd_ms_[n_tokens];
    t = t > 0 ? (1 - EMA) * t + EMA * ms : ms;
}

void SpecTuner::draft_step_done(double ms) {
    if (ms <= 0) return;
    draft_ms_ = draft_ms_ > 0 ? (1 - EMA) * draft_ms_ + EMA * ms : ms;
}

void SpecTuner::verified(Drafter d, int proposed, int accepted) {
    const int i = d.index();
    acc_[i] = acc_[i] * DECAY + accepted;
    rej_[i] = rej_[i] * DECAY + (accepted < proposed ? 1 : 0);
}

}  // namespace jllm
