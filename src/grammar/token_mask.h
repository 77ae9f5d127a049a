// grammar/token_mask.h — which tokens a grammar allows next, without walking the vocabulary token
// by token. The vocabulary's byte strings form a trie (VocabTrie, built once per model); a mask is
// one depth-first walk of the trie against the byte machine (grammar/matcher.h), a subtree left
// as soon as its prefix is refused, every byte transition memoized. Masks are cached per machine
// state, so a state seen again (inside a string, after a comma) costs a lookup.
//
// A mask is a bitmask over the vocabulary: bit (t % 32) of word t / 32 set when token t may come
// next. End-of-generation tokens are allowed only where the grammar is complete; control tokens
// never (their text is not part of the output); tokens without text never.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/matcher.h"

namespace jllm {

class Tokenizer;

class VocabTrie {
public:
    explicit VocabTrie(const Tokenizer& tok);
    int32_t n_vocab() const { return n_vocab_; }
    size_t words() const { return static_cast<size_t>((n_vocab_ + 31) / 32); }
    const std::vector<int32_t>& eog() const { return eog_; }
    size_t node_count() const { return byte_.size(); }
    size_t bytes() const;  // memory held

    // Nodes in depth-first preorder; node i holds one byte at depth depth_[i] (1 = a token's first
    // byte); its subtree is [i, end_[i]); first_[i]: a token whose bytes end here (-1: none), more
    // through same_[token].
    std::vector<uint8_t> byte_;
    std::vector<uint8_t> depth_;
    std::vector<uint32_t> end_;
    std::vector<int32_t> first_;
    std::vector<int32_t> same_;  // [n_vocab]
    std::vector<std::string> pieces_;  // [n_vocab] the bytes a token adds (empty: never allowed)
    int max_depth_ = 0;

private:
    int32_t n_vocab_ = 0;
    std::vector<int32_t> eog_;
};

// One constrained generation: the grammar's byte machine at the text generated so far.
class GrammarMatcher {
public:
    GrammarMatcher(Grammar g, std::shared_ptr<const VocabTrie> trie);

    // The tokens allowed now ([trie.words()] words); valid until the next call of any method.
    const uint32_t* mask();
    // Advances by `token`'s bytes; false (and no change) when the grammar does not allow it.
    bool accept(int32_t token);
    // The text so far is complete (end of generation allowed) / nothing else may follow.
    bool accepting() const { return bm_.accepting(state_); }
    bool finished() const { return accepting() && !bm_.can_continue(state_); }
    // Feeds raw text (a prefix the grammar must take, e.g. a trigger); false when it does not.
    bool accept_text(std::string_view text);

    // Masks computed by a trie walk and masks served from the cache, since construction.
    int64_t walks() const { return walks_; }
    int64_t cache_hits() const { return hits_; }

private:
    void walk(std::vector<uint32_t>& mask);
    void limit_growth();

    ByteMachine bm_;
    std::shared_ptr<const VocabTrie> trie_;
    ByteMachine::State state_;
    // LRU of masks by machine state.
    struct Cached {
        std::vector<uint32_t> mask;
        std::list<ByteMachine::State>::iterator lru;
    };
    std::unordered_map<ByteMachine::State, Cached> cache_;
    std::list<ByteMachine::State> lru_;
    std::vector<ByteMachine::State> path_;  // the walk's states by depth
    int64_t walks_ = 0, hits_ = 0;
};

}  // namespace jllm
