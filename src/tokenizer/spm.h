// tokenizer/spm.h — SentencePiece BPE (tokenizer.ggml.model = llama): characters merge by the
// highest score of the merged piece, unknown characters fall back to <0xNN> byte tokens.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/token_map.h"

namespace jllm {

struct SpmScratch {
    struct Sym {
        int32_t start;  // byte offset in the text
        int32_t len;    // 0 once merged into its left neighbour
        int32_t prev;
        int32_t next;
    };
    struct Cand {
        float score;
        int32_t left;
        int32_t right;
        int32_t len;  // left.len + right.len when queued; a mismatch marks it stale
    };
    std::vector<Sym> syms;
    std::vector<Cand> heap;
};

class SpmModel {
public:
    // `scores` and `map` must outlive the model.
    void build(const std::vector<float>& scores, const TokenTextMap& map);
    // Appends the ids of `text`, already escaped (spaces as U+2581, prefix added).
    void encode(std::string_view text, int32_t unk_id, std::vector<int32_t>& out,
                SpmScratch& s) const;

private:
    const TokenTextMap* map_ = nullptr;
    const std::vector<float>* scores_ = nullptr;
    int32_t byte_ids_[256] = {};
};

}  // namespace jllm
