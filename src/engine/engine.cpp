// engine/engine.cpp — the Engine: loads a model, picks a backend, keeps the resident token
// sequence for prefix reuse, and runs the generate loop (prefill, sample, stream, stop).
#include "jllm_engine.h"

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <mutex>
#include <thread>
#include <unordered_map>

#include <xxhash.h>

#include "backend/backend.h"
#include "backend/backend_registry.h"
#include "backend/cpu/rope.h"
#include "core/error.h"
#include "core/log.h"
#include "core/timer.h"
#include "engine/chat_template.h"
#include "engine/constraint.h"
#include "engine/env_options.h"
#include "engine/sampler.h"
#include "engine/speculative.h"
#include "engine/text_stream.h"
#include "engine/tool_calls.h"
#include "gguf/gguf.h"
#include "jetson/jetson_hal.h"
#include "jetson/thermal_guard.h"
#include "memory/engine_memory.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "persistence/kv_file.h"
#include "persistence/kv_store.h"
#include "sessions/session_cache.h"
#include "tokenizer/streaming_detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace jllm {

const char* kv_type_name(KvType t) { return t == KvType::Int8 ? "int8" : "fp16"; }

const char* gguf_file_type_name(uint32_t file_type) {
    // llama_ftype; 4-6 and 33-35 are retired values.
    static const char* const names[] = {
        "F32",     "F16",    "Q4_0",   "Q4_1",    "",       "",      "",      "Q8_0",   "Q5_0",  "Q5_1",
        "Q2_K",    "Q3_K_S", "Q3_K_M", "Q3_K_L",  "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K", "IQ2_XXS",
        "IQ2_XS",  "Q2_K_S", "IQ3_XS", "IQ3_XXS", "IQ1_S",  "IQ4_NL", "IQ3_S", "IQ3_M",  "IQ2_S", "IQ2_M",
        "IQ4_XS",  "IQ1_M",  "BF16",   "",        "",       "",       "TQ1_0", "TQ2_0"};
    return file_type < sizeof names / sizeof names[0] ? names[file_type] : "";
}

const char* cache_source_name(CacheSource s) {
    switch (s) {
        case CacheSource::None: return "none";
        case CacheSource::Resident: return "resident";
        case CacheSource::Ram: return "ram";
        case CacheSource::Disk: return "disk";
    }
    return "?";
}


const char* finish_reason_name(FinishReason r) {
    switch (r) {
        case FinishReason::Stop: return "stop";
        case FinishReason::Length: return "length";
        case FinishReason::Cancelled: return "cancelled";
        case FinishReason::Error: return "error";
        case FinishReason::ToolCalls: return "tool_calls";
    }
    return "?";
}

struct Engine::Impl {
    EngineConfig cfg;
    std::unique_ptr<GgufFile> file;
    ModelConfig mc;
    ModelWeights weights;
    std::unique_ptr<Tokenizer> tok;
    std::unique_ptr<Backend> backend;
    ChatTemplateKind chat_kind = ChatTemplateKind::ChatML;
    std::string gguf_template;
    int n_ctx = 0;
    int n_batch = 0;
    std::vector<int32_t> resident;  // tokens whose K/V are in the cache, in order
    // Sessions: snapshots beside the resident sequence (RAM, KV folder). The resident sequence is
    // `dirty` from a generation until checkpoint() stored it under `resident_session`.
    std::unique_ptr<SessionCache> sessions;
    KvShape shape;
    std::string resident_session;
    bool resident_dirty = false;
    void store_resident();          // checkpoint()'s work, when dirty
    // --cache-reuse: chunks of the cached sequence placed after the common prefix, their K
    // already moved to the new positions (reuse_prefix plans them, prefill writes them).
    struct ReuseChunk {
        int at = 0, len = 0;
        KvBlob kv;
    };
    std::vector<ReuseChunk> reuse_chunks;
    std::vector<float> inv_freq;  // RoPE's, for moving K
    void plan_chunk_reuse(const std::vector<int32_t>& prompt, size_t common, const std::vector<int32_t>& src,
                          const KvBlob* src_kv, GenerateStats& st);
    void prefill_range(const std::vector<int32_t>& tokens, size_t from, size_t to, float* last_logits);
    // Makes the resident sequence the longest cached prefix of `prompt` (at most all but its last
    // token): kept, or restored from a snapshot; plans --cache-reuse's chunks after it. Returns
    // the prefix's length.
    // `allow` false: nothing is reused (llama-server's cache_prompt false).
    size_t reuse_prefix(const std::vector<int32_t>& prompt, const std::string& session_id, bool allow, GenerateStats& st);
    std::shared_ptr<const VocabTrie> vocab_trie;  // the vocabulary's bytes for token masks, built on first use
    std::vector<float> logits;      // [n_vocab] (or [n_batch, n_vocab] for eval)
    // Speculative decoding: the draft model (none: prompt lookup only), the draft-length tuner,
    // and the verification forward's logits [draft_max + 1][n_vocab].
    std::unique_ptr<DraftModel> draft;
    SpecTuner tuner;
    std::vector<float> spec_logits;
    // Tokens drafted per verification at most: --draft-max, lowered to what the backend verifies
    // bit for bit (Backend::exact_rows), so greedy output stays the plain decode's.
    int draft_cap = 0;
    std::atomic<bool> cancel{false};
    std::atomic<bool> busy{false};
    ModelInfo info;
    mutable std::mutex info_mu;
    // Memory budget, OOM guard and thermal policy (jllm_memory.h, jllm_jetson.h).
    MemoryReport mem_report;  // guarded by info_mu
    std::string query_root = "/";  // sysfs root for the any-thread queries, guarded by info_mu
    OomGuard oom;
    ThermalGuard thermal;
    bool runtime_guards(GenerateStats& st);

    void prefill(const std::vector<int32_t>& tokens, size_t from, float* last_logits);

    // The backend goes first: it may hold `logits` pinned (pin_host_buffer).
    ~Impl() {
        draft.reset();
        backend.reset();
    }
};

Engine::Engine() : impl_(std::make_unique<Impl>()) {}
Engine::~Engine() = default;

bool Engine::loaded() const { return impl_->backend != nullptr; }

void Engine::unload() {
    Impl& m = *impl_;
    m.draft.reset();
    m.backend.reset();
    m.spec_logits = {};
    m.draft_cap = 0;
    m.tuner = SpecTuner{};
    m.vocab_trie.reset();
    m.tok.reset();
    m.weights = ModelWeights{};
    m.sessions.reset();  // finishes its queued writes
    m.file.reset();
    m.resident.clear();
    m.resident_dirty = false;
    m.resident_session.clear();
    std::lock_guard<std::mutex> lk(m.info_mu);
    m.info = ModelInfo{};
    m.mem_report = MemoryReport{};
}

Status Engine::load(const EngineConfig& config) {
    unload();
    Impl& m = *impl_;
    m.cfg = config;
    const double t0 = now_ms();
    try {
        m.file = GgufFile::open(config.model_path);
        m.mc = load_model_config(*m.file);
        m.weights = bind_model_weights(*m.file, m.mc);
        m.tok = Tokenizer::from_gguf(*m.file);
        m.gguf_template = std::string(m.file->get_string("tokenizer.chat_template").value_or(""));
        m.chat_kind = parse_chat_template_name(config.chat_template, m.gguf_template, m.mc.arch);

        const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
        const int threads = config.n_threads > 0 ? config.n_threads : cores;
        BackendOptions bo = backend_options_from_env();
        bo.cpu.n_threads = threads;
        m.backend = create_backend(config.device, m.mc, bo);

        int n_ctx = config.n_ctx;
        if (n_ctx > m.mc.n_ctx_train) {
            throw JllmError(strfmt("context %d exceeds the model's trained context %" PRId64, n_ctx, m.mc.n_ctx_train));
        }
        if (n_ctx > 0 && n_ctx < 8) throw JllmError(strfmt("context %d is too small (minimum 8)", n_ctx));
        m.backend->bind_weights(m.weights, config.weights);
        // Speculative decoding's draft model, on the model's device, before the memory plan.
        if (config.spec != SpecMode::Off && (config.draft_max < 1 || config.draft_max > SPEC_DRAFT_MAX)) {
            throw JllmError(strfmt("--draft-max %d: must be 1..%d", config.draft_max, SPEC_DRAFT_MAX));
        }
        // The backend's exact batch is known once the weights are bound (CUDA: the dp4a path).
        if (config.spec != SpecMode::Off) {
            m.draft_cap = std::min(config.draft_max, m.backend->exact_rows() - 1);
            const bool wants_draft = !config.draft_model_path.empty() &&
                                     (config.spec == SpecMode::Auto || config.spec == SpecMode::Draft);
            if (m.draft_cap < 1 && wants_draft) {  // refused before it loads
                throw JllmError(strfmt("--draft: the %s backend verifies no batch bit for bit with this model's "
                                       "weight types, so a draft model cannot be used",
                                       m.backend->name()));
            }
            if (m.draft_cap < 1) {
                JLLM_LOG_WARN("[engine] speculative decoding off (--spec %s): the %s backend verifies no batch bit "
                              "for bit with this model's weight types",
                              spec_mode_name(config.spec), m.backend->name());
            } else if (m.draft_cap < config.draft_max) {
                JLLM_LOG_INFO("[engine] speculative decoding: drafts of at most %d tokens (--draft-max %d): the %s "
                              "backend's verification rows are one-token steps' bits up to %d tokens",
                              m.draft_cap, config.draft_max, m.backend->name(), m.draft_cap + 1);
            }
        }
        if (!config.draft_model_path.empty()) {
            if (config.spec != SpecMode::Auto && config.spec != SpecMode::Draft) {
                throw JllmError(strfmt("a draft model is loaded only with --spec auto or draft (given: --spec %s)",
                                       spec_mode_name(config.spec)));
            }
            const DeviceKind dd = std::string(m.backend->name()) == "cuda" ? DeviceKind::Cuda : DeviceKind::Cpu;
            if (config.draft_vocab < -1) {
                throw JllmError(strfmt("--draft-vocab %d: must be a token count, 0 (every token) or -1 (the device's "
                                       "default)",
                                       config.draft_vocab));
            }
            if (!(config.draft_p_min >= 0.0f && config.draft_p_min <= 1.0f)) {
                throw JllmError(strfmt("--draft-p-min %g: must be a probability in [0, 1]", config.draft_p_min));
            }
            const int vocab = config.draft_vocab >= 0 ? config.draft_vocab : dd == DeviceKind::Cpu ? DRAFT_VOCAB_CPU : 0;
            m.draft = std::make_unique<DraftModel>(config.draft_model_path, dd, threads, config.weights, *m.tok, vocab);
        } else if (config.spec == SpecMode::Draft) {
            throw JllmError("--spec draft needs a draft model (--draft FILE)");
        }
        // Memory: choose (or refuse) n_ctx from the budget before anything is allocated.
        MemoryBudget budget(BudgetConfig{std::max(config.mem_margin_mb, 0) * MIB,
                                         std::max(config.max_memory_mb, 0) * MIB, config.sysfs_root});
        DraftPlan dp;
        if (m.draft) dp = DraftPlan{&m.draft->config(), &m.draft->weights(), &m.draft->backend()};
        n_ctx = plan_context(budget, config, m.mc, m.weights, *m.backend, threads, dp);
        m.n_ctx = n_ctx;
        m.n_batch = std::min(n_ctx, 512);
        m.backend->allocate(m.n_ctx, m.n_batch, config.kv_type);
        if (m.draft) {
            m.draft->allocate(m.n_ctx, config.kv_type);
            // The bytes a token reads: the weights but the embedding table (one row a token, unless
            // it is the output layer too), for the draft model less the part of its output layer its
            // restricted vocabulary leaves out.
            auto read_bytes = [](const ModelWeights& w, double out_fraction) {
                const double out = static_cast<double>(w.output.nbytes);
                const double emb = w.token_embd.data == w.output.data ? 0.0 : static_cast<double>(w.token_embd.nbytes);
                return std::max(1.0, static_cast<double>(w.total_bytes) - emb - out * (1.0 - out_fraction));
            };
            m.tuner.set_draft_prior(read_bytes(m.draft->weights(), m.draft->output_fraction()) /
                                    read_bytes(m.weights, 1.0));
        }
        if (config.spec != SpecMode::Off) {
            m.spec_logits.assign(static_cast<size_t>(config.draft_max + 1) * static_cast<size_t>(m.mc.n_vocab), 0.0f);
            m.backend->pin_host_buffer(m.spec_logits.data(), m.spec_logits.size() * sizeof(float));
        }
        m.logits.assign(static_cast<size_t>(m.mc.n_vocab), 0.0f);
        m.backend->pin_host_buffer(m.logits.data(), m.logits.size() * sizeof(float));
        m.inv_freq = rope_inv_freq(m.mc, m.weights.rope_freqs.present()
                                             ? reinterpret_cast<const float*>(m.weights.rope_freqs.data)
                                             : nullptr);
        if (config.cache_reuse < 0) throw JllmError(strfmt("--cache-reuse %d: must be >= 0", config.cache_reuse));
        m.backend->warm_up(SamplingParams{}.top_k);  // first-use costs at load, not in the first request
        m.resident.reserve(static_cast<size_t>(m.n_ctx));  // push_back in decode never reallocates
        MemoryReport report =
            finish_memory_plan(budget, config, *m.backend, m.n_ctx, m.oom, m.draft ? &m.draft->backend() : nullptr);
        m.shape = kv_shape(*m.file, m.mc, config.kv_type);
        std::unique_ptr<KvDiskStore> disk;
        if (!config.kv_dir.empty()) {
            if (config.kv_dir_max_mb <= 0) throw JllmError(strfmt("--kv-dir-max %d: must be > 0 MB", config.kv_dir_max_mb));
            disk = std::make_unique<KvDiskStore>(config.kv_dir, config.kv_dir_max_mb * MIB, m.shape);
        }
        m.sessions = std::make_unique<SessionCache>(report.sessions, std::move(disk));
        m.thermal.configure(config.sysfs_root, ThermalConfig{config.thermal_pace_c, config.thermal_stop_c});
        std::lock_guard<std::mutex> lk(m.info_mu);
        m.mem_report = report;
        m.query_root = config.sysfs_root;
    } catch (const std::exception& e) {
        unload();
        return Status::error(e.what());
    }
    ModelInfo info;
    info.path = config.model_path;
    info.arch = m.mc.arch;
    info.name = m.mc.name;
    info.backend = m.backend->name();
    info.device = m.backend->device_description();
    info.n_layer = m.mc.n_layer;
    info.n_embd = m.mc.n_embd;
    info.n_ff = m.mc.n_ff;
    info.n_head = m.mc.n_head;
    info.n_head_kv = m.mc.n_head_kv;
    info.head_dim = m.mc.head_dim;
    info.n_vocab = m.mc.n_vocab;
    info.n_ctx = m.n_ctx;
    info.n_ctx_train = m.mc.n_ctx_train;
    info.file_bytes = m.file->file_size();
    info.weight_bytes = m.weights.total_bytes;
    const bool has_output = m.file->find_tensor("output.weight") != nullptr;
    for (const GgufTensorInfo& t : m.file->tensors()) {
        info.n_params += static_cast<uint64_t>(t.n_elements());
        const bool one_row = t.name == "token_embd.weight" && has_output;
        info.decode_weight_bytes += one_row ? t.nbytes / static_cast<uint64_t>(std::max<int64_t>(1, t.ne[1])) : t.nbytes;
    }
    info.kv_bytes = static_cast<uint64_t>(Backend::kv_bytes_for(m.mc, m.n_ctx, config.kv_type));
    info.kv_type = kv_type_name(config.kv_type);
    if (const std::optional<uint64_t> ft = m.file->get_uint("general.file_type")) {
        info.file_type = gguf_file_type_name(static_cast<uint32_t>(*ft));
    }
    info.chat_template_text = m.gguf_template;
    info.chat_template = chat_template_kind_name(m.chat_kind);
    info.fingerprint = model_fingerprint(*m.file);
    info.tools = tool_format(m.chat_kind, m.gguf_template) != ToolFormat::None;
    info.thinking = m.chat_kind == ChatTemplateKind::Qwen3;
    info.spec = spec_mode_name(config.spec);
    info.draft_max = m.draft_cap;  // 0 with --spec off
    if (m.draft) {
        info.draft_path = config.draft_model_path;
        info.draft_name = m.draft->name();
        info.draft_vocab = m.draft->base_tokens();
        info.draft_p_min = config.draft_p_min;
    }
    info.load_ms = now_ms() - t0;
    std::lock_guard<std::mutex> lk(m.info_mu);
    m.info = info;
    return Status::success();
}

Status Engine::load_vocabulary(const std::string& path) {
    unload();
    Impl& m = *impl_;
    try {
        m.file = GgufFile::open(path);
        m.tok = Tokenizer::from_gguf(*m.file);
    } catch (const std::exception& e) {
        unload();
        return Status::error(e.what());
    }
    return Status::success();
}

int64_t Engine::vocab_size() const { return impl_->tok ? impl_->tok->n_vocab() : 0; }

std::vector<int32_t> Engine::tokenize(const std::string& text, bool parse_special, bool add_bos) const {
    if (!impl_->tok) return {};
    try {
        return impl_->tok->encode(text, add_bos && impl_->tok->add_bos(), parse_special);
    } catch (const std::exception& e) {
        JLLM_LOG_WARN("tokenize: %s", e.what());
        return {};
    }
}

std::string Engine::detokenize(const std::vector<int32_t>& ids) const {
    if (!impl_->tok) return {};
    try {
        return impl_->tok->decode(ids);
    } catch (const std::exception& e) {  // an id outside the vocabulary
        JLLM_LOG_WARN("detokenize: %s", e.what());
        return {};
    }
}

std::string Engine::render_chat(const std::vector<ChatMessage>& messages, const ChatRenderOptions& options) const {
    const Impl& m = *impl_;
    ChatRenderOptions opt = options;
    if (opt.bos_token.empty() && m.tok && m.tok->bos_id() >= 0) opt.bos_token = m.tok->token_text(m.tok->bos_id());
    return jllm::render_chat(m.chat_kind, messages, opt, m.gguf_template);
}

Status Engine::check_tools(const ToolRequest& tools) const {
    const Impl& m = *impl_;
    if (!m.backend) return Status::error("no model loaded");
    if (tools.choice == ToolChoice::None) return Status::success();
    try {
        (void)compile_output_constraint(tool_constraint(tool_format(m.chat_kind, m.gguf_template), tools));
    } catch (const std::exception& e) {
        return Status::error(e.what());
    }
    return Status::success();
}

ModelInfo Engine::model_info() const {
    std::lock_guard<std::mutex> lk(impl_->info_mu);
    return impl_->info;
}

MemoryReport Engine::memory_report() const {
    MemoryReport r;
    std::string root;
    {
        std::lock_guard<std::mutex> lk(impl_->info_mu);
        r = impl_->mem_report;
        root = impl_->query_root;
    }
    r.available_now = read_meminfo(root).available;
    if (impl_->backend) r.device_used = impl_->backend->memory().device_used;
    const ProcessMemory pm = read_process_memory(root);
    r.rss_now = pm.rss;
    r.rss_peak = pm.rss_peak;
    return r;
}

LiveStats Engine::live_stats() const {
    std::string root;
    {
        std::lock_guard<std::mutex> lk(impl_->info_mu);
        root = impl_->query_root;
    }
    return JetsonHal(root).live();
}

// Once per generated token: the OOM guard and the thermal policy. False ends the generation
// (finish reason `length`); pacing sleeps here. One clock read per token between file reads.
bool Engine::Impl::runtime_guards(GenerateStats& st) {
    if (!oom.check()) {
        st.oom_events++;
        JLLM_LOG_WARN("[engine] OOM guard: MemAvailable %s is below %s; generation ended (finish_reason length)",
                      format_mb(oom.last_available()).c_str(), format_mb(oom.threshold()).c_str());
        return false;
    }
    const ThermalAction a = thermal.step();
    if (a == ThermalAction::Stop) {
        st.thermal_events++;
        JLLM_LOG_WARN("[engine] thermal: %.1f C reached the stop temperature %.1f C; generation ended",
                      thermal.last_c(), thermal.stop_c());
        return false;
    }
    if (a == ThermalAction::Pace) {
        st.thermal_events++;
        std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int64_t>(thermal.pause_ms() * 1000.0)));
    }
    return true;
}

const std::vector<int32_t>& Engine::resident_tokens() const { return impl_->resident; }

const std::vector<float>& Engine::last_logits() const { return impl_->logits; }

void Engine::clear_cache() {
    impl_->resident.clear();
    if (impl_->draft) impl_->draft->clear();
    impl_->resident_dirty = false;
}

void Engine::Impl::store_resident() {
    if (!resident_dirty) return;
    resident_dirty = false;
    if (!sessions || !sessions->enabled() || resident.empty()) return;
    const std::string key = SessionCache::key_for(resident_session, resident);
    if (sessions->holds(key, resident)) return;
    auto s = std::make_shared<KvSnapshot>();
    s->key = key;
    s->session_id = resident_session;
    s->tokens = resident;
    backend->read_kv(0, static_cast<int>(resident.size()), s->kv);
    sessions->put(std::move(s));
}

void Engine::checkpoint() {
    Impl& m = *impl_;
    if (!m.backend) return;
    bool expected = false;
    if (!m.busy.compare_exchange_strong(expected, true)) return;  // a generation runs: it will
    try {
        m.store_resident();
    } catch (const std::exception& e) {
        JLLM_LOG_WARN("[engine] session snapshot failed: %s", e.what());
    }
    m.busy.store(false);
}

SessionCacheStats Engine::session_stats() const {
    return impl_->sessions ? impl_->sessions->stats() : SessionCacheStats{};
}

size_t Engine::Impl::reuse_prefix(const std::vector<int32_t>& prompt, const std::string& session_id, bool allow,
                                  GenerateStats& st) {
    if (!allow) {  // the prompt is evaluated from the start; what is resident is kept as a snapshot first
        if (resident_dirty && !resident.empty()) store_resident();
        st.cache_source = CacheSource::None;
        if (sessions) sessions->count(st.cache_source, 0);
        return 0;
    }
    const size_t limit = prompt.size() - 1;  // one token at least is prefilled: fresh logits
    size_t common = std::min(common_token_prefix(resident, prompt), limit);
    st.cache_source = common > 0 ? CacheSource::Resident : CacheSource::None;
    SessionCandidate cand;
    if (sessions && sessions->enabled()) {
        cand = sessions->find(prompt, session_id.empty() ? std::string() : SessionCache::key_for(session_id, {}), common);
    }
    const size_t c = std::min(cand.common, limit);
    // What the resident sequence holds past `common` is about to be overwritten: stored first.
    if (resident_dirty && (c > common || common < resident.size())) store_resident();
    uint64_t restored = 0;
    if (cand.snap && c > common) {
        const double t0 = now_ms();
        const int from = static_cast<int>(common), to = static_cast<int>(c);
        backend->truncate_kv(from);
        backend->write_kv_view(from, kv_view(cand.snap->kv, from, to));
        resident.assign(prompt.begin(), prompt.begin() + static_cast<long>(c));
        restored = static_cast<uint64_t>(kv_row_bytes(mc, shape.type).layer(to - from)) * static_cast<uint64_t>(mc.n_layer);
        st.restore_ms = now_ms() - t0 + cand.load_ms;
        st.restored_tokens = to - from;
        st.cache_source = cand.source;
        common = c;
    }
    if (sessions) sessions->count(st.cache_source, restored);
    if (cfg.cache_reuse > 0) {
        const double t0 = now_ms();
        if (cand.snap && st.cache_source != CacheSource::Resident && st.cache_source != CacheSource::None) {
            plan_chunk_reuse(prompt, common, cand.snap->tokens, &cand.snap->kv, st);
        } else {
            plan_chunk_reuse(prompt, common, resident, nullptr, st);
        }
        if (st.shifted_tokens > 0) st.restore_ms += now_ms() - t0;
    }
    return common;
}

namespace {

// Runs `fn` with the engine to itself (no generation running), errors as a Status.
template <typename F>
Status exclusive(Engine::Impl& m, F&& fn) {
    if (!m.backend) return Status::error("no model loaded");
    bool expected = false;
    if (!m.busy.compare_exchange_strong(expected, true)) return Status::error("a generation is running");
    Status out;
    try {
        fn();
    } catch (const std::exception& e) {
        out = Status::error(e.what());
    }
    m.busy.store(false);
    return out;
}

}  // namespace

Status Engine::save_sequence(const std::string& path, int* n_tokens, int64_t* bytes) {
    Impl& m = *impl_;
    if (m.backend && m.resident.empty()) return Status::error("the cache holds no sequence to save");
    return exclusive(m, [&] {
        KvSnapshot s;
        s.key = "file";
        s.session_id = m.resident_session;
        s.tokens = m.resident;
        m.backend->read_kv(0, static_cast<int>(m.resident.size()), s.kv);
        std::string why;
        if (write_kv_file(path, s, m.shape, why) != KvFileError::None) throw JllmError(why);
        if (n_tokens) *n_tokens = static_cast<int>(s.tokens.size());
        if (bytes) *bytes = static_cast<int64_t>(s.kv.bytes.size());
    });
}

Status Engine::restore_sequence(const std::string& path, int* n_tokens, int64_t* bytes) {
    Impl& m = *impl_;
    return exclusive(m, [&] {
        KvSnapshot s;
        std::string why;
        if (read_kv_file(path, m.shape, s, why) != KvFileError::None) throw JllmError(why);
        if (s.tokens.size() >= static_cast<size_t>(m.n_ctx)) {
            throw JllmError(strfmt("the snapshot has %zu tokens; the context holds %d", s.tokens.size(), m.n_ctx));
        }
        for (int32_t id : s.tokens) {
            if (id < 0 || id >= m.mc.n_vocab) throw JllmError(strfmt("the snapshot's token id %d is out of range", id));
        }
        m.store_resident();
        m.backend->truncate_kv(0);
        m.backend->write_kv(0, s.kv);
        m.resident = s.tokens;
        m.resident_session = s.session_id;
        m.resident_dirty = true;  // stored as a session snapshot before it is replaced
        if (n_tokens) *n_tokens = static_cast<int>(s.tokens.size());
        if (bytes) *bytes = static_cast<int64_t>(s.kv.bytes.size());
    });
}

void Engine::cancel() { impl_->cancel.store(true); }

// Prefills tokens[from, to) after the resident [0, from) in batches; the last batch's last
// logits go to `last_logits` (none when null).
void Engine::Impl::prefill_range(const std::vector<int32_t>& tokens, size_t from, size_t to, float* last_logits) {
    size_t pos = from;
    while (pos < to) {
        const size_t n = std::min(to - pos, static_cast<size_t>(n_batch));
        const bool last = pos + n == to && last_logits != nullptr;
        backend->forward(tokens.data() + pos, static_cast<int>(n), static_cast<int>(pos),
                         last ? LogitsMode::Last : LogitsMode::None, last ? last_logits : nullptr);
        resident.insert(resident.end(), tokens.begin() + static_cast<long>(pos),
                        tokens.begin() + static_cast<long>(pos + n));
        pos += n;
    }
}

// Prefills tokens[from..] (the resident prefix [0, from) is already cached), placing the planned
// reused chunks where they go; writes the last token's logits.
void Engine::Impl::prefill(const std::vector<int32_t>& tokens, size_t from, float* last_logits) {
    resident.resize(from);
    backend->truncate_kv(static_cast<int>(from));
    size_t pos = from;
    for (ReuseChunk& c : reuse_chunks) {
        prefill_range(tokens, pos, static_cast<size_t>(c.at), nullptr);
        backend->write_kv(c.at, c.kv);
        resident.insert(resident.end(), tokens.begin() + c.at, tokens.begin() + c.at + c.len);
        pos = static_cast<size_t>(c.at + c.len);
    }
    reuse_chunks.clear();
    prefill_range(tokens, pos, tokens.size(), last_logits);
}

// --cache-reuse: after `common`, chunks of at least cfg.cache_reuse tokens of `src` (whose K/V are
// `src_kv`, positions from 0, or the backend's own cache when null) that reappear in the prompt,
// found through an index of src's n-grams, in order, never covering the prompt's last token.
void Engine::Impl::plan_chunk_reuse(const std::vector<int32_t>& prompt, size_t common, const std::vector<int32_t>& src,
                                    const KvBlob* src_kv, GenerateStats& st) {
    reuse_chunks.clear();
    const size_t N = static_cast<size_t>(cfg.cache_reuse);
    if (N == 0 || prompt.size() < common + N + 1 || src.size() < common + N) return;
    auto key = [&](const int32_t* p) { return XXH3_64bits(p, N * sizeof(int32_t)); };
    std::unordered_multimap<uint64_t, size_t> grams;
    grams.reserve(src.size() - common);
    for (size_t j = common; j + N <= src.size(); ++j) grams.emplace(key(src.data() + j), j);
    const size_t end = prompt.size() - 1;  // the last token is always prefilled, for its logits
    size_t i = common, j_min = common;
    struct Plan {
        size_t at, from, len;
    };
    std::vector<Plan> plan;
    while (i + N <= end) {
        size_t best_len = 0, best_j = 0;
        auto range = grams.equal_range(key(prompt.data() + i));
        int tried = 0;
        for (auto it = range.first; it != range.second && tried < 16; ++it) {
            const size_t j = it->second;
            if (j < j_min) continue;
            tried++;
            size_t len = 0;
            while (i + len < end && j + len < src.size() && prompt[i + len] == src[j + len]) len++;
            if (len > best_len || (len == best_len && j < best_j)) {
                best_len = len;
                best_j = j;
            }
        }
        if (best_len >= N) {
            plan.push_back({i, best_j, best_len});
            i += best_len;
            j_min = best_j + best_len;
        } else {
            i++;
        }
    }
    if (plan.empty()) return;
    // The chunks' K/V out of the source before anything overwrites it, then moved.
    for (const Plan& p : plan) {
        ReuseChunk c;
        c.at = static_cast<int>(p.at);
        c.len = static_cast<int>(p.len);
        if (src_kv) {
            c.kv = kv_blob_slice(*src_kv, mc, static_cast<int>(p.from), static_cast<int>(p.from + p.len));
        } else {
            backend->read_kv(static_cast<int>(p.from), static_cast<int>(p.len), c.kv);
        }
        kv_blob_shift(c.kv, mc, inv_freq.data(), static_cast<int>(p.at) - static_cast<int>(p.from));
        st.shifted_tokens += c.len;
        reuse_chunks.push_back(std::move(c));
    }
}

Status Engine::eval_all_logits(const std::vector<int32_t>& tokens, std::vector<float>& out) {
    Impl& m = *impl_;
    if (!m.backend) return Status::error("no model loaded");
    if (tokens.empty() || tokens.size() > static_cast<size_t>(m.n_ctx)) {
        return Status::error(strfmt("eval needs 1..%d tokens, got %zu", m.n_ctx, tokens.size()));
    }
    const size_t V = static_cast<size_t>(m.mc.n_vocab);
    for (int32_t id : tokens) {
        if (id < 0 || id >= m.mc.n_vocab) return Status::error(strfmt("token id %d out of range", id));
    }
    out.assign(tokens.size() * V, 0.0f);
    m.store_resident();
    m.resident.clear();
    m.backend->truncate_kv(0);
    size_t pos = 0;
    while (pos < tokens.size()) {
        const size_t n = std::min(tokens.size() - pos, static_cast<size_t>(m.n_batch));
        m.backend->forward(tokens.data() + pos, static_cast<int>(n), static_cast<int>(pos), LogitsMode::All,
                           out.data() + pos * V);
        m.resident.insert(m.resident.end(), tokens.begin() + static_cast<long>(pos),
                          tokens.begin() + static_cast<long>(pos + n));
        pos += n;
    }
    return Status::success();
}

Status Engine::forward_tokens(const std::vector<int32_t>& tokens, int n_past, bool all_logits) {
    Impl& m = *impl_;
    if (!m.backend) return Status::error("no model loaded");
    if (n_past < 0 || static_cast<size_t>(n_past) > m.resident.size()) {
        return Status::error(strfmt("n_past %d is outside the resident sequence (%zu tokens)", n_past, m.resident.size()));
    }
    if (tokens.empty() || n_past + tokens.size() > static_cast<size_t>(m.n_ctx)) {
        return Status::error(strfmt("forward needs 1..%d tokens after %d, got %zu", m.n_ctx - n_past, n_past,
                                    tokens.size()));
    }
    for (int32_t id : tokens) {
        if (id < 0 || id >= m.mc.n_vocab) return Status::error(strfmt("token id %d out of range", id));
    }
    const size_t rows = m.spec_logits.size() / static_cast<size_t>(m.mc.n_vocab);
    if (all_logits && tokens.size() > rows) {
        return Status::error(strfmt("all logits: at most %zu tokens (--draft-max + 1; none with --spec off), got %zu",
                                    rows, tokens.size()));
    }
    try {
        if (static_cast<size_t>(n_past) < m.resident.size()) m.store_resident();
        m.resident.resize(static_cast<size_t>(n_past));
        m.backend->truncate_kv(n_past);
        if (all_logits) {
            m.backend->forward(tokens.data(), static_cast<int>(tokens.size()), n_past, LogitsMode::All,
                               m.spec_logits.data());
            m.resident.insert(m.resident.end(), tokens.begin(), tokens.end());
            return Status::success();
        }
        size_t i = 0;
        while (i < tokens.size()) {
            const size_t n = std::min(tokens.size() - i, static_cast<size_t>(m.n_batch));
            const bool last = i + n == tokens.size();
            m.backend->forward(tokens.data() + i, static_cast<int>(n), static_cast<int>(m.resident.size()),
                               last ? LogitsMode::Last : LogitsMode::None, last ? m.logits.data() : nullptr);
            m.resident.insert(m.resident.end(), tokens.begin() + static_cast<long>(i),
                              tokens.begin() + static_cast<long>(i + n));
            i += n;
        }
    } catch (const std::exception& e) {
        return Status::error(e.what());
    }
    return Status::success();
}

GenerateResult Engine::generate(const GenerateRequest& req, const PieceCallback& on_piece) {
    Impl& m = *impl_;
    GenerateResult res;
    if (!m.backend) {
        res.finish = FinishReason::Error;
        res.error = "no model loaded";
        return res;
    }
    bool expected = false;
    if (!m.busy.compare_exchange_strong(expected, true)) {
        res.finish = FinishReason::Error;
        res.error = "a generation is already running on this engine";
        return res;
    }
    struct BusyGuard {
        std::atomic<bool>& b;
        ~BusyGuard() { b.store(false); }
    } guard{m.busy};
    m.cancel.store(false);
    const double t_start = now_ms();
    GenerateStats& st = res.stats;
    try {
        std::vector<int32_t> prompt = req.prompt_tokens;
        if (prompt.empty()) prompt = m.tok->encode(req.prompt, req.add_bos && m.tok->add_bos(), req.parse_special);
        if (prompt.empty()) throw JllmError("the prompt is empty");
        for (int32_t id : prompt) {
            if (id < 0 || id >= m.mc.n_vocab) throw JllmError(strfmt("prompt token id %d is out of range", id));
        }
        if (prompt.size() >= static_cast<size_t>(m.n_ctx)) {
            throw JllmError(strfmt("the prompt has %zu tokens; the context holds %d (prompt + at least one generated token)",
                                   prompt.size(), m.n_ctx));
        }
        st.prompt_tokens = static_cast<int>(prompt.size());

        // Prefix reuse: the resident sequence or a session snapshot, whichever covers more.
        const size_t common = m.reuse_prefix(prompt, req.session_id, req.reuse_prefix, st);
        st.reused_tokens = static_cast<int>(common) + st.shifted_tokens;
        m.resident_session = req.session_id;
        m.resident_dirty = true;

        const double t_pf = now_ms();
        m.prefill(prompt, common, m.logits.data());
        st.prefill_ms = now_ms() - t_pf;
        const int n_prefilled = static_cast<int>(prompt.size()) - st.reused_tokens;
        st.prefill_tps = st.prefill_ms > 0 ? n_prefilled * 1000.0 / st.prefill_ms : 0;
        // The draft model reads the prompt in the prompt phase too, as the target does: the
        // decode's first draft then forwards only the sampled token (its time: draft_prefill_ms,
        // part of ttft_ms, not of decode_ms). A draft model is loaded only for auto and draft.
        if (m.draft && (req.max_tokens < 0 || req.max_tokens > 1)) {
            st.draft_prefill_ms = m.draft->prefill(m.resident);
        }

        Sampler sampler(static_cast<int32_t>(m.mc.n_vocab), req.sampling);
        // Tool calls: their grammar constrains the output, their parser takes them out of it.
        OutputConstraint constraint = req.constraint;
        std::unique_ptr<ToolCallStream> calls;
        if (!req.tools.tools_json.empty() && req.tools.choice != ToolChoice::None) {
            if (constraint.kind != OutputConstraint::Kind::None) {
                throw JllmError("a request constrains its output with tools or with a grammar, not both");
            }
            const ToolFormat tf = tool_format(m.chat_kind, m.gguf_template);
            constraint = tool_constraint(tf, req.tools);
            calls = std::make_unique<ToolCallStream>(tf);
        }
        // Constrained decoding: the grammar's mask of each step (null while it does not apply).
        std::unique_ptr<OutputConstrainer> con;
        if (constraint.kind != OutputConstraint::Kind::None) {
            if (!m.vocab_trie) m.vocab_trie = std::make_shared<const VocabTrie>(*m.tok);
            // A model that opens its reasoning block itself (Qwen3 with thinking on) may do so first.
            const int32_t think = req.thinking_may_open && req.split_thinking ? m.tok->find_token("<think>") : -1;
            con = std::make_unique<OutputConstrainer>(constraint, m.vocab_trie, req.thinking_open, think);
        }
        // The content channel's text, through the tool-call parser when tools are offered.
        std::vector<ToolCallStream::Part> out;
        if (!req.assistant_prefix.empty()) {
            if (con) con->push_text(req.assistant_prefix);
            if (calls) {  // the client wrote the prefix: only what becomes a call is news to it
                calls->push(req.assistant_prefix, out);
                out.erase(std::remove_if(out.begin(), out.end(),
                                         [](const ToolCallStream::Part& p) { return p.channel == Channel::Content; }),
                          out.end());
            }
        }
        const uint32_t* allowed = con ? con->mask() : nullptr;
        StreamingDetokenizer detok(*m.tok);
        StopMatcher stopper(req.stop);
        ThinkSplitter splitter(req.split_thinking, req.thinking_open);
        std::vector<std::pair<Channel, std::string>> parts;
        std::vector<TokenLogprob> top;
        const int max_tokens = req.max_tokens < 0 ? m.n_ctx : req.max_tokens;
        // The result text grows inside the decode loop; reserve it (16 bytes a token) up front.
        const size_t text_reserve = static_cast<size_t>(std::min(max_tokens, m.n_ctx)) * 16;
        res.text.reserve(text_reserve);
        if (req.split_thinking) res.reasoning.reserve(text_reserve);
        std::vector<float> raw;  // unmodified logits for logprobs, reused every token
        if (req.n_logprobs >= 0) raw.reserve(static_cast<size_t>(m.mc.n_vocab));

        auto deliver = [&](int32_t token, float lp, bool last = false) -> bool {
            for (auto& [ch, text] : parts) {
                if (calls && ch == Channel::Content) calls->push(text, out);
                else out.push_back(ToolCallStream::Part{ch, std::move(text)});
            }
            parts.clear();
            if (last && calls) calls->flush(out);
            for (ToolCallStream::Part& pt : out) {
                if (pt.text.empty() && !pt.start) continue;
                if (pt.channel == Channel::Reasoning) res.reasoning += pt.text;
                else if (pt.channel == Channel::Content) res.text += pt.text;
                if (!on_piece) continue;
                Piece p;
                p.text = std::move(pt.text);
                p.channel = pt.channel;
                p.token = token;
                p.logprob = lp;
                if (pt.channel == Channel::ToolCall) {
                    p.tool_index = pt.tool;
                    if (pt.start) {
                        p.tool_id = calls->call(pt.tool).id;
                        p.tool_name = calls->call(pt.tool).name;
                    }
                }
                if (req.n_logprobs > 0) {
                    p.top = top;
                    for (TokenLogprob& t : p.top) t.piece = m.tok->token_to_piece(t.token);
                }
                if (!on_piece(p)) {
                    out.clear();
                    return false;
                }
            }
            out.clear();
            return true;
        };

        res.finish = FinishReason::Length;
        m.oom.reset();
        m.thermal.reset();
        const double t_dec = now_ms();
        int generated = 0;
        bool first = true;
        // Decode steps end in a selection on the backend (forward_select: only k candidates
        // leave its device) when sampling from the k best is exact for these parameters
        // (Sampler::candidates_suffice) and no logprobs are asked for; the sampler draws from them.
        TokenSelection sel;
        sel.k = 0;  // 0: every step returns its logits
        int n_cands = 0;
        std::vector<int32_t> cand_ids;
        std::vector<float> cand_vals;
        if (req.n_logprobs < 0 && sampler.candidates_suffice(SELECT_MAX_K, &sel.k)) {
            cand_ids.resize(static_cast<size_t>(sel.k));
            cand_vals.resize(static_cast<size_t>(sel.k));
        } else {
            sel.k = 0;
        }
        // Speculative decoding: after each sampled token, a draft of what follows (prompt lookup
        // or the draft model, of the tuner's length) is verified by one forward of the token and
        // the draft, whose rows' logits are sampled in turn, each against its drafted token.
        const SpecMode spec = m.cfg.spec;
        const bool may_ngram = spec == SpecMode::Auto || spec == SpecMode::Ngram;
        const bool may_model = m.draft && (spec == SpecMode::Auto || spec == SpecMode::Draft);
        const size_t V = static_cast<size_t>(m.mc.n_vocab);
        m.tuner.reset_request();
        std::vector<int32_t> drafts, seq, batch;
        if (spec != SpecMode::Off) {
            drafts.reserve(SPEC_DRAFT_MAX);
            batch.reserve(SPEC_DRAFT_MAX + 1);
            seq.reserve(static_cast<size_t>(m.n_ctx));
        }
        int rows = 0, row = 0;  // verified rows in m.spec_logits; the next token samples `row`
        Drafter src = Drafter::lookup(NGRAM_MAX);  // the draft's drafter
        // A prompt-lookup proposal not drafted (it did not pay, or the draft model's draft was
        // taken): its first token, scored against the token the step samples. It cost nothing to
        // find, so its acceptance is learned on every step that found a match, drafted or not.
        int32_t shadow = -1;
        Drafter shadow_of = src;
        auto draft_done = [&](int accepted) {
            m.tuner.verified(src, static_cast<int>(drafts.size()), accepted);
            (src.source == DraftSource::Ngram ? st.ngram_accepted : st.model_accepted) += accepted;
        };
        // The next forward's draft after the pending token `id` (at most `room` tokens).
        auto propose = [&](int32_t id, int room) {
            drafts.clear();
            shadow = -1;
            if (room <= 0) return;
            seq.assign(m.resident.begin(), m.resident.end());
            seq.push_back(id);
            int model_k = -1;  // the draft model's length for this step, asked for once
            auto model_length = [&]() {
                if (model_k < 0) {
                    // A probe never pays for the draft model's prompt (a cold cache: a prefill).
                    const bool warm = m.draft->cold_tokens(seq) <= 16;
                    model_k = m.tuner.length(Drafter::model(), std::min(room, m.draft_cap), spec == SpecMode::Draft,
                                             warm);
                }
                return model_k;
            };
            if (may_ngram) {
                // The match first (it costs a scan of the sequence), then the length the tuner
                // gives a match of its length.
                int match = 0;
                const int found = ngram_draft(seq.data(), seq.size(), std::min(room, m.draft_cap), drafts, &match);
                const Drafter lookup = Drafter::lookup(match);
                const int k = found > 0 ? m.tuner.length(lookup, found, spec == SpecMode::Ngram, false) : 0;
                if (found > 0) {
                    shadow = drafts[0];
                    shadow_of = lookup;
                }
                drafts.resize(static_cast<size_t>(k));
                if (k > 0) {
                    // auto: the draft model's draft instead where it is expected to yield more per
                    // unit of time than this match (prompt lookup's drafts cost nothing, but a short
                    // match of a drafter that is often wrong loses to a draft model that is right).
                    const bool model_better = may_model && model_length() > 0 &&
                                              m.tuner.rate(Drafter::model(), model_k) > m.tuner.rate(lookup, k);
                    if (!model_better) {
                        src = lookup;
                        shadow = -1;
                        st.ngram_drafted += k;
                        return;
                    }
                    drafts.clear();
                }
            }
            if (may_model) {
                const int k = model_length();
                if (k <= 0) return;
                double prefill_ms = 0, step_ms = 0;
                m.draft->draft(seq, k, m.cfg.draft_p_min, drafts, &prefill_ms, &step_ms);
                st.draft_ms += prefill_ms + step_ms;
                if (!drafts.empty()) {
                    m.tuner.draft_step_done(step_ms / static_cast<double>(drafts.size()));
                    src = Drafter::model();
                    st.model_drafted += static_cast<int>(drafts.size());
                }
            }
        };
        while (true) {
            if (generated >= max_tokens) {
                res.finish = FinishReason::Length;
                break;
            }
            if (m.cancel.load()) {
                res.finish = FinishReason::Cancelled;
                break;
            }
            if (!m.runtime_guards(st)) {
                res.finish = FinishReason::Length;
                break;
            }
            float lp = 0.0f;  // with logprobs: computed below on the unmodified logits
            float* lg = rows > 0 ? m.spec_logits.data() + static_cast<size_t>(row) * V : m.logits.data();
            const int32_t expect = rows > 0 && row < static_cast<int>(drafts.size()) ? drafts[static_cast<size_t>(row)] : -1;
            const int32_t raw_top_n = req.n_logprobs;
            if (raw_top_n >= 0) raw.assign(lg, lg + V);
            // With candidates the backend applied this step's mask; on the logits the sampler does.
            // A drafted position is sampled exactly as without a draft (the same draw from the same
            // random stream) and the draft accepted where the token is the draft: at temperature 0
            // the argmax; above, with probability p(draft), the rest drawn from p without it — the
            // speculative-sampling rule for a deterministic draft, coupled to the plain draw, so a
            // seed gives the same output with and without speculation.
            const int32_t id = n_cands > 0 && rows == 0
                                   ? sampler.sample_candidates(cand_ids.data(), cand_vals.data(), n_cands, m.resident)
                                   : sampler.sample(lg, m.resident, allowed);
            if (raw_top_n >= 0) lp = token_logprob(raw.data(), static_cast<int32_t>(m.mc.n_vocab), id, raw_top_n, &top);
            if (first) {
                st.ttft_ms = now_ms() - t_start;
                first = false;
            }
            generated++;
            if (shadow >= 0) {
                m.tuner.verified(shadow_of, 1, id == shadow ? 1 : 0);
                shadow = -1;
            }
            const bool accepted = expect >= 0 && id == expect;
            if (rows > 0 && !accepted) {  // the drafts after this row leave the cache
                draft_done(row);
                rows = 0;
                m.backend->truncate_kv(static_cast<int>(m.resident.size()));
            }
            if (m.tok->is_eog(id)) {
                res.finish = FinishReason::Stop;
                break;
            }
            // Text of this token: control tokens have none in the output stream.
            std::string text = m.tok->is_control(id) ? std::string() : detok.push(id);
            bool stopped = false;
            const std::string safe = stopper.push(text, &stopped);
            const Channel before = splitter.channel();
            splitter.push(safe, parts);
            if (splitter.channel() == Channel::Reasoning || before == Channel::Reasoning) st.reasoning_tokens++;
            if (!deliver(id, lp)) {
                res.finish = FinishReason::Cancelled;
                break;
            }
            if (stopped) {
                res.finish = FinishReason::Stop;
                // the stop token is part of the sequence but its text is not emitted
                break;
            }
            if (con) {
                con->push(id, m.tok->piece_ref(id));
                if (con->finished()) {  // only the end of generation may follow: no step for it
                    res.finish = FinishReason::Stop;
                    break;
                }
            }
            if (accepted) {  // its K/V are in the cache already; the next row holds its logits
                m.resident.push_back(id);
                row++;
                allowed = con ? con->mask() : nullptr;
                continue;
            }
            if (m.resident.size() >= static_cast<size_t>(m.n_ctx)) {
                res.finish = FinishReason::Length;
                break;
            }
            const int32_t pos = static_cast<int32_t>(m.resident.size());
            if (spec != SpecMode::Off) {
                // Room: the tokens still to generate after this one, and the context.
                propose(id, std::min(max_tokens - generated - 1, m.n_ctx - pos - 1));
                if (!drafts.empty()) {
                    batch.assign(1, id);
                    batch.insert(batch.end(), drafts.begin(), drafts.end());
                    const int n = static_cast<int>(batch.size());
                    const double t0 = now_ms();
                    m.backend->forward(batch.data(), n, pos, LogitsMode::All, m.spec_logits.data());
                    m.tuner.forward_done(n, now_ms() - t0);
                    st.decode_forwards++;
                    rows = n;
                    row = 0;
                    n_cands = 0;
                    m.resident.push_back(id);
                    allowed = con ? con->mask() : nullptr;
                    continue;
                }
            }
            // The next mask is computed while the backend runs the step (TokenSelection::mask_fn).
            if (con) {
                sel.mask_fn = [](void* c) { return static_cast<OutputConstrainer*>(c)->mask(); };
                sel.mask_ctx = con.get();
            }
            const double t0 = now_ms();
            if (sel.k > 0 && m.backend->forward_select(id, pos, sel, cand_ids.data(), cand_vals.data())) {
                n_cands = sel.k;
            } else {
                n_cands = 0;
                m.backend->forward(&id, 1, pos, LogitsMode::Last, m.logits.data());
                allowed = con ? con->mask() : nullptr;
            }
            m.tuner.forward_done(1, now_ms() - t0);
            st.decode_forwards++;
            m.resident.push_back(id);
        }
        if (rows > 0) {  // ended inside a verified draft: the cache keeps what was generated
            draft_done(row);
            m.backend->truncate_kv(static_cast<int>(m.resident.size()));
        }
        st.completion_tokens = generated;
        st.peak_memory_bytes = read_process_memory(m.cfg.sysfs_root).rss_peak;
        st.peak_temperature_c = m.thermal.peak_c() > -273.0f ? m.thermal.peak_c() : -1.0f;
        st.decode_ms = now_ms() - t_dec;
        // decode rate counts the forward passes after the first token
        st.decode_tps = (generated > 1 && st.decode_ms > 0) ? (generated - 1) * 1000.0 / st.decode_ms : 0;
        // Whatever ended the loop: the detokenizer's and the stop matcher's held-back text, then
        // the final delivery.
        bool stopped_in_tail = false;
        std::string safe = stopper.push(detok.flush(), &stopped_in_tail);
        if (!stopped_in_tail) safe += stopper.flush();
        splitter.push(safe, parts);
        splitter.flush(parts);
        deliver(-1, 0.0f, true);
        res.stop_word = stopper.matched();
        if (con) {
            st.mask_ms = con->mask_ms();
            st.mask_max_ms = con->mask_max_ms();
        }
        if (calls) {
            res.tool_calls = calls->calls();
            if (res.finish == FinishReason::Stop && !res.tool_calls.empty()) res.finish = FinishReason::ToolCalls;
        }
    } catch (const std::exception& e) {
        res.finish = FinishReason::Error;
        res.error = e.what();
    }
    return res;
}

}  // namespace jllm
