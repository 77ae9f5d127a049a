// synth/synth_model.cpp — tensor plans, metadata and the lazy generate-and-quantize fills.
#include "synth/synth_model.h"

#include <cinttypes>
#include <cstring>
#include <memory>
#include <sys/stat.h>

#include "core/error.h"
#include "core/thread_pool.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "synth/synth_quant.h"
#include "synth/synth_rng.h"
#include "tokenizer/hf_import.h"
#include "tokenizer/vocab.h"

namespace jllm {

namespace {

bool file_exists(const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0;
}

}  // namespace

std::vector<SynthTensor> plan_synth_tensors(const SynthPreset& p, int64_t n_layer, QuantRecipe recipe) {
    const int64_t E = p.n_embd, F = p.n_ff, Q = p.n_head * p.head_dim, KV = p.n_head_kv * p.head_dim;
    const std::string arch = p.arch;
    const bool qkv_bias = arch == "qwen2";
    const bool qk_norm = arch == "qwen3";
    std::vector<SynthTensor> t;
    auto add = [&](const std::string& name, std::vector<int64_t> ne, SynthFill fill) {
        t.push_back(SynthTensor{name, std::move(ne), GgmlType::F32, fill});
    };
    add("token_embd.weight", {E, p.n_vocab}, SynthFill::Normal);
    if (p.llama3_rope) add("rope_freqs.weight", {p.head_dim / 2}, SynthFill::RopeFreqs);
    for (int64_t il = 0; il < n_layer; ++il) {
        const std::string b = strfmt("blk.%" PRId64 ".", il);
        add(b + "attn_norm.weight", {E}, SynthFill::Ones);
        add(b + "attn_q.weight", {E, Q}, SynthFill::Normal);
        add(b + "attn_k.weight", {E, KV}, SynthFill::Normal);
        add(b + "attn_v.weight", {E, KV}, SynthFill::Normal);
        if (qkv_bias) {
            add(b + "attn_q.bias", {Q}, SynthFill::Normal);
            add(b + "attn_k.bias", {KV}, SynthFill::Normal);
            add(b + "attn_v.bias", {KV}, SynthFill::Normal);
        }
        if (qk_norm) {
            add(b + "attn_q_norm.weight", {p.head_dim}, SynthFill::Ones);
            add(b + "attn_k_norm.weight", {p.head_dim}, SynthFill::Ones);
        }
        add(b + "attn_output.weight", {Q, E}, SynthFill::Normal);
        add(b + "ffn_norm.weight", {E}, SynthFill::Ones);
        add(b + "ffn_gate.weight", {E, F}, SynthFill::Normal);
        add(b + "ffn_up.weight", {E, F}, SynthFill::Normal);
        add(b + "ffn_down.weight", {F, E}, SynthFill::Normal);
    }
    add("output_norm.weight", {E}, SynthFill::Ones);
    if (!p.tied_output) add("output.weight", {E, p.n_vocab}, SynthFill::Normal);

    QuantContext qc;
    qc.n_layer = n_layer;
    qc.has_output = !p.tied_output;
    for (SynthTensor& s : t) s.type = choose_tensor_type(recipe, s.name, s.ne, qc);
    return t;
}

void synth_normal_row(uint64_t seed, const std::string& name, int64_t row, float* out, int64_t n) {
    SynthRng rng(synth_row_seed(seed, synth_name_hash(name), static_cast<uint64_t>(row)));
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(rng.next_normal() * SYNTH_STD);
}

namespace {

void add_tokenizer(const SynthPreset& p, const std::string& dir, GgufWriter& w) {
    const std::string folder = dir + "/" + p.tokenizer;
    const std::string tj = folder + "/tokenizer.json";
    const std::string cfg = folder + "/tokenizer_config.json";
    if (!file_exists(tj)) {
        throw JllmError("synth: tokenizer '" + tj + "' not found (use --tokenizer-dir: a folder holding qwen3/ and llama3/)");
    }
    TokenizerVocab v = hf_load_vocab(tj, file_exists(cfg) ? cfg : "");
    const int64_t n_tok = static_cast<int64_t>(v.tokens.size());
    if (n_tok > p.n_vocab) {
        throw JllmError(strfmt("synth: the tokenizer has %" PRId64 " tokens, more than the %" PRId64
                               " embedding rows of preset %s", n_tok, p.n_vocab, p.name));
    }
    // Pad the token list to the embedding rows, as the GGUF converters do ([PADn], unused), so
    // every loader sees as many tokens as logits.
    if (v.token_types.empty()) v.token_types.assign(v.tokens.size(), static_cast<int32_t>(TokenType::NORMAL));
    for (int64_t i = n_tok; i < p.n_vocab; ++i) {
        v.tokens.push_back(strfmt("[PAD%" PRId64 "]", i));
        v.token_types.push_back(static_cast<int32_t>(TokenType::UNUSED));
    }
    if (!v.scores.empty()) v.scores.resize(v.tokens.size(), 0.0f);
    write_vocab_metadata(v, w);
}

void add_hparams(const SynthPreset& p, int64_t n_layer, const SynthOptions& opt, GgufWriter& w) {
    const std::string a = std::string(p.arch) + ".";
    w.set_string("general.architecture", p.arch);
    w.set_string("general.type", "model");
    w.set_string("general.name", strfmt("synthetic %s (seed %" PRIu64 ")", p.name, opt.seed));
    w.set_u32("general.file_type", quant_recipe_file_type(opt.recipe));
    w.set_u32("general.quantization_version", 2);
    w.set_u32(a + "block_count", static_cast<uint32_t>(n_layer));
    w.set_u32(a + "context_length", static_cast<uint32_t>(p.n_ctx_train));
    w.set_u32(a + "embedding_length", static_cast<uint32_t>(p.n_embd));
    w.set_u32(a + "feed_forward_length", static_cast<uint32_t>(p.n_ff));
    w.set_u32(a + "attention.head_count", static_cast<uint32_t>(p.n_head));
    w.set_u32(a + "attention.head_count_kv", static_cast<uint32_t>(p.n_head_kv));
    w.set_u32(a + "attention.key_length", static_cast<uint32_t>(p.head_dim));
    w.set_u32(a + "attention.value_length", static_cast<uint32_t>(p.head_dim));
    w.set_f32(a + "rope.freq_base", p.rope_freq_base);
    w.set_f32(a + "attention.layer_norm_rms_epsilon", p.rms_eps);
    if (std::string(p.arch) == "llama") {
        w.set_u32(a + "rope.dimension_count", static_cast<uint32_t>(p.head_dim));
        w.set_u32(a + "vocab_size", static_cast<uint32_t>(p.n_vocab));
    }
    // Provenance, so a file can be regenerated: preset, recipe, seed.
    w.set_string("jllm.synth.preset", p.name);
    w.set_string("jllm.synth.recipe", quant_recipe_name(opt.recipe));
    w.set_u64("jllm.synth.seed", opt.seed);
}

}  // namespace

void build_synth_model(const SynthOptions& opt, GgufWriter& w, ThreadPool& pool) {
    const SynthPreset* pp = find_synth_preset(opt.preset);
    if (!pp) throw JllmError("synth: unknown preset '" + opt.preset + "' (known: " + synth_preset_names() + ")");
    const SynthPreset& p = *pp;
    const int64_t n_layer = opt.n_layer > 0 ? opt.n_layer : p.n_layer;
    if (n_layer > 1024) throw JllmError("synth: --layers must be in [1, 1024]");

    add_hparams(p, n_layer, opt, w);
    add_tokenizer(p, opt.tokenizer_dir, w);

    const uint64_t seed = opt.seed;
    const bool zeros = opt.zeros;
    const bool exact = opt.exact_quant;
    ThreadPool* tp = &pool;
    for (const SynthTensor& t : plan_synth_tensors(p, n_layer, opt.recipe)) {
        if (t.fill == SynthFill::RopeFreqs) {
            const std::vector<float> f = llama3_rope_freq_divisors(p);
            std::vector<uint8_t> bytes(f.size() * 4);
            std::memcpy(bytes.data(), f.data(), bytes.size());
            w.add_tensor(t.name, t.type, t.ne, std::move(bytes));
            continue;
        }
        const int64_t cols = t.ne[0];
        const int64_t rows = t.ne.size() > 1 ? t.ne[1] : 1;
        const GgmlType type = t.type;
        const SynthFill fill = t.fill;
        const std::string name = t.name;
        const size_t row_bytes = row_size(type, cols);
        w.add_tensor_lazy(name, type, t.ne, [=](uint8_t* dst) {
            if (zeros) return;  // the writer hands a zeroed buffer
            const FromFloatFn from_float = synth_from_float(type, exact);
            JLLM_ASSERT(from_float != nullptr);
            const int nt = tp->n_threads();
            std::vector<float> scratch(static_cast<size_t>(nt) * static_cast<size_t>(cols));
            tp->parallel_for(rows, [&](int64_t b, int64_t e, int tid) {
                float* buf = scratch.data() + static_cast<size_t>(tid) * static_cast<size_t>(cols);
                for (int64_t r = b; r < e; ++r) {
                    if (fill == SynthFill::Ones) {
                        for (int64_t i = 0; i < cols; ++i) buf[i] = 1.0f;
                    } else {
                        synth_normal_row(seed, name, r, buf, cols);
                    }
                    from_float(buf, dst + static_cast<size_t>(r) * row_bytes, cols);
                }
            });
        });
    }
}

uint64_t write_synth_model(const SynthOptions& opt, const std::string& path, int n_threads) {
    ThreadPool pool(n_threads);
    GgufWriter w;
    build_synth_model(opt, w, pool);
    w.write_file(path);
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) throw JllmError("synth: cannot stat '" + path + "'");
    return static_cast<uint64_t>(st.st_size);
}

}  // namespace jllm
