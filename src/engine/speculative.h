// engine/speculative.h — speculative decoding's parts (docs/speculative.md): the drafters
// (prompt lookup over the request's own tokens; a smaller model of the same vocabulary) and the
// tuner that picks each step's draft length from the measured acceptance and forward costs. The
// engine's decode loop verifies a draft with one batched forward and samples every position
// with the request's sampler, as without a draft (the draft accepted where the sampled token is
// it), so the output is the model's own, token for token.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "jllm_engine.h"

namespace jllm {

class Backend;
class GgufFile;
struct TokenSelection;
class Tokenizer;
struct ModelConfig;
struct ModelWeights;

constexpr int SPEC_DRAFT_MAX = 16;  // --draft-max at most
// Prompt lookup's match lengths. One token is enough to propose: whether such a match pays is the
// tuner's call, from the acceptance it measures for matches of each length apart (on the real
// pair's tool-call and home-assistant answers the next token follows a match of 1, 2, 3, 4 and
// 5-6 tokens 48%, 33%, 45%, 68% and ~50% of the time; docs/speculative.md).
constexpr int NGRAM_MIN = 1, NGRAM_MAX = 6;
// EngineConfig::draft_vocab's default on the CPU, whose output layer then computes only the
// allowed tokens' rows: Qwen2.5-Coder-0.5B drafting for the 1.5B, the ten prompts of
// tests/data/speculative/prompts.json, the draft model's time 14.2 -> 12.2 s at 84% -> 81% of
// its tokens accepted (docs/speculative.md).
constexpr int DRAFT_VOCAB_CPU = 32768;
// A draft's catch-up after a draft of its own: the last accepted draft token and the model's.
constexpr size_t DRAFT_OWN_CATCHUP = 2;
// A draft model's confidence in a token: its probability among the draft's DRAFT_CONF_K best
// logits (the backend's top-k selection; an upper bound of the probability over every token).
constexpr int DRAFT_CONF_K = 16;

// Prompt lookup: the longest suffix of seq[0, n) of NGRAM_MAX .. NGRAM_MIN tokens that occurs
// earlier in it; `out` gets the tokens that followed its latest earlier occurrence, at most
// `max`, and *match (where given) the suffix's length. Returns their count (0: no match). Reads
// only the sequence: no state, no memory.
int ngram_draft(const int32_t* seq, size_t n, int max, std::vector<int32_t>& out, int* match = nullptr);

enum class DraftSource { Ngram = 0, Model = 1 };

// What the tuner learns an acceptance for: the draft model, or prompt lookup by the length of
// its match.
struct Drafter {
    DraftSource source = DraftSource::Model;
    int match = 0;  // prompt lookup: NGRAM_MIN .. NGRAM_MAX

    static constexpr Drafter model() { return {DraftSource::Model, 0}; }
    static constexpr Drafter lookup(int match) { return {DraftSource::Ngram, match}; }
    // 0: the draft model; 1 .. NGRAM_MAX: prompt lookup's match lengths (clamped).
    constexpr int index() const {
        return source == DraftSource::Model ? 0 : std::clamp(match, NGRAM_MIN, NGRAM_MAX);
    }
};
constexpr int DRAFTER_CLASSES = NGRAM_MAX + 1;

// A draft model: its own weights, backend and KV cache, kept in step with the target's sequence
// (the common prefix reused, the rest prefilled on the next draft).
class DraftModel {
public:
    // Opens and binds the file; throws JllmError when it cannot serve `target` (another
    // vocabulary: size or any token's text differs). vocab: the drafts' tokens are the ids below
    // it, the special tokens (every type but normal) and the tokens of the sequence drafted
    // from, the output layer computed for their blocks alone where the backend can (0, or the
    // vocabulary's size or more: every token).
    DraftModel(const std::string& path, DeviceKind device, int n_threads, WeightPlacement placement,
               const Tokenizer& target, int vocab = 0);
    ~DraftModel();
    DraftModel(const DraftModel&) = delete;
    DraftModel& operator=(const DraftModel&) = delete;

    const ModelConfig& config() const;
    const ModelWeights& weights() const;
    const Backend& backend() const { return *backend_; }
    const std::string& name() const { return name_; }
    void allocate(int n_ctx, KvType kv_type);

    // Greedy continuation of seq (its tokens up to the last one are prefilled where the cache
    // does not hold them yet): at most `max` tokens into `out`, ending before the first token after
    // the first whose confidence (DRAFT_CONF_K) is below p_min (0: never). *prefill_ms
    // gets the time spent bringing the cache up to seq where that was more than
    // DRAFT_OWN_CATCHUP tokens, *step_ms the rest.
    int draft(const std::vector<int32_t>& seq, int max, float p_min, std::vector<int32_t>& out, double* prefill_ms,
              double* step_ms);
    // Tokens of seq its cache does not hold (what the next draft prefills first).
    size_t cold_tokens(const std::vector<int32_t>& seq) const;
    // Brings the cache up to the whole of `prompt` (the request's prompt phase, beside the
    // target's prefill), so the decode's first draft forwards only the sampled token. Returns
    // the milliseconds it took (0: the cache held the prompt).
    double prefill(const std::vector<int32_t>& prompt);
    void clear() { resident_.clear(); }  // the next draft or prefill starts from an empty cache
    // Tokens a draft may propose before any sequence's own are added (the whole vocabulary
    // where it is not restricted).
    int64_t base_tokens() const { return base_tokens_; }
    // The bytes of its output layer a draft token reads, over the whole layer's (1: every row).
    double output_fraction() const;

private:
    std::unique_ptr<GgufFile> file_;
    std::unique_ptr<ModelConfig> mc_;
    std::unique_ptr<ModelWeights> w_;
    std::unique_ptr<Backend> backend_;
    std::string name_;
    std::vector<int32_t> resident_;
    std::vector<float> logits_;
    int n_ctx_ = 0, n_batch_ = 0;
    // The restricted vocabulary (empty: none): bit t % 32 of word t / 32 for token t; the base
    // (low ids and special tokens), and the mask: the base and the first masked_ tokens of the
    // sequence the cache follows (sync keeps it with the cache's prefix).
    std::vector<uint32_t> base_mask_, mask_;
    size_t masked_ = 0;
    int64_t base_tokens_ = 0;
    // sync's part: the cache keeps `common` tokens of seq; the mask drops the tokens of what it
    // no longer holds (another request: back to the base) and takes seq's.
    void follow_mask(const std::vector<int32_t>& seq, size_t common);
    // Forwards what of seq the cache does not hold, after truncating it to their common prefix
    // (at least the last token where `sel` is given: *first gets the best allowed token after it,
    // *conf its confidence where sel->k is DRAFT_CONF_K). Returns the tokens forwarded.
    size_t sync(const std::vector<int32_t>& seq, const TokenSelection* sel, int32_t* first, float* conf);
    // One step's selection after `n` tokens from `pos` (the fallback: the logits on the host).
    void select_next(const int32_t* tokens, int n, int pos, const TokenSelection& sel, int32_t* next, float* conf);
};

// The draft length of each step: the k in 0..max that maximizes the expected tokens per unit of
// time, E(k) / cost(k), with E(k) = 1 + a + .. + a^k for the drafter's recent per-token
// acceptance a (per Drafter: the draft model, prompt lookup per match length) and
// cost(k) = T(k + 1) + k * t_draft from the measured forward times T(n) (an
// n not measured yet costs as the line through the nearest measured below and above it, or as
// the largest below where none is above, and at least T(1) x (1 + 0.1 (n - 1)):
// tried where that would pay, then known; t_draft includes the draft model's catch-up after a
// draft of its own (DRAFT_OWN_CATCHUP); T(1), where no plain step was measured (`draft` verifies
// every step), estimated from the shortest measured forward; before any forward is
// measured only a drafter that was asked for drafts; t_draft before it is measured: the prior,
// a fraction of T(1)). Acceptance: decayed counts, carried into the next request at the weight
// of a few verifications (a request's own verifications move it at once); the forward times are
// the engine's.
class SpecTuner {
public:
    SpecTuner();
    // A new request: the acceptance estimates kept at a weight of CARRY, and a drafter that does
    // not pay probed at its first step.
    void reset_request();
    // 0: drafting does not pay now. `must`: the drafter was asked for (a length >= 1 always).
    // `may_probe`: a drafter that does not pay may still be tried now and then (false where the
    // try itself is dear: a draft model whose cache does not hold the prompt; and for prompt
    // lookup, whose proposals the engine scores against the sampled token when it does not draft
    // them, so its acceptance is learned without trying).
    int length(Drafter d, int max, bool must, bool may_probe = true);
    // Expected tokens per T(1) of a k-token draft from `d` now, E(k) T(1) / cost(k) (k = 0, or
    // nothing measured yet: 1): what `auto` compares between a prompt-lookup match and the draft
    // model's draft.
    double rate(Drafter d, int k) const;
    void forward_done(int n_tokens, double ms);
    void draft_step_done(double ms);  // one draft-model token
    // Until a draft token's time is measured it is taken as this fraction of a model step (the
    // draft's weight bytes over the model's: decode reads every weight once).
    void set_draft_prior(double fraction_of_step) { draft_prior_ = fraction_of_step; }
    void verified(Drafter d, int proposed, int accepted);
    double acceptance(Drafter d) const;

private:
    double fwd_ms_[SPEC_DRAFT_MAX + 2] = {};  // EMA per batch size; 0: not measured
    double draft_ms_ = 0;
    double draft_prior_ = 0;
    double acc_[DRAFTER_CLASSES], rej_[DRAFTER_CLASSES];  // decayed counts, from 1 / 1 (a = 0.5)
    int idle_[DRAFTER_CLASSES];  // steps since the drafter last paid (auto: probed every PROBE steps)
    double cost(int n) const;
    double step_ms() const;  // T(1): measured, or estimated from the shortest measured forward
};

}  // namespace jllm
