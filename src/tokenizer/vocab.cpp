// tokenizer/vocab.cpp — TokenizerVocab to and from GGUF metadata, and Tokenizer::from_gguf.
#include "tokenizer/vocab.h"

#include <algorithm>

#include "core/error.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "tokenizer/tokenizer.h"

namespace jllm {

namespace {

const GgufArray* typed_array(const GgufFile& f, const char* key, bool want_string) {
    const GgufArray* a = f.get_array(key);
    if (!a) return nullptr;
    const bool is_string = a->elem_type == GgufType::STRING;
    if (is_string != want_string) {
        throw JllmError(strfmt("tokenizer: %s: expected an array of %s, got an array of %s", key,
                               want_string ? "string" : "numbers", gguf_type_name(a->elem_type)));
    }
    return a;
}

int32_t opt_id(const GgufFile& f, const char* key) {
    const std::optional<int64_t> v = f.get_int(key);
    if (!v) return -1;
    if (*v < -1 || *v > INT32_MAX) {
        throw JllmError(strfmt("tokenizer: %s = %lld is not a token id", key,
                               static_cast<long long>(*v)));
    }
    return static_cast<int32_t>(*v);
}

std::vector<int32_t> int_array(const GgufArray& a) {
    std::vector<int32_t> out(a.count);
    for (uint64_t i = 0; i < a.count; ++i) out[i] = static_cast<int32_t>(a.get_int(i));
    return out;
}

}  // namespace

void pad_vocab_to(TokenizerVocab& v, size_t n_rows) {
    if (v.token_types.empty()) v.token_types.assign(v.tokens.size(), static_cast<int32_t>(TokenType::NORMAL));
    if (!v.scores.empty()) v.scores.resize(std::max(v.scores.size(), n_rows), 0.0f);
    for (size_t id = v.tokens.size(); id < n_rows; ++id) {
        v.tokens.push_back("[PAD" + std::to_string(id) + "]");
        v.token_types.push_back(static_cast<int32_t>(TokenType::UNUSED));
    }
}

TokenizerVocab vocab_from_gguf(const GgufFile& f) {
    TokenizerVocab v;
    const auto model = f.get_string(gguf_key::TOK_MODEL);
    if (!model) throw JllmError(strfmt("tokenizer: %s is missing", gguf_key::TOK_MODEL));
    v.model = std::string(*model);
    v.pre = std::string(f.get_string(gguf_key::TOK_PRE).value_or("default"));

    const GgufArray* tokens = typed_array(f, gguf_key::TOK_TOKENS, true);
    if (!tokens) throw JllmError(strfmt("tokenizer: %s is missing", gguf_key::TOK_TOKENS));
    v.tokens.reserve(tokens->strings.size());
    for (std::string_view s : tokens->strings) v.tokens.emplace_back(s);

    if (const GgufArray* a = typed_array(f, gguf_key::TOK_TYPES, false)) v.token_types = int_array(*a);
    if (const GgufArray* a = typed_array(f, gguf_key::TOK_SCORES, false)) {
        v.scores.resize(a->count);
        for (uint64_t i = 0; i < a->count; ++i) v.scores[i] = static_cast<float>(a->get_float(i));
    }
    if (const GgufArray* a = typed_array(f, gguf_key::TOK_MERGES, true)) {
        v.merges.reserve(a->strings.size());
        for (std::string_view s : a->strings) v.merges.emplace_back(s);
    }
    v.bos_id = opt_id(f, gguf_key::TOK_BOS_ID);
    v.eos_id = opt_id(f, gguf_key::TOK_EOS_ID);
    v.unk_id = opt_id(f, gguf_key::TOK_UNK_ID);
    v.pad_id = opt_id(f, gguf_key::TOK_PAD_ID);
    v.eot_id = opt_id(f, gguf_key::TOK_EOT_ID);
    v.eom_id = opt_id(f, gguf_key::TOK_EOM_ID);
    v.add_bos = f.get_bool(gguf_key::TOK_ADD_BOS);
    v.add_eos = f.get_bool(gguf_key::TOK_ADD_EOS);
    v.add_space_prefix = f.get_bool(gguf_key::TOK_ADD_SPACE_PREFIX);
    v.ignore_merges = f.get_bool(gguf_key::TOK_IGNORE_MERGES);
    v.normalizer = std::string(f.get_string(gguf_key::TOK_NORMALIZER).value_or(""));
    if (const GgufArray* a = typed_array(f, gguf_key::TOK_LSTRIP_IDS, false)) v.lstrip_ids = int_array(*a);
    if (const GgufArray* a = typed_array(f, gguf_key::TOK_RSTRIP_IDS, false)) v.rstrip_ids = int_array(*a);
    v.chat_template = std::string(f.get_string(gguf_key::TOK_CHAT_TEMPLATE).value_or(""));
    return v;
}

void write_vocab_metadata(const TokenizerVocab& v, GgufWriter& w) {
    w.set_string(gguf_key::TOK_MODEL, v.model);
    w.set_string(gguf_key::TOK_PRE, v.pre);
    w.set_array_string(gguf_key::TOK_TOKENS, v.tokens);
    if (!v.token_types.empty()) w.set_array_i32(gguf_key::TOK_TYPES, v.token_types);
    if (!v.scores.empty()) w.set_array_f32(gguf_key::TOK_SCORES, v.scores);
    if (!v.merges.empty()) w.set_array_string(gguf_key::TOK_MERGES, v.merges);
    auto put_id = [&](const char* key, int32_t id) {
        if (id >= 0) w.set_u32(key, static_cast<uint32_t>(id));
    };
    put_id(gguf_key::TOK_BOS_ID, v.bos_id);
    put_id(gguf_key::TOK_EOS_ID, v.eos_id);
    put_id(gguf_key::TOK_UNK_ID, v.unk_id);
    put_id(gguf_key::TOK_PAD_ID, v.pad_id);
    put_id(gguf_key::TOK_EOT_ID, v.eot_id);
    put_id(gguf_key::TOK_EOM_ID, v.eom_id);
    if (v.add_bos) w.set_bool(gguf_key::TOK_ADD_BOS, *v.add_bos);
    if (v.add_eos) w.set_bool(gguf_key::TOK_ADD_EOS, *v.add_eos);
    if (v.add_space_prefix) w.set_bool(gguf_key::TOK_ADD_SPACE_PREFIX, *v.add_space_prefix);
    if (v.ignore_merges) w.set_bool(gguf_key::TOK_IGNORE_MERGES, *v.ignore_merges);
    if (!v.normalizer.empty()) w.set_string(gguf_key::TOK_NORMALIZER, v.normalizer);
    if (!v.lstrip_ids.empty()) w.set_array_i32(gguf_key::TOK_LSTRIP_IDS, v.lstrip_ids);
    if (!v.rstrip_ids.empty()) w.set_array_i32(gguf_key::TOK_RSTRIP_IDS, v.rstrip_ids);
    if (!v.chat_template.empty()) w.set_string(gguf_key::TOK_CHAT_TEMPLATE, v.chat_template);
}

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GgufFile& f) {
    return from_vocab(vocab_from_gguf(f));
}

}  // namespace jllm
