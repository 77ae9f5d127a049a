// tokenizer/bpe.cpp — byte-level BPE merge loop: symbols in a linked list, candidate merges in a
// min-heap keyed (rank, position) with lazy invalidation, so long pieces stay O(n log n).
#include "tokenizer/bpe.h"

#include <algorithm>

#include "core/error.h"
#include "tokenizer/unicode_util.h"

namespace jllm {

namespace {

bool cand_after(const BpeScratch::Cand& a, const BpeScratch::Cand& b) {
    if (a.rank != b.rank) return a.rank > b.rank;
    return a.pos > b.pos;
}

}  // namespace

void BpeModel::build(const TokenTextMap& map, const std::vector<std::string>& merges) {
    map_ = &map;
    const ByteUnicodeMap& bu = ByteUnicodeMap::get();
    for (int b = 0; b < 256; ++b) byte_ids_[b] = map.find(bu.byte_to_utf8[b]);
    merges_.reserve(merges.size());
    std::string joined;
    for (size_t r = 0; r < merges.size(); ++r) {
        const std::string& m = merges[r];
        // The separator is the first space after the first character: a byte-level token never
        // holds a space, but be lenient with a space as the very first character.
        const size_t sp = m.find(' ', 1);
        if (sp == std::string::npos) {
            throw JllmError(strfmt("tokenizer: merge %zu ('%s') has no space separator", r,
                                   m.c_str()));
        }
        const std::string_view l(m.data(), sp);
        const std::string_view rt(m.data() + sp + 1, m.size() - sp - 1);
        const int32_t il = map.find(l);
        const int32_t ir = map.find(rt);
        joined.assign(l);
        joined.append(rt);
        const int32_t im = map.find(joined);
        if (il < 0 || ir < 0 || im < 0) {
            ++skipped_;
            continue;
        }
        merges_.insert(il, ir, BpeMerge{static_cast<int32_t>(r), im});
    }
}

void BpeModel::encode_piece(std::string_view piece, bool ignore_merges, std::vector<int32_t>& out,
                            BpeScratch& s) const {
    if (piece.empty()) return;
    const ByteUnicodeMap& bu = ByteUnicodeMap::get();
    if (ignore_merges) {
        s.text.clear();
        for (char c : piece) s.text += bu.byte_to_utf8[static_cast<uint8_t>(c)];
        const int32_t id = map_->find(s.text);
        if (id >= 0) {
            out.push_back(id);
            return;
        }
    }
    s.syms.clear();
    for (char c : piece) {
        const int32_t id = byte_ids_[static_cast<uint8_t>(c)];
        if (id < 0) continue;
        const int32_t i = static_cast<int32_t>(s.syms.size());
        s.syms.push_back({id, i - 1, i + 1});
    }
    const int32_t n = static_cast<int32_t>(s.syms.size());
    if (n == 0) return;
    s.syms.back().next = -1;
    if (n == 1) {
        out.push_back(s.syms[0].id);
        return;
    }
    s.heap.clear();
    auto push_pair = [&](int32_t pos) {
        const int32_t nx = s.syms[pos].next;
        if (pos < 0 || nx < 0) return;
        const BpeMerge m = merges_.find(s.syms[pos].id, s.syms[nx].id);
        if (m.rank < 0) return;
        s.heap.push_back({m.rank, pos, s.syms[pos].id, s.syms[nx].id, m.merged});
        std::push_heap(s.heap.begin(), s.heap.end(), cand_after);
    };
    for (int32_t i = 0; i + 1 < n; ++i) push_pair(i);
    while (!s.heap.empty()) {
        std::pop_heap(s.heap.begin(), s.heap.end(), cand_after);
        const BpeScratch::Cand c = s.heap.back();
        s.heap.pop_back();
        BpeScratch::Sym& l = s.syms[c.pos];
        if (l.id != c.left || l.next < 0) continue;  // stale: left changed or merged away
        BpeScratch::Sym& r = s.syms[l.next];
        if (r.id != c.right) continue;
        const int32_t rnext = r.next;
        r.id = -1;  // removed
        l.id = c.merged;
        l.next = rnext;
        if (rnext >= 0) s.syms[rnext].prev = c.pos;
        if (l.prev >= 0) push_pair(l.prev);
        push_pair(c.pos);
    }
    for (int32_t i = 0; i >= 0; i = s.syms[i].next) out.push_back(s.syms[i].id);
}

}  // namespace jllm
