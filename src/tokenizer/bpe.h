// tokenizer/bpe.h — byte-level BPE (tokenizer.ggml.model = gpt2): merges one pre-token piece,
// lowest merge rank first and leftmost among equals, on token ids (no strings in the loop).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/token_map.h"

namespace jllm {

struct BpeScratch {
    struct Sym {
        int32_t id;
        int32_t prev;
        int32_t next;
    };
    struct Cand {
        int32_t rank;
        int32_t pos;  // left symbol
        int32_t left;
        int32_t right;
        int32_t merged;
    };
    std::vector<Sym> syms;
    std::vector<Cand> heap;
    std::string text;  // the piece in the byte-level alphabet
};

class BpeModel {
public:
    // `map` must outlive the model. Merges whose parts or result are not tokens
    // are skipped (counted in skipped_merges()).
    void build(const TokenTextMap& map, const std::vector<std::string>& merges);
    // Appends the ids of one piece (raw bytes). ignore_merges: a piece that is a token is
    // emitted as that token. A byte without a token of its own is dropped, as Hugging Face's BPE
    // does without a model-level unk token (SmolLM2 lacks a few control bytes; its GGUF's
    // unknown_token_id is <|endoftext|>, which must not appear inside a prompt).
    void encode_piece(std::string_view piece, bool ignore_merges, std::vector<int32_t>& out,
                      BpeScratch& s) const;
    size_t n_merges() const { return merges_.size(); }
    size_t skipped_merges() const { return skipped_; }

private:
    const TokenTextMap* map_ = nullptr;
    MergeMap merges_;
    int32_t byte_ids_[256] = {};
    size_t skipped_ = 0;
};

}  // namespace jllm
