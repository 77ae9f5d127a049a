// tokenizer/token_map.h — lookup tables on the encode path: token text -> id (open addressing
// over string_views into the vocabulary, so lookups never build a std::string) and a BPE merge
// table (left id, right id) -> (rank, merged id).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace jllm {

class TokenTextMap {
public:
    // `texts` must outlive the map; later duplicates of a text do not replace the first id.
    void build(const std::vector<std::string>& texts);
    int32_t find(std::string_view text) const;  // -1 if absent

private:
    const std::vector<std::string>* texts_ = nullptr;
    std::vector<int32_t> slots_;  // token id or -1; size is a power of two
    size_t mask_ = 0;
};

struct BpeMerge {
    int32_t rank = -1;    // position in tokenizer.ggml.merges; lower merges first
    int32_t merged = -1;  // id of left+right
};

class MergeMap {
public:
    void reserve(size_t n);
    void insert(int32_t left, int32_t right, BpeMerge m);  // keeps the first (lowest) rank
    BpeMerge find(int32_t left, int32_t right) const {
        if (keys_.empty()) return {};
        const uint64_t key = make_key(left, right);
        for (size_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
            if (keys_[i] == EMPTY) return {};
            if (keys_[i] == key) return vals_[i];
        }
    }
    size_t size() const { return count_; }

private:
    static constexpr uint64_t EMPTY = ~0ull;
    static uint64_t make_key(int32_t l, int32_t r) {
        return (static_cast<uint64_t>(static_cast<uint32_t>(l)) << 32) | static_cast<uint32_t>(r);
    }
    static size_t hash(uint64_t k) {
        k ^= k >> 33;
        k *= 0xff51afd7ed558ccdull;
        k ^= k >> 33;
        return static_cast<size_t>(k);
    }
    void grow();
    std::vector<uint64_t> keys_;
    std::vector<BpeMerge> vals_;
    size_t mask_ = 0;
    size_t count_ = 0;
};

}  // namespace jllm
