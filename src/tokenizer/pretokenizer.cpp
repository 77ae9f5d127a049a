// tokenizer/pretokenizer.cpp — pre-tokenizer family table and the PCRE2 splitter.
//
// Hugging Face compiles these patterns with Oniguruma, whose \s is Unicode White_Space. PCRE2's
// \s with UCP also matches U+180E, so the class is spelled out (WS) to agree on every code point.
#include "tokenizer/pretokenizer.h"

#include <algorithm>
#include <pcre2.h>

#include "core/error.h"
#include "tokenizer/unicode_util.h"

namespace jllm {

namespace {

#define WS "\\t\\n\\x0B\\f\\r\\x20\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"

// GPT-2 / HF ByteLevel(use_regex=true).
const char* const RE_GPT2 =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+|[" WS "]+(?![^" WS
    "])|[" WS "]+";
// Llama 3: case-insensitive contractions, numbers in groups of up to three.
const char* const RE_LLAMA3 =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^" WS
    "\\p{L}\\p{N}]+[\\r\\n]*|[" WS "]*[\\r\\n]+|[" WS "]+(?![^" WS "])|[" WS "]+";
// Qwen2 / Qwen2.5 / Qwen3: as Llama 3 but every digit alone.
const char* const RE_QWEN2 =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^" WS
    "\\p{L}\\p{N}]+[\\r\\n]*|[" WS "]*[\\r\\n]+|[" WS "]+(?![^" WS "])|[" WS "]+";

#undef WS

// The same patterns as Hugging Face tokenizer.json files spell them (for hf_import detection).
const char* const HF_RE_LLAMA3 =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char* const HF_RE_QWEN2 =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

}  // namespace

const std::vector<PreTokenizerSpec>& pre_tokenizer_table() {
    static const std::vector<PreTokenizerSpec> table = {
        // name, aliases, regex, hf_regex, split_digits, nfc, ignore_merges
        {"gpt-2", "gpt2 default", RE_GPT2, "", false, false, false},
        {"llama-bpe", "llama3 llama-v3", RE_LLAMA3, HF_RE_LLAMA3, false, false, true},
        {"qwen2", "qwen deepseek-r1-qwen", RE_QWEN2, HF_RE_QWEN2, false, true, false},
        {"smollm", "", RE_GPT2, "", true, false, false},
        {"starcoder", "", RE_GPT2, "", true, false, false},
        {"refact", "", RE_GPT2, "", true, false, false},
    };
    return table;
}

const PreTokenizerSpec* find_pre_tokenizer(std::string_view name) {
    for (const auto& s : pre_tokenizer_table()) {
        if (name == s.name) return &s;
        std::string_view aliases = s.aliases;
        while (!aliases.empty()) {
            const size_t sp = aliases.find(' ');
            const std::string_view a = aliases.substr(0, sp);
            if (a == name) return &s;
            if (sp == std::string_view::npos) break;
            aliases.remove_prefix(sp + 1);
        }
    }
    return nullptr;
}

const PreTokenizerSpec& default_pre_tokenizer() { return pre_tokenizer_table()[0]; }

struct PreTokenizer::Regex {
    pcre2_code* code = nullptr;
    bool jit = false;

    explicit Regex(const char* pattern) {
        int err = 0;
        PCRE2_SIZE err_off = 0;
        code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED,
                             PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &err, &err_off, nullptr);
        if (!code) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(err, msg, sizeof(msg));
            throw JllmError(strfmt("tokenizer: regex does not compile at %zu: %s",
                                   static_cast<size_t>(err_off), reinterpret_cast<char*>(msg)));
        }
        jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
    }
    ~Regex() { pcre2_code_free(code); }

    // Finds the next match at or after `start`; false when there is none.
    bool next(std::string_view text, size_t start, pcre2_match_data* md, size_t* mb,
              size_t* me) const {
        const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
        int rc = jit ? pcre2_jit_match(code, subject, text.size(), start, 0, md, nullptr)
                     : PCRE2_ERROR_JIT_BADOPTION;
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT || rc == PCRE2_ERROR_JIT_BADOPTION) {
            rc = pcre2_match(code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, md, nullptr);
        }
        if (rc == PCRE2_ERROR_NOMATCH) return false;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof(msg));
            throw JllmError(strfmt("tokenizer: regex match failed: %s",
                                   reinterpret_cast<char*>(msg)));
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        *mb = ov[0];
        *me = ov[1];
        return true;
    }
};

PreTokenizer::PreTokenizer(const PreTokenizerSpec& spec) : spec_(spec) {
    main_ = std::make_unique<Regex>(spec.regex);
    if (spec.split_digits) digit_ = std::make_unique<Regex>("\\p{N}");
}

PreTokenizer::~PreTokenizer() = default;

void PreTokenizer::split_regex(std::string_view text, std::vector<std::string_view>& out) const {
    if (text.empty()) return;
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(main_->code, nullptr);
    size_t pos = 0;
    size_t mb = 0, me = 0;
    try {
        while (pos < text.size() && main_->next(text, pos, md, &mb, &me)) {
            if (mb > pos) out.push_back(text.substr(pos, mb - pos));  // unmatched gap
            if (me == mb) {  // empty match: take one character so the scan advances
                me = std::min(text.size(), mb + utf8_lead_len(static_cast<uint8_t>(text[mb])));
            }
            out.push_back(text.substr(mb, me - mb));
            pos = me;
        }
    } catch (...) {
        pcre2_match_data_free(md);
        throw;
    }
    if (pos < text.size()) out.push_back(text.substr(pos));
    pcre2_match_data_free(md);
}

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& out) const {
    if (!digit_) {
        split_regex(text, out);
        return;
    }
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(digit_->code, nullptr);
    size_t pos = 0;
    size_t mb = 0, me = 0;
    try {
        while (pos < text.size() && digit_->next(text, pos, md, &mb, &me)) {
            split_regex(text.substr(pos, mb - pos), out);
            out.push_back(text.substr(mb, me - mb));
            pos = me;
        }
        split_regex(text.substr(pos), out);
    } catch (...) {
        pcre2_match_data_free(md);
        throw;
    }
    pcre2_match_data_free(md);
}

}  // namespace jllm
