// tokenizer/tokenizer.cpp — Tokenizer: validation of the vocabulary, special/added-token
// splitting, dispatch to byte-level BPE or SentencePiece, decoding, end-of-generation ids.
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/log.h"
#include "tokenizer/unicode_util.h"

namespace jllm {

namespace {

constexpr const char* SPM_SPACE = "\xE2\x96\x81";  // U+2581, SentencePiece's space marker

// Texts of tokens that end a turn or the text in the supported families.
constexpr const char* EOG_TEXTS[] = {
    "<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end_of_text|>", "<|eom_id|>",
    "<end_of_turn>", "<|end|>",
};

// The byte of an SPM byte token "<0xNN>", or -1.
int spm_byte_value(const std::string& t) {
    if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
    int v = 0;
    for (size_t i = 3; i < 5; ++i) {
        const char c = t[i];
        int d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else return -1;
        v = v * 16 + d;
    }
    return v;
}

// Byte length of the Unicode White_Space character at s[i], or 0.
size_t ws_len_at(std::string_view s, size_t i) {
    const uint8_t c = static_cast<uint8_t>(s[i]);
    if (c == ' ' || (c >= 0x09 && c <= 0x0D)) return 1;
    const size_t n = utf8_valid_len(s, i);
    if (n < 2) return 0;
    uint32_t cp = 0;
    if (n == 2) cp = ((c & 0x1Fu) << 6) | (s[i + 1] & 0x3Fu);
    else if (n == 3) cp = ((c & 0x0Fu) << 12) | ((s[i + 1] & 0x3Fu) << 6) | (s[i + 2] & 0x3Fu);
    else return 0;
    const bool ws = cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
                    cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
    return ws ? n : 0;
}

// Start of the character that ends just before byte `end` (which is > 0).
size_t prev_char_start(std::string_view s, size_t end) {
    size_t k = end - 1;
    while (k > 0 && (static_cast<uint8_t>(s[k]) & 0xC0) == 0x80 && end - k < 4) --k;
    return k;
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_vocab(TokenizerVocab v) {
    std::unique_ptr<Tokenizer> t(new Tokenizer());
    t->vocab_ = std::move(v);
    t->init();
    return t;
}

void Tokenizer::init() {
    TokenizerVocab& v = vocab_;
    const size_t n = v.tokens.size();
    if (n == 0) throw JllmError("tokenizer: the vocabulary is empty (tokenizer.ggml.tokens)");
    if (n > static_cast<size_t>(INT32_MAX)) throw JllmError("tokenizer: vocabulary too large");
    if (v.token_types.empty()) v.token_types.assign(n, static_cast<int32_t>(TokenType::NORMAL));
    if (v.token_types.size() != n) {
        throw JllmError(strfmt("tokenizer: %s has %zu entries, expected %zu (one per token)",
                               gguf_key::TOK_TYPES, v.token_types.size(), n));
    }
    auto check_opt_id = [&](int32_t id, const char* key) {
        if (id < -1 || id >= static_cast<int32_t>(n)) {
            throw JllmError(strfmt("tokenizer: %s = %d is outside the vocabulary [0, %zu)", key,
                                   id, n));
        }
    };
    check_opt_id(v.bos_id, gguf_key::TOK_BOS_ID);
    check_opt_id(v.eos_id, gguf_key::TOK_EOS_ID);
    check_opt_id(v.unk_id, gguf_key::TOK_UNK_ID);
    check_opt_id(v.pad_id, gguf_key::TOK_PAD_ID);
    check_opt_id(v.eot_id, gguf_key::TOK_EOT_ID);
    check_opt_id(v.eom_id, gguf_key::TOK_EOM_ID);
    for (const auto* ids : {&v.lstrip_ids, &v.rstrip_ids}) {
        for (int32_t id : *ids) check_opt_id(id, "tokenizer.jllm.{l,r}strip_ids");
    }

    text_map_.build(v.tokens);
    if (v.model == "gpt2") {
        spm_mode_ = false;
        const PreTokenizerSpec* spec = find_pre_tokenizer(v.pre);
        if (!spec) {
            JLLM_LOG_WARN("[tokenizer] unknown pre-tokenizer '%s'; using '%s'", v.pre.c_str(),
                          default_pre_tokenizer().name);
            spec = &default_pre_tokenizer();
        }
        pre_tok_ = std::make_unique<PreTokenizer>(*spec);
        if (v.normalizer == "nfc") nfc_ = true;
        else if (v.normalizer.empty()) nfc_ = spec->nfc;
        else if (v.normalizer == "none") nfc_ = false;
        else throw JllmError("tokenizer: unknown normalizer '" + v.normalizer + "'");
        ignore_merges_ = v.ignore_merges.value_or(spec->ignore_merges);
        add_bos_ = v.add_bos.value_or(false);
        add_space_prefix_ = false;
        if (v.merges.empty()) throw JllmError("tokenizer: gpt2 vocabulary without merges");
        bpe_.build(text_map_, v.merges);
        if (bpe_.skipped_merges() > 0) {
            JLLM_LOG_WARN("[tokenizer] %zu of %zu merges name tokens not in the vocabulary",
                          bpe_.skipped_merges(), v.merges.size());
        }
    } else if (v.model == "llama") {
        spm_mode_ = true;
        if (v.scores.size() != n) {
            throw JllmError(strfmt("tokenizer: %s has %zu entries, expected %zu",
                                   gguf_key::TOK_SCORES, v.scores.size(), n));
        }
        nfc_ = v.normalizer == "nfc";
        add_bos_ = v.add_bos.value_or(true);
        add_space_prefix_ = v.add_space_prefix.value_or(true);
        spm_.build(v.scores, text_map_);
    } else {
        throw JllmError("tokenizer: unsupported tokenizer.ggml.model '" + v.model +
                        "' (expected gpt2 or llama)");
    }

    // Decoded bytes of every token.
    pieces_.resize(n);
    for (size_t id = 0; id < n; ++id) {
        const std::string& t = v.tokens[id];
        const auto type = static_cast<TokenType>(v.token_types[id]);
        if (type == TokenType::CONTROL || type == TokenType::USER_DEFINED) {
            pieces_[id] = t;
        } else if (!spm_mode_) {
            pieces_[id] = byte_level_decode(t);
        } else if (type == TokenType::BYTE && spm_byte_value(t) >= 0) {
            pieces_[id] = std::string(1, static_cast<char>(spm_byte_value(t)));
        } else if (type == TokenType::UNKNOWN) {
            pieces_[id] = t;
        } else {
            std::string p;
            p.reserve(t.size());
            for (size_t i = 0; i < t.size();) {
                if (t.compare(i, 3, SPM_SPACE) == 0) {
                    p.push_back(' ');
                    i += 3;
                } else {
                    p.push_back(t[i++]);
                }
            }
            pieces_[id] = std::move(p);
        }
    }

    // End-of-generation set.
    eog_flag_.assign(n, 0);
    auto add_eog = [&](int32_t id) {
        if (id >= 0 && !eog_flag_[id]) {
            eog_flag_[id] = 1;
            eog_ids_.push_back(id);
        }
    };
    add_eog(v.eos_id);
    add_eog(v.eot_id);
    add_eog(v.eom_id);
    for (const char* t : EOG_TEXTS) {
        const int32_t id = text_map_.find(t);
        if (id < 0) continue;
        const auto type = static_cast<TokenType>(v.token_types[id]);
        if (type == TokenType::CONTROL || type == TokenType::USER_DEFINED) add_eog(id);
    }
    std::sort(eog_ids_.begin(), eog_ids_.end());

    // Tokens recognised inside text.
    std::vector<uint8_t> lstrip(n, 0), rstrip(n, 0);
    for (int32_t id : v.lstrip_ids) lstrip[id] = 1;
    for (int32_t id : v.rstrip_ids) rstrip[id] = 1;
    for (size_t id = 0; id < n; ++id) {
        const auto type = static_cast<TokenType>(v.token_types[id]);
        if (type != TokenType::CONTROL && type != TokenType::USER_DEFINED) continue;
        const std::string& t = v.tokens[id];
        if (t.empty()) continue;
        if (text_map_.find(t) != static_cast<int32_t>(id)) continue;  // duplicate text
        match_by_byte_[static_cast<uint8_t>(t[0])].push_back(
            {static_cast<int32_t>(id), type == TokenType::CONTROL, lstrip[id] != 0,
             rstrip[id] != 0});
    }
    for (auto& bucket : match_by_byte_) {
        std::stable_sort(bucket.begin(), bucket.end(), [&](const Matchable& a, const Matchable& b) {
            return v.tokens[a.id].size() > v.tokens[b.id].size();
        });
    }
}

void Tokenizer::check_id(int32_t id) const {
    if (id < 0 || id >= n_vocab()) {
        throw JllmError(strfmt("tokenizer: token id %d is outside the vocabulary [0, %d)", id,
                               n_vocab()));
    }
}

const std::string& Tokenizer::token_text(int32_t id) const {
    check_id(id);
    return vocab_.tokens[id];
}

std::string Tokenizer::token_to_piece(int32_t id) const {
    check_id(id);
    return pieces_[id];
}

const std::string& Tokenizer::piece_ref(int32_t id) const {
    JLLM_ASSERT(id >= 0 && id < n_vocab());
    return pieces_[id];
}

TokenType Tokenizer::token_type(int32_t id) const {
    check_id(id);
    return static_cast<TokenType>(vocab_.token_types[id]);
}

bool Tokenizer::is_control(int32_t id) const {
    return id >= 0 && id < n_vocab() &&
           static_cast<TokenType>(vocab_.token_types[id]) == TokenType::CONTROL;
}

bool Tokenizer::is_eog(int32_t id) const {
    return id >= 0 && id < n_vocab() && eog_flag_[id] != 0;
}

void Tokenizer::split_special(std::string_view t, bool parse_special,
                              std::vector<Fragment>& out) const {
    size_t start = 0;
    size_t i = 0;
    while (i < t.size()) {
        const auto& bucket = match_by_byte_[static_cast<uint8_t>(t[i])];
        const Matchable* hit = nullptr;
        for (const Matchable& m : bucket) {
            if (m.control && !parse_special) continue;
            const std::string& tt = vocab_.tokens[m.id];
            if (t.size() - i >= tt.size() && std::memcmp(t.data() + i, tt.data(), tt.size()) == 0) {
                hit = &m;
                break;
            }
        }
        if (!hit) {
            ++i;
            continue;
        }
        size_t text_end = i;
        if (hit->lstrip) {
            while (text_end > start) {
                const size_t k = prev_char_start(t, text_end);
                if (ws_len_at(t, k) != text_end - k) break;
                text_end = k;
            }
        }
        if (text_end > start) out.push_back({t.substr(start, text_end - start), -1});
        out.push_back({{}, hit->id});
        i += vocab_.tokens[hit->id].size();
        if (hit->rstrip) {
            while (i < t.size()) {
                const size_t w = ws_len_at(t, i);
                if (w == 0) break;
                i += w;
            }
        }
        start = i;
    }
    if (start < t.size()) out.push_back({t.substr(start), -1});
}

void Tokenizer::encode_text(std::string_view text, bool first, std::vector<int32_t>& out) const {
    if (text.empty()) return;
    if (spm_mode_) {
        std::string esc;
        esc.reserve(text.size() + 16);
        if (add_space_prefix_ && first) esc += SPM_SPACE;
        for (char c : text) {
            if (c == ' ') esc += SPM_SPACE;
            else esc.push_back(c);
        }
        if (nfc_) esc = nfc_normalize(esc);
        SpmScratch scratch;
        spm_.encode(esc, vocab_.unk_id, out, scratch);
        return;
    }
    std::string norm;
    if (nfc_) {
        norm = nfc_normalize(text);
        text = norm;
    }
    std::vector<std::string_view> pieces;
    pieces.reserve(text.size() / 3 + 4);
    pre_tok_->split(text, pieces);
    BpeScratch scratch;
    for (std::string_view p : pieces) bpe_.encode_piece(p, ignore_merges_, out, scratch);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos,
                                       bool parse_special) const {
    std::string clean;
    if (!utf8_is_valid(text)) {
        clean = utf8_lossy(text);
        text = clean;
    }
    std::vector<int32_t> out;
    out.reserve(text.size() / 3 + 4);
    if (add_bos && vocab_.bos_id >= 0) out.push_back(vocab_.bos_id);
    std::vector<Fragment> frags;
    split_special(text, parse_special, frags);
    bool after_special = true;  // SPM: the space prefix goes in front of the first text
    for (const Fragment& f : frags) {
        if (f.id >= 0) {
            out.push_back(f.id);
            after_special = true;
        } else {
            encode_text(f.text, after_special, out);
            after_special = false;
        }
    }
    return out;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
    std::string out;
    bool strip = spm_mode_ && add_space_prefix_;
    for (int32_t id : ids) {
        check_id(id);
        const std::string& p = pieces_[id];
        if (strip) {
            if (static_cast<TokenType>(vocab_.token_types[id]) == TokenType::CONTROL) {
                out += p;
                continue;
            }
            strip = false;
            if (!p.empty() && p[0] == ' ') {
                out.append(p, 1, std::string::npos);
                continue;
            }
        }
        out += p;
    }
    return out;
}

}  // namespace jllm
