// tokenizer/token_map.cpp — the open-addressing tables behind token and merge lookups.
#include "tokenizer/token_map.h"

#include <xxhash.h>

namespace jllm {

namespace {

size_t pow2_at_least(size_t n) {
    size_t p = 16;
    while (p < n) p <<= 1;
    return p;
}

size_t hash_text(std::string_view s) { return static_cast<size_t>(XXH3_64bits(s.data(), s.size())); }

}  // namespace

void TokenTextMap::build(const std::vector<std::string>& texts) {
    texts_ = &texts;
    slots_.assign(pow2_at_least(texts.size() * 2 + 1), -1);
    mask_ = slots_.size() - 1;
    for (size_t id = 0; id < texts.size(); ++id) {
        const std::string& t = texts[id];
        for (size_t i = hash_text(t) & mask_;; i = (i + 1) & mask_) {
            if (slots_[i] < 0) {
                slots_[i] = static_cast<int32_t>(id);
                break;
            }
            if ((*texts_)[slots_[i]] == t) break;  // duplicate text: first id wins
        }
    }
}

int32_t TokenTextMap::find(std::string_view text) const {
    if (slots_.empty()) return -1;
    for (size_t i = hash_text(text) & mask_;; i = (i + 1) & mask_) {
        const int32_t id = slots_[i];
        if (id < 0) return -1;
        if ((*texts_)[id] == text) return id;
    }
}

void MergeMap::reserve(size_t n) {
    const size_t cap = pow2_at_least(n * 2 + 1);
    if (cap <= keys_.size()) return;
    std::vector<uint64_t> old_keys = std::move(keys_);
    std::vector<BpeMerge> old_vals = std::move(vals_);
    keys_.assign(cap, EMPTY);
    vals_.assign(cap, BpeMerge{});
    mask_ = cap - 1;
    count_ = 0;
    for (size_t i = 0; i < old_keys.size(); ++i) {
        if (old_keys[i] == EMPTY) continue;
        const uint64_t k = old_keys[i];
        insert(static_cast<int32_t>(k >> 32), static_cast<int32_t>(k & 0xffffffffu), old_vals[i]);
    }
}

void MergeMap::grow() { reserve(keys_.empty() ? 16 : keys_.size()); }

void MergeMap::insert(int32_t left, int32_t right, BpeMerge m) {
    if ((count_ + 1) * 2 > keys_.size()) grow();
    const uint64_t key = make_key(left, right);
    for (size_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
        if (keys_[i] == EMPTY) {
            keys_[i] = key;
            vals_[i] = m;
            ++count_;
            return;
        }
        if (keys_[i] == key) return;
    }
}

}  // namespace jllm
