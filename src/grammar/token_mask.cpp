// grammar/token_mask.cpp — see token_mask.h.
#include "grammar/token_mask.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace jllm {

namespace {
constexpr size_t MASK_CACHE = 128;                // masks kept (19 KB each for a 152k vocabulary)
constexpr size_t MAX_MACHINE_STATES = size_t{1} << 16;  // then the memos start again (1 KB a state)
}  // namespace

VocabTrie::VocabTrie(const Tokenizer& tok) : n_vocab_(tok.n_vocab()) {
    const size_t n = static_cast<size_t>(n_vocab_);
    same_.assign(n, -1);
    pieces_.resize(n);
    std::vector<int32_t> ids;
    for (int32_t id = 0; id < n_vocab_; ++id) {
        if (tok.is_eog(id)) {
            eog_.push_back(id);
            continue;
        }
        if (tok.is_control(id)) continue;
        const std::string& piece = tok.piece_ref(id);
        if (piece.empty()) continue;
        pieces_[static_cast<size_t>(id)] = piece;
        ids.push_back(id);
    }
    std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
        return pieces_[static_cast<size_t>(a)] < pieces_[static_cast<size_t>(b)] ||
               (pieces_[static_cast<size_t>(a)] == pieces_[static_cast<size_t>(b)] && a < b);
    });
    // Sorted strings give the preorder directly: keep the path of the previous one, cut it to the
    // common prefix (closing those subtrees), extend it by the rest.
    std::vector<uint32_t> path;
    const std::string* prev = nullptr;
    auto close_to = [&](size_t len) {
        while (path.size() > len) {
            end_[path.back()] = static_cast<uint32_t>(byte_.size());
            path.pop_back();
        }
    };
    for (int32_t id : ids) {
        const std::string& s = pieces_[static_cast<size_t>(id)];
        size_t lcp = 0;
        if (prev != nullptr) {
            while (lcp < s.size() && lcp < prev->size() && s[lcp] == (*prev)[lcp]) ++lcp;
        }
        close_to(lcp);
        for (size_t d = lcp; d < s.size(); ++d) {
            if (d + 1 > 255) throw JllmError("grammar: a token longer than 255 bytes");
            path.push_back(static_cast<uint32_t>(byte_.size()));
            byte_.push_back(static_cast<uint8_t>(s[d]));
            depth_.push_back(static_cast<uint8_t>(d + 1));
            end_.push_back(0);
            first_.push_back(-1);
        }
        max_depth_ = std::max(max_depth_, static_cast<int>(s.size()));
        // Tokens with the same bytes chain from the node, lowest id first.
        const uint32_t at = path.back();
        if (first_[at] < 0) {
            first_[at] = id;
        } else {
            int32_t t = first_[at];
            while (same_[static_cast<size_t>(t)] >= 0) t = same_[static_cast<size_t>(t)];
            same_[static_cast<size_t>(t)] = id;
        }
        prev = &s;
    }
    close_to(0);
}

size_t VocabTrie::bytes() const {
    size_t b = byte_.size() * (sizeof(uint8_t) * 2 + sizeof(uint32_t) + sizeof(int32_t)) + same_.size() * sizeof(int32_t);
    for (const std::string& p : pieces_) b += sizeof(std::string) + (p.size() > 15 ? p.size() : 0);
    return b;
}

GrammarMatcher::GrammarMatcher(Grammar g, std::shared_ptr<const VocabTrie> trie)
    : bm_(std::move(g)), trie_(std::move(trie)) {
    state_ = bm_.initial();
    path_.resize(static_cast<size_t>(trie_->max_depth_) + 1);
}

void GrammarMatcher::walk(std::vector<uint32_t>& mask) {
    const VocabTrie& t = *trie_;
    mask.assign(t.words(), 0u);
    path_[0] = state_;
    const size_t n = t.byte_.size();
    size_t i = 0;
    while (i < n) {
        const uint8_t d = t.depth_[i];
        const ByteMachine::State s = bm_.step(path_[d - 1], t.byte_[i]);
        if (s == ByteMachine::DEAD) {
            i = t.end_[i];
            continue;
        }
        path_[d] = s;
        for (int32_t tok = t.first_[i]; tok >= 0; tok = t.same_[static_cast<size_t>(tok)]) {
            mask[static_cast<size_t>(tok) >> 5] |= 1u << (tok & 31);
        }
        ++i;
    }
    if (bm_.accepting(state_)) {
        for (int32_t e : t.eog()) mask[static_cast<size_t>(e) >> 5] |= 1u << (e & 31);
    }
    ++walks_;
}

const uint32_t* GrammarMatcher::mask() {
    auto it = cache_.find(state_);
    if (it != cache_.end()) {
        lru_.splice(lru_.begin(), lru_, it->second.lru);
        ++hits_;
        return it->second.mask.data();
    }
    std::vector<uint32_t> m;
    if (!cache_.empty() && cache_.size() >= MASK_CACHE) {
        // Reuse the least recently used mask's storage.
        const ByteMachine::State old = lru_.back();
        m.swap(cache_[old].mask);
        cache_.erase(old);
        lru_.pop_back();
    }
    walk(m);
    if (bm_.state_count() > MAX_MACHINE_STATES) {
        state_ = bm_.compact(state_);
        cache_.clear();
        lru_.clear();
    }
    lru_.push_front(state_);
    Cached& c = cache_[state_];
    c.mask.swap(m);
    c.lru = lru_.begin();
    return c.mask.data();
}

bool GrammarMatcher::accept(int32_t token) {
    if (token < 0 || token >= trie_->n_vocab()) return false;
    const std::vector<int32_t>& eog = trie_->eog();
    if (std::find(eog.begin(), eog.end(), token) != eog.end()) return accepting();
    const std::string& piece = trie_->pieces_[static_cast<size_t>(token)];
    if (piece.empty()) return false;
    return accept_text(piece);
}

bool GrammarMatcher::accept_text(std::string_view text) {
    ByteMachine::State s = state_;
    for (char c : text) {
        s = bm_.step(s, static_cast<uint8_t>(c));
        if (s == ByteMachine::DEAD) return false;
    }
    state_ = s;
    if (bm_.state_count() > MAX_MACHINE_STATES) {
        state_ = bm_.compact(state_);
        cache_.clear();
        lru_.clear();
    }
    return true;
}

}  // namespace jllm
