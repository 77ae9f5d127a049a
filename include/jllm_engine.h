// include/jllm_engine.h — the Engine API (DESIGN.md "Contracts"): what the CLI, the server and an
// embedding home assistant call. One generate() runs at a time per Engine; cancel() and the
// read-only queries are safe from any thread. Errors never escape as exceptions: load() returns
// a Status, generate() a result whose finish reason is `error` with a message.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jllm_chat.h"
#include "jllm_jetson.h"
#include "jllm_memory.h"
#include "jllm_types.h"

namespace jllm {


// Speculative decoding (docs/speculative.md): drafted tokens checked by one batched forward of
// the model. Auto: prompt lookup, and the draft model when one is loaded, each used while its
// measured acceptance and the measured forward costs say it pays; Ngram / Draft: that drafter
// whenever it has a proposal; Off: one token per forward.
enum class SpecMode { Auto, Ngram, Draft, Off };
const char* spec_mode_name(SpecMode m);  // "auto", "ngram", "draft", "off"

struct EngineConfig {
    std::string model_path;
    DeviceKind device = DeviceKind::Auto;
    int n_ctx = 0;                 // 0: the largest that fits, capped by the model and 4096
    KvType kv_type = KvType::Int8;
    int n_threads = 0;             // 0: all cores
    WeightPlacement weights = WeightPlacement::Auto;
    int mem_margin_mb = 256;       // safety margin kept free
    int max_memory_mb = 0;         // hard cap, 0 = none
    std::string sysfs_root = "/";  // root for /proc and /sys reads (tests use fixture trees)
    int oom_threshold_mb = 0;      // OOM guard: stop below this MemAvailable; 0 = half the margin
    float thermal_pace_c = 85.0f;  // decode is paced above this temperature
    float thermal_stop_c = 0.0f;   // generation stops at this temperature; 0 = the critical trip
    std::string chat_template = "auto";  // auto|chatml|qwen3|llama3
    // Sessions (docs/sessions.md): KV snapshots of earlier sequences kept in host RAM, in the
    // memory budget: -1 half of what the pools leave (at most 1 GiB, none below 64 MiB), 0 off.
    int cache_ram_mb = -1;
    std::string kv_dir;            // persistent snapshots (one file per session); empty: none
    int kv_dir_max_mb = 4096;      // the folder's files at most (least recently used removed first)
    // After the first token that differs from the cached sequence, reuse cached chunks of at least
    // this many tokens that reappear later in the prompt, their K re-rotated to the new positions
    // (llama-server's --cache-reuse). Not exact: a chunk's K/V were computed after the old tokens.
    // 0: off.
    int cache_reuse = 0;
    // Speculative decoding. draft_model_path: a smaller model with the same vocabulary (its
    // weights, KV and scratch are budgeted with the model's; load() refuses it with the numbers
    // when it does not fit). draft_max: tokens drafted per forward at most (1..16); the length
    // adapts to the recent acceptance below that. draft_vocab: the draft model proposes only the
    // token ids below this, the vocabulary's special tokens and the request's own tokens (its
    // prompt and output so far), and computes its output layer for those rows alone (a BPE
    // vocabulary's low ids are its most frequent tokens; the 0.5B Qwen draft's output layer over
    // 151,936 tokens is 37% of the bytes it reads a token); 0: every token. The output does not
    // depend on it: the model checks every drafted token. -1: the device's default (the CPU:
    // 32,768; CUDA: every token, its output layer computing every row whatever the mask).
    // draft_p_min: the draft model's draft ends before a token (after its first) it gives a
    // probability below this among its 16 best tokens, so its unsure guesses cost neither its
    // steps nor verification; 0: it drafts the tuner's whole length (docs/speculative.md has the
    // measurements behind the default). The output does not depend on it.
    SpecMode spec = SpecMode::Auto;
    std::string draft_model_path;
    int draft_max = 8;
    int draft_vocab = -1;
    float draft_p_min = 0.5f;
};

struct Status {
    bool ok = true;
    std::string message;
    static Status success() { return {}; }
    static Status error(std::string m) { return Status{false, std::move(m)}; }
};

struct SamplingParams {
    float temperature = 0.7f;     // <= 0: greedy
    int top_k = 40;               // <= 0: off
    float top_p = 0.9f;           // >= 1: off
    float min_p = 0.0f;           // <= 0: off
    float repeat_penalty = 1.1f;  // 1: off (llama.cpp semantics: divide positive, multiply negative)
    int repeat_last_n = 64;       // window for all three penalties; 0 off, -1 whole context
    float presence_penalty = 0.0f;
    float frequency_penalty = 0.0f;
    uint64_t seed = 0xFFFFFFFFFFFFFFFFull;  // all ones: random
    std::vector<std::pair<int32_t, float>> logit_bias;  // added to the logit of each id
};

// Content and reasoning are text; ToolCall pieces carry a tool call's arguments as they are
// generated (the call's first piece also its id and name).
enum class Channel { Content, Reasoning, ToolCall };

struct TokenLogprob {
    int32_t token = -1;
    float logprob = 0.0f;
    std::string piece;
};

// One streamed piece: whole UTF-8 characters only.
struct Piece {
    std::string text;
    Channel channel = Channel::Content;
    int tool_index = -1;              // ToolCall: which call of the turn (0, 1, ...)
    std::string tool_id, tool_name;   // ToolCall: set on a call's first piece
    int32_t token = -1;               // the token that completed this text (-1 if none)
    float logprob = 0.0f;             // of that token, when requested
    std::vector<TokenLogprob> top;    // top-n alternatives, when requested
};

// Return false to stop generation (finish reason `cancelled`).
using PieceCallback = std::function<bool(const Piece&)>;

// A function call the model made (OpenAI's tool_calls[].function).
struct ToolCall {
    std::string id;         // call_...
    std::string name;
    std::string arguments;  // the arguments object as JSON text
};

enum class ToolChoice { Auto, None, Required, Named };

// The functions a request offers. The prompt must already show them (render_chat with
// ChatRenderOptions::tools_json). Auto: text until the model opens a call, the call then
// constrained to the function's parameter schema; Required: one call (or more with `parallel`)
// at once; Named: a call of `name`; None: no calls.
struct ToolRequest {
    std::string tools_json;  // OpenAI `tools`: [{"type": "function", "function": {name, description, parameters}}]
    ToolChoice choice = ToolChoice::Auto;
    std::string name;        // Named
    bool parallel = true;    // more than one call in a turn
};

// What the output must be (DESIGN.md: enforced by constrained decoding, never silently dropped).
// A grammar that does not compile fails the request (check_output_constraint says why first).
struct OutputConstraint {
    enum class Kind { None, Grammar, JsonSchema, JsonObject };
    Kind kind = Kind::None;
    std::string text;  // Grammar: GBNF (start rule `root`); JsonSchema: the schema as JSON
    // Unconstrained until one of these strings appears in the output; from its first byte on, the
    // output is a sentence of the grammar (which starts with the trigger). Empty: from the start.
    std::vector<std::string> triggers;
    // Triggers that count only where the output starts with them (whitespace before them aside,
    // after the reasoning block when there is one): a call that is the whole answer.
    std::vector<std::string> start_triggers;
};

// Whether `c` compiles: its grammar parses (Status names line and column) or its schema converts
// (Status names the keyword and where it is). Needs no model.
Status check_output_constraint(const OutputConstraint& c);

struct GenerateRequest {
    std::string prompt;                  // used when prompt_tokens is empty
    std::vector<int32_t> prompt_tokens;  // pre-tokenized prompt (takes precedence)
    bool parse_special = false;          // parse <|...|> in `prompt` (rendered templates: true)
    bool add_bos = true;                 // add BOS if the model's tokenizer asks for it
    SamplingParams sampling;
    std::vector<std::string> stop;       // stop strings: matched across tokens, never emitted
    int max_tokens = 256;                // < 0: until the context is full
    bool split_thinking = true;          // <think>...</think> goes to the reasoning channel
    bool thinking_open = false;          // the prompt already opened <think> (output starts in reasoning)
    // The model may open a reasoning block itself at the output's start (Qwen3 with thinking on):
    // a constraint then allows <think> as the first token and starts after the block closes.
    bool thinking_may_open = false;
    int n_logprobs = -1;                 // < 0: none; 0: the chosen token's; n: plus top n
    // Constrained decoding. With thinking_open the constraint starts after the reasoning block
    // closes; end of generation comes only where the grammar is complete.
    OutputConstraint constraint;
    // Tool calls (not together with `constraint`): parsed out of the output into
    // GenerateResult::tool_calls, streamed as ToolCall pieces, never left in the content.
    ToolRequest tools;
    // The answer's start when the prompt ends inside it (a continued final assistant message,
    // ChatRenderOptions::continue_final_message): the constraint and the tool-call parser take
    // it as output already generated; it is not repeated in the result's text.
    std::string assistant_prefix;
    // The conversation this request continues: its snapshot is found first, and this
    // generation's sequence is stored under it (Engine::checkpoint). Empty: found by prefix only.
    std::string session_id;
    // false: no prefix is reused, the whole prompt is evaluated (llama-server's cache_prompt false).
    bool reuse_prefix = true;
};

enum class FinishReason { Stop, Length, Cancelled, Error, ToolCalls };

// Where a request's reused prompt tokens came from: none, the resident sequence, a snapshot in
// host RAM, or a snapshot file (read on this request).
enum class CacheSource { None, Resident, Ram, Disk };
const char* cache_source_name(CacheSource s);  // "none", "resident", "ram", "disk"

// The session cache's state and counters (Engine::session_stats, the server's /metrics).
struct SessionCacheStats {
    int64_t ram_entries = 0, ram_bytes = 0, ram_budget = 0;
    uint64_t hits_resident = 0, hits_ram = 0, hits_disk = 0, misses = 0;  // requests by source
    uint64_t bytes_restored = 0;   // copied into the KV cache from snapshots
    uint64_t ram_evictions = 0;
    uint64_t snapshots = 0, bytes_snapshotted = 0;  // taken from the KV cache
    bool disk_enabled = false;
    int64_t disk_entries = 0, disk_bytes = 0, disk_budget = 0;
    uint64_t disk_written = 0, disk_bytes_written = 0, disk_loaded = 0, disk_bytes_loaded = 0;
    uint64_t disk_evictions = 0, disk_rejected = 0, disk_write_errors = 0;
};
const char* finish_reason_name(FinishReason r);

struct GenerateStats {
    int prompt_tokens = 0;
    int reused_tokens = 0;       // prompt tokens reused (not prefilled), from `cache_source`
    CacheSource cache_source = CacheSource::None;
    int restored_tokens = 0;     // of those, copied in from a snapshot (the rest were resident)
    double restore_ms = 0;       // reading the snapshot (disk) and copying it into the KV cache
    int shifted_tokens = 0;      // of the reused, those after the first difference (cache_reuse)
    int completion_tokens = 0;
    int reasoning_tokens = 0;
    double prefill_ms = 0, prefill_tps = 0;
    double decode_ms = 0, decode_tps = 0;
    double ttft_ms = 0;          // request start to first generated token
    // Host time spent computing the output constraint's token masks (on a device backend the
    // decode steps' masks are computed while the device runs the step), and the longest of them.
    double mask_ms = 0, mask_max_ms = 0;
    int64_t peak_memory_bytes = 0;
    float peak_temperature_c = -1.0f;  // < 0: unknown
    int oom_events = 0;
    int thermal_events = 0;
    // Speculative decoding: forward passes of the decode (one per verified batch or plain step),
    // tokens proposed and accepted per drafter (prompt lookup, draft model), the draft model's
    // time in the decode (its drafting steps and the tokens it catches up on; part of decode_ms)
    // and its reading of the prompt in the prompt phase (part of ttft_ms).
    int decode_forwards = 0;
    int ngram_drafted = 0, ngram_accepted = 0;
    int model_drafted = 0, model_accepted = 0;
    double draft_ms = 0;
    double draft_prefill_ms = 0;
    int drafted() const { return ngram_drafted + model_drafted; }
    int accepted() const { return ngram_accepted + model_accepted; }
};

struct GenerateResult {
    FinishReason finish = FinishReason::Stop;
    std::string error;       // when finish == Error
    std::string text;        // content channel
    std::string reasoning;   // reasoning channel
    std::vector<ToolCall> tool_calls;  // finish ToolCalls; calls cut short by `length` are left out
    std::string stop_word;   // the stop string that ended the answer (finish Stop); "" otherwise
    GenerateStats stats;
};

struct ModelInfo {
    std::string path, arch, name, backend, device;
    int64_t n_layer = 0, n_embd = 0, n_ff = 0, n_head = 0, n_head_kv = 0, head_dim = 0, n_vocab = 0;
    int64_t n_ctx = 0, n_ctx_train = 0;
    uint64_t file_bytes = 0, weight_bytes = 0, kv_bytes = 0;
    uint64_t n_params = 0;             // elements of every tensor
    // Weight bytes one decode step reads: every tensor once, but one row of the token embedding
    // where a separate output matrix exists.
    uint64_t decode_weight_bytes = 0;
    std::string kv_type;
    double load_ms = 0;
    // Speculative decoding as loaded: the mode, and the draft model's path and name (empty: none).
    std::string spec;
    std::string draft_path, draft_name;
    // Tokens drafted per verification at most: EngineConfig::draft_max, lowered to what the
    // backend verifies bit for bit (CUDA: 3, its rows equal one-token steps up to 4 tokens).
    int draft_max = 0;
    // The draft model's tokens before a request's own join them (--draft-vocab as applied: the
    // ids below it and the special tokens; n_vocab where unrestricted; 0 without a draft model).
    int64_t draft_vocab = 0;
    float draft_p_min = 0;  // EngineConfig::draft_p_min as applied (0 without a draft model)
    // What the file says of itself: its quantization by llama.cpp's file-type name
    // (general.file_type: "Q4_K_M", "Q4_1", "F16"; empty where absent or unknown), the chat
    // template it ships (tokenizer.chat_template) and the renderer in use ("chatml", "qwen3",
    // "llama3"), and an xxh3-64 of its header (metadata and tensor table: the model's identity).
    std::string file_type;
    std::string chat_template_text, chat_template;
    uint64_t fingerprint = 0;
    bool tools = false;     // the template has a tool-call format
    bool thinking = false;  // the template has a reasoning switch (enable_thinking)
};

// llama.cpp's name of a general.file_type value (llama_ftype): 15 -> "Q4_K_M"; "" if unknown.
const char* gguf_file_type_name(uint32_t file_type);

// The description behind `jetson-llm --info` of a GGUF file: architecture, name, the
// hyper-parameters the engine uses, tokenizer type and vocabulary size, tensor count by type,
// file size; `verbose` adds every metadata key and every tensor. Reads the file's header only.
Status describe_model(const std::string& path, bool verbose, std::string& text);

class Engine {
public:
    Engine();
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    Status load(const EngineConfig& config);
    // Only the vocabulary of a GGUF file (a model, or a vocab-only file such as jllm-vocab's or
    // llama.cpp's ggml-vocab-*.gguf): no weights are mapped and no backend starts. tokenize,
    // detokenize and vocab_size work after it; generate and the rest need load().
    Status load_vocabulary(const std::string& path);
    int64_t vocab_size() const;  // tokens of the loaded vocabulary (0: none)
    void unload();
    bool loaded() const;

    // Tokenizer access (model must be loaded; throws nothing: empty on error).
    std::vector<int32_t> tokenize(const std::string& text, bool parse_special, bool add_bos = false) const;
    std::string detokenize(const std::vector<int32_t>& ids) const;

    // Renders a conversation with the model's chat template (or the configured override).
    std::string render_chat(const std::vector<ChatMessage>& messages, const ChatRenderOptions& options) const;

    GenerateResult generate(const GenerateRequest& request, const PieceCallback& on_piece);

    // Whether this model can take `tools` (its template has a tool-call format, every function
    // definition is well formed, every parameter schema can be enforced); the reason when not.
    Status check_tools(const ToolRequest& tools) const;

    // Teacher-forced evaluation: logits [n_tokens, n_vocab] for every position of `tokens`,
    // starting from an empty context (tests, perplexity, --dump-logits).
    Status eval_all_logits(const std::vector<int32_t>& tokens, std::vector<float>& logits);

    // Throughput primitive (jllm-bench): cuts the resident sequence to its first `n_past` tokens,
    // then runs `tokens` through the model in batches, last-token logits only, no sampling and
    // no text. A prompt prefill is one call; a decode step is a call with one token.
    // all_logits: logits of every token, in one batch of at most draft_max + 1 tokens
    // (speculative decoding's verification forward).
    Status forward_tokens(const std::vector<int32_t>& tokens, int n_past, bool all_logits = false);

    void cancel();                  // any thread: the running generate stops soon (`cancelled`)
    ModelInfo model_info() const;   // any thread
    MemoryReport memory_report() const;  // any thread: the load-time budget plus live values
    LiveStats live_stats() const;        // any thread: clocks, temperatures, rails, memory now
    const std::vector<int32_t>& resident_tokens() const;  // the cached sequence (prefix reuse)
    // The logits [n_vocab] of the last token a forward ran on the host's side: after generate()
    // with max_tokens 0, the prompt's last token (fidelity tools compare engines with it).
    const std::vector<float>& last_logits() const;
    void clear_cache();             // forget the resident sequence

    // Sessions (docs/sessions.md). checkpoint(): stores the last generation's sequence as a
    // snapshot (RAM, and the KV folder's write queue; the write happens on a background thread).
    // Call it after the answer went out; the next generate() takes it itself before it replaces
    // the sequence. Not concurrently with generate().
    void checkpoint();
    SessionCacheStats session_stats() const;  // any thread
    // The resident sequence to / from a named snapshot file (llama-server's slot save/restore).
    // `n_tokens` and `bytes` report what was written or restored. Not concurrently with generate().
    Status save_sequence(const std::string& path, int* n_tokens, int64_t* bytes);
    Status restore_sequence(const std::string& path, int* n_tokens, int64_t* bytes);

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace jllm
