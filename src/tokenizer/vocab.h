// tokenizer/vocab.h — the tokenizer's input data (what `tokenizer.ggml.*` holds), the GGUF key
// names in one table, and the token types. Filled from a GGUF (vocab_from_gguf) or from a
// Hugging Face tokenizer.json (hf_import.h); written to a GGUF by write_vocab_metadata.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace jllm {

class GgufFile;
class GgufWriter;

// GGUF metadata keys. The `tokenizer.jllm.*` keys are this project's additions; files without
// them fall back to the defaults of the pre-tokenizer family.
namespace gguf_key {
inline constexpr const char* TOK_MODEL = "tokenizer.ggml.model";
inline constexpr const char* TOK_PRE = "tokenizer.ggml.pre";
inline constexpr const char* TOK_TOKENS = "tokenizer.ggml.tokens";
inline constexpr const char* TOK_TYPES = "tokenizer.ggml.token_type";
inline constexpr const char* TOK_SCORES = "tokenizer.ggml.scores";
inline constexpr const char* TOK_MERGES = "tokenizer.ggml.merges";
inline constexpr const char* TOK_BOS_ID = "tokenizer.ggml.bos_token_id";
inline constexpr const char* TOK_EOS_ID = "tokenizer.ggml.eos_token_id";
inline constexpr const char* TOK_UNK_ID = "tokenizer.ggml.unknown_token_id";
inline constexpr const char* TOK_PAD_ID = "tokenizer.ggml.padding_token_id";
inline constexpr const char* TOK_EOT_ID = "tokenizer.ggml.eot_token_id";
inline constexpr const char* TOK_EOM_ID = "tokenizer.ggml.eom_token_id";
inline constexpr const char* TOK_ADD_BOS = "tokenizer.ggml.add_bos_token";
inline constexpr const char* TOK_ADD_EOS = "tokenizer.ggml.add_eos_token";
inline constexpr const char* TOK_ADD_SPACE_PREFIX = "tokenizer.ggml.add_space_prefix";
inline constexpr const char* TOK_CHAT_TEMPLATE = "tokenizer.chat_template";
inline constexpr const char* TOK_NORMALIZER = "tokenizer.jllm.normalizer";        // "nfc" | "none"
inline constexpr const char* TOK_IGNORE_MERGES = "tokenizer.jllm.ignore_merges";  // bool
inline constexpr const char* TOK_LSTRIP_IDS = "tokenizer.jllm.lstrip_ids";        // i32[]
inline constexpr const char* TOK_RSTRIP_IDS = "tokenizer.jllm.rstrip_ids";        // i32[]
}  // namespace gguf_key

// Values of tokenizer.ggml.token_type.
enum class TokenType : int32_t {
    UNDEFINED = 0,
    NORMAL = 1,
    UNKNOWN = 2,
    CONTROL = 3,       // special: matched in text only when the caller asks
    USER_DEFINED = 4,  // added token: always matched in text
    UNUSED = 5,
    BYTE = 6,          // SPM byte fallback <0xNN>
};

struct TokenizerVocab {
    std::string model;  // "gpt2" (byte-level BPE) or "llama" (SentencePiece BPE)
    std::string pre;    // pre-tokenizer family; "default" for SPM
    std::vector<std::string> tokens;
    std::vector<int32_t> token_types;  // TokenType per token; empty = all NORMAL
    std::vector<float> scores;         // SPM merge priorities
    std::vector<std::string> merges;   // BPE "left right", best first
    int32_t bos_id = -1, eos_id = -1, unk_id = -1, pad_id = -1, eot_id = -1, eom_id = -1;
    std::optional<bool> add_bos, add_eos, add_space_prefix;
    std::optional<bool> ignore_merges;  // absent: the family's default
    std::string normalizer;             // "nfc", "none", or "" = the family's default
    std::vector<int32_t> lstrip_ids;    // added tokens that swallow whitespace on their left
    std::vector<int32_t> rstrip_ids;    // ... and on their right
    std::string chat_template;
};

// Appends "[PAD<id>]" tokens of type UNUSED until there are n_rows tokens (a model whose
// embedding has more rows than its tokenizer has tokens, e.g. Qwen3: 151669 -> 151936).
void pad_vocab_to(TokenizerVocab& v, size_t n_rows);

// Reads tokenizer.* keys. Throws JllmError on missing or inconsistent metadata.
TokenizerVocab vocab_from_gguf(const GgufFile& f);
// Adds the tokenizer.* keys of `v` to `w` (not general.*; no padding of the token list).
void write_vocab_metadata(const TokenizerVocab& v, GgufWriter& w);

}  // namespace jllm
