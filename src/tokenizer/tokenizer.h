// tokenizer/tokenizer.h — text <-> token ids for the engine, CLI and server: byte-level BPE with
// the family's pre-tokenizer, or SentencePiece BPE; special and added tokens; end-of-generation
// ids. Immutable after construction: encode/decode are const and safe to call from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/bpe.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/spm.h"
#include "tokenizer/token_map.h"
#include "tokenizer/vocab.h"

namespace jllm {

class GgufFile;

class Tokenizer {
public:
    // Throws JllmError on bad metadata (unknown model, bad ids, inconsistent array lengths).
    static std::unique_ptr<Tokenizer> from_gguf(const GgufFile& f);
    static std::unique_ptr<Tokenizer> from_vocab(TokenizerVocab v);
    // Internal tables point into the vocabulary, so a Tokenizer stays where it was built.
    Tokenizer(const Tokenizer&) = delete;
    Tokenizer& operator=(const Tokenizer&) = delete;

    // Text (any bytes; ill-formed UTF-8 is first replaced by U+FFFD per maximal subpart) to ids.
    // add_bos: prepend bos_id() when the vocabulary has one. parse_special: control tokens
    // written in the text (<|im_start|>) become their ids; otherwise they are plain text. Added
    // (user-defined) tokens such as Qwen's <think> are always recognised, as in Hugging Face.
    std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const;
    // Concatenated pieces (control tokens as their text); for SPM the space that the encoder
    // puts in front of the text is removed again. Throws JllmError on an id out of range.
    std::string decode(const std::vector<int32_t>& ids) const;
    // Raw bytes of one token (may be part of a UTF-8 character). Throws on a bad id.
    std::string token_to_piece(int32_t id) const;
    // The same bytes without a copy; the id must be valid (checked by JLLM_ASSERT).
    const std::string& piece_ref(int32_t id) const;

    int32_t n_vocab() const { return static_cast<int32_t>(vocab_.tokens.size()); }
    int32_t bos_id() const { return vocab_.bos_id; }
    int32_t eos_id() const { return vocab_.eos_id; }
    int32_t unk_id() const { return vocab_.unk_id; }
    int32_t pad_id() const { return vocab_.pad_id; }
    bool add_bos() const { return add_bos_; }
    bool add_space_prefix() const { return add_space_prefix_; }
    bool nfc() const { return nfc_; }
    bool is_eog(int32_t id) const;
    const std::vector<int32_t>& eog_ids() const { return eog_ids_; }
    bool is_control(int32_t id) const;
    TokenType token_type(int32_t id) const;
    int32_t find_token(std::string_view text) const { return text_map_.find(text); }
    const std::string& token_text(int32_t id) const;
    const std::string& model() const { return vocab_.model; }
    const std::string& pre() const { return vocab_.pre; }
    const std::string& chat_template() const { return vocab_.chat_template; }
    bool is_spm() const { return spm_mode_; }

private:
    Tokenizer() = default;
    void init();
    struct Fragment {
        std::string_view text;  // raw text when id < 0
        int32_t id = -1;
    };
    void split_special(std::string_view text, bool parse_special, std::vector<Fragment>& out) const;
    void encode_text(std::string_view text, bool first, std::vector<int32_t>& out) const;
    void check_id(int32_t id) const;

    TokenizerVocab vocab_;
    bool spm_mode_ = false;
    bool add_bos_ = false;
    bool add_space_prefix_ = false;
    bool nfc_ = false;
    bool ignore_merges_ = false;
    TokenTextMap text_map_;
    std::vector<std::string> pieces_;  // decoded bytes per id
    std::vector<int32_t> eog_ids_;
    std::vector<uint8_t> eog_flag_;
    // Tokens matched inside text, grouped by first byte, longest first.
    struct Matchable {
        int32_t id;
        bool control;
        bool lstrip;
        bool rstrip;
    };
    std::vector<Matchable> match_by_byte_[256];
    std::unique_ptr<PreTokenizer> pre_tok_;
    BpeModel bpe_;
    SpmModel spm_;
};

}  // namespace jllm
