// tokenizer/spm.cpp — SentencePiece BPE: a max-heap of adjacent pairs keyed (score, leftmost),
// merging only when the concatenation is a token; leftovers go through byte fallback.
#include "tokenizer/spm.h"

#include <algorithm>
#include <cstdio>

#include "tokenizer/unicode_util.h"

namespace jllm {

namespace {

bool cand_after(const SpmScratch::Cand& a, const SpmScratch::Cand& b) {
    if (a.score != b.score) return a.score < b.score;
    return a.left > b.left;
}

}  // namespace

void SpmModel::build(const std::vector<float>& scores, const TokenTextMap& map) {
    map_ = &map;
    scores_ = &scores;
    char buf[8];
    for (int b = 0; b < 256; ++b) {
        std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
        byte_ids_[b] = map.find(buf);
    }
}

void SpmModel::encode(std::string_view text, int32_t unk_id, std::vector<int32_t>& out,
                      SpmScratch& s) const {
    if (text.empty()) return;
    s.syms.clear();
    for (size_t i = 0; i < text.size();) {
        const size_t n = std::min(text.size() - i, utf8_lead_len(static_cast<uint8_t>(text[i])));
        const int32_t k = static_cast<int32_t>(s.syms.size());
        s.syms.push_back({static_cast<int32_t>(i), static_cast<int32_t>(n), k - 1, k + 1});
        i += n;
    }
    s.syms.back().next = -1;
    s.heap.clear();
    auto try_pair = [&](int32_t left) {
        if (left < 0) return;
        const int32_t right = s.syms[left].next;
        if (right < 0) return;
        const int32_t len = s.syms[left].len + s.syms[right].len;
        const int32_t id = map_->find(text.substr(s.syms[left].start, len));
        if (id < 0) return;
        const float score = static_cast<size_t>(id) < scores_->size() ? (*scores_)[id] : 0.0f;
        s.heap.push_back({score, left, right, len});
        std::push_heap(s.heap.begin(), s.heap.end(), cand_after);
    };
    for (int32_t i = 0; i + 1 < static_cast<int32_t>(s.syms.size()); ++i) try_pair(i);
    while (!s.heap.empty()) {
        std::pop_heap(s.heap.begin(), s.heap.end(), cand_after);
        const SpmScratch::Cand c = s.heap.back();
        s.heap.pop_back();
        SpmScratch::Sym& l = s.syms[c.left];
        SpmScratch::Sym& r = s.syms[c.right];
        if (l.len == 0 || r.len == 0 || l.next != c.right || l.len + r.len != c.len) continue;
        l.len += r.len;
        r.len = 0;
        l.next = r.next;
        if (r.next >= 0) s.syms[r.next].prev = c.left;
        try_pair(l.prev);
        try_pair(c.left);
    }
    for (int32_t i = 0; i >= 0; i = s.syms[i].next) {
        const SpmScratch::Sym& sym = s.syms[i];
        const std::string_view piece = text.substr(sym.start, sym.len);
        const int32_t id = map_->find(piece);
        if (id >= 0) {
            out.push_back(id);
            continue;
        }
        for (char c : piece) {
            const int32_t b = byte_ids_[static_cast<uint8_t>(c)];
            if (b >= 0) out.push_back(b);
            else if (unk_id >= 0) out.push_back(unk_id);
        }
    }
}

}  // namespace jllm
