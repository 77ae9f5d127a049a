// tokenizer/pretokenizer.h — byte-level BPE pre-tokenizers: the table of families named by
// `tokenizer.ggml.pre` (regex, digit splitting, NFC, ignore_merges) and the PCRE2 (UTF + UCP,
// JIT) splitter that cuts text into the pieces BPE then merges inside.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace jllm {

struct PreTokenizerSpec {
    const char* name;     // canonical family name
    const char* aliases;  // other names accepted for `tokenizer.ggml.pre`, space separated
    const char* regex;    // PCRE2 pattern (UTF, UCP); Hugging Face's \s is spelled out
    const char* hf_regex;  // the Split regex as tokenizer.json writes it; "" for ByteLevel's own
    bool split_digits;    // each \p{N} is its own piece before the regex runs (HF Digits)
    bool nfc;             // the family's tokenizer.json has an NFC normalizer
    bool ignore_merges;   // a piece that is itself a token is emitted without merging
};

// Family by name or alias; nullptr if unknown.
const PreTokenizerSpec* find_pre_tokenizer(std::string_view name);
// What an unknown name falls back to: gpt-2 (Hugging Face's ByteLevel default regex).
const PreTokenizerSpec& default_pre_tokenizer();
// Every family, for docs and tests.
const std::vector<PreTokenizerSpec>& pre_tokenizer_table();

class PreTokenizer {
public:
    explicit PreTokenizer(const PreTokenizerSpec& spec);
    ~PreTokenizer();
    PreTokenizer(const PreTokenizer&) = delete;
    PreTokenizer& operator=(const PreTokenizer&) = delete;

    const PreTokenizerSpec& spec() const { return spec_; }
    // Appends the pieces of `text` (valid UTF-8) to `out`; their concatenation is `text`.
    void split(std::string_view text, std::vector<std::string_view>& out) const;

private:
    struct Regex;
    void split_regex(std::string_view text, std::vector<std::string_view>& out) const;

    PreTokenizerSpec spec_;
    std::unique_ptr<Regex> main_;
    std::unique_ptr<Regex> digit_;  // \p{N}, only for split_digits families
};

}  // namespace jllm
