// grammar/matcher.h — the grammar as a pushdown automaton over code points, and the same over
// bytes (UTF-8). A state is the set of stacks the grammar can be in after the text so far; a
// stack's top is the next character set to match, below it the continuations of the rules it is
// inside. Stacks are interned nodes (position, parent), so stacks that share their bottom share
// storage and a set of stacks is a sorted vector of node ids, interned as a state id. Every
// transition is memoized: the first pass over a state builds it, later ones look it up, which is
// what makes the vocabulary walk of grammar/token_mask.h cheap.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"

namespace jllm {

class GrammarMachine {
public:
    using State = int32_t;
    static constexpr State DEAD = -1;

    explicit GrammarMachine(Grammar g);

    State initial() const { return initial_; }
    // The state after `cp`, or DEAD when no stack takes it.
    State advance(State s, uint32_t cp);
    // The whole root matched on some stack (the text so far is a sentence of the grammar).
    bool accepting(State s) const { return accepting_[static_cast<size_t>(s)] != 0; }
    // Some stack still wants a character (more text can follow).
    bool can_continue(State s) const { return !tops_[static_cast<size_t>(s)].empty(); }
    // Some stack's next character set holds a code point in [lo, hi].
    bool takes_any(State s, uint32_t lo, uint32_t hi) const;

    // The memos and states grow with use; clear() drops them (a state id from before is gone; its
    // stacks, see stacks(), can be interned again with intern()).
    size_t state_count() const { return states_.size(); }
    void clear_states();
    const std::vector<int32_t>& stacks(State s) const { return states_[static_cast<size_t>(s)]; }
    State intern(std::vector<int32_t> nodes);

private:
    struct Node {
        int32_t pos;     // position in elems_ of the next element to match (or an alternative's end)
        int32_t parent;  // the node below; 0 is the bottom (the root matched)
    };
    int32_t node(int32_t pos, int32_t parent);
    // The stacks `n` stands for with every rule reference at the top expanded: nodes whose top is
    // a character set, and 0 where the whole root is matched. Memoized per node.
    const std::vector<int32_t>& closure(int32_t n);
    void expand(int32_t n, std::vector<int32_t>& out, int depth);

    Grammar g_;
    // Every alternative's elements laid end to end, each alternative followed by an END marker
    // (kind Rule, index -1); alt_begin_[r]: the start positions of rule r's alternatives.
    std::vector<GrammarElem> elems_;
    std::vector<std::vector<int32_t>> alt_begin_;

    std::vector<Node> nodes_;
    std::unordered_map<uint64_t, int32_t> node_ids_;
    std::unordered_map<int32_t, std::vector<int32_t>> closures_;

    struct NodesHash {
        size_t operator()(const std::vector<int32_t>& v) const;
    };
    std::vector<std::vector<int32_t>> states_;   // sorted node ids (0 first where accepting)
    std::vector<char> accepting_;                // per state
    std::vector<std::vector<int32_t>> tops_;     // per state: the character-set index of every stack
    std::unordered_map<std::vector<int32_t>, State, NodesHash> state_ids_;
    std::unordered_map<uint64_t, State> advance_;    // (state, cp) -> state
    State initial_ = DEAD;
};

// The machine over bytes: a grammar state and a partial UTF-8 sequence. A sequence is cut short
// as soon as no code point it could still become is taken by the state (so a token that ends
// inside a character is allowed only when the character can be finished).
class ByteMachine {
public:
    using State = int32_t;
    static constexpr State DEAD = -1;

    explicit ByteMachine(Grammar g);

    State initial();
    State step(State s, uint8_t byte) {
        const size_t at = static_cast<size_t>(s) * 256 + byte;
        int32_t t = trans_[at];
        if (t == UNKNOWN) {
            t = compute(s, byte);  // may add states (and grow trans_)
            trans_[at] = t;
        }
        return t;
    }
    // At a character boundary in an accepting grammar state (end of generation may come).
    bool accepting(State s) const;
    // More bytes can follow.
    bool can_continue(State s) const;
    size_t state_count() const { return states_.size(); }
    // Drops every state and memo but `keep`'s; returns its new id.
    State compact(State keep);

private:
    static constexpr int32_t UNKNOWN = -2;
    struct Pos {
        GrammarMachine::State g;
        uint32_t acc = 0;   // code point bits so far
        uint8_t need = 0;   // continuation bytes still to come
        uint8_t len = 0;    // the sequence's length
        bool operator==(const Pos& o) const { return g == o.g && acc == o.acc && need == o.need && len == o.len; }
    };
    State intern(const Pos& p);
    State compute(State s, uint8_t byte);

    GrammarMachine gm_;
    std::vector<Pos> states_;
    std::unordered_map<uint64_t, State> ids_;
    std::vector<int32_t> trans_;  // [state][256]
};

}  // namespace jllm
