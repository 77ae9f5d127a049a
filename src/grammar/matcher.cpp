// grammar/matcher.cpp — see matcher.h.
#include "grammar/matcher.h"

#include <algorithm>

#include "core/error.h"

namespace jllm {

namespace {

constexpr int32_t END_MARK = -1;             // GrammarElem index of an alternative's end
constexpr size_t MAX_NODES = size_t{8} << 20;  // stacks of a runaway grammar stop here
constexpr int MAX_EXPAND_DEPTH = 1 << 16;

void sort_unique(std::vector<int32_t>& v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
}

}  // namespace

size_t GrammarMachine::NodesHash::operator()(const std::vector<int32_t>& v) const {
    uint64_t h = 1469598103934665603ull;
    for (int32_t x : v) {
        h ^= static_cast<uint32_t>(x);
        h *= 1099511628211ull;
    }
    return static_cast<size_t>(h);
}

GrammarMachine::GrammarMachine(Grammar g) : g_(std::move(g)) {
    g_.validate();
    alt_begin_.resize(g_.rules.size());
    for (size_t r = 0; r < g_.rules.size(); ++r) {
        for (const auto& alt : g_.rules[r].alts) {
            alt_begin_[r].push_back(static_cast<int32_t>(elems_.size()));
            elems_.insert(elems_.end(), alt.begin(), alt.end());
            elems_.push_back(GrammarElem{GrammarElem::Rule, END_MARK});
        }
    }
    nodes_.push_back(Node{-1, -1});  // 0: the bottom
    std::vector<int32_t> start;
    for (int32_t a : alt_begin_[static_cast<size_t>(g_.root)]) {
        const std::vector<int32_t>& c = closure(node(a, 0));
        start.insert(start.end(), c.begin(), c.end());
    }
    initial_ = intern(std::move(start));
}

int32_t GrammarMachine::node(int32_t pos, int32_t parent) {
    const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(pos)) << 32) | static_cast<uint32_t>(parent);
    auto it = node_ids_.find(key);
    if (it != node_ids_.end()) return it->second;
    if (nodes_.size() >= MAX_NODES) throw JllmError("grammar: too many parser stacks (the grammar is too ambiguous)");
    const int32_t id = static_cast<int32_t>(nodes_.size());
    nodes_.push_back(Node{pos, parent});
    node_ids_.emplace(key, id);
    return id;
}

void GrammarMachine::expand(int32_t n, std::vector<int32_t>& out, int depth) {
    if (depth > MAX_EXPAND_DEPTH) throw JllmError("grammar: rules nest too deeply without matching a character");
    if (n == 0) {
        out.push_back(0);
        return;
    }
    const Node nd = nodes_[static_cast<size_t>(n)];
    const GrammarElem e = elems_[static_cast<size_t>(nd.pos)];
    if (e.kind == GrammarElem::Chars) {
        out.push_back(n);
    } else if (e.index == END_MARK) {
        expand(nd.parent, out, depth + 1);
    } else {
        // A reference last in its alternative continues with the parent directly (a tail call), so
        // right recursion (x* is S ::= x S) keeps the stack's depth instead of growing it.
        const bool last = elems_[static_cast<size_t>(nd.pos) + 1].index == END_MARK &&
                          elems_[static_cast<size_t>(nd.pos) + 1].kind == GrammarElem::Rule;
        const int32_t cont = last ? nd.parent : node(nd.pos + 1, nd.parent);
        for (int32_t a : alt_begin_[static_cast<size_t>(e.index)]) expand(node(a, cont), out, depth + 1);
    }
}

const std::vector<int32_t>& GrammarMachine::closure(int32_t n) {
    auto it = closures_.find(n);
    if (it != closures_.end()) return it->second;
    std::vector<int32_t> out;
    expand(n, out, 0);
    sort_unique(out);
    return closures_.emplace(n, std::move(out)).first->second;
}

GrammarMachine::State GrammarMachine::intern(std::vector<int32_t> nodes) {
    sort_unique(nodes);
    if (nodes.empty()) return DEAD;
    auto it = state_ids_.find(nodes);
    if (it != state_ids_.end()) return it->second;
    const State id = static_cast<State>(states_.size());
    accepting_.push_back(nodes.front() == 0 ? 1 : 0);
    std::vector<int32_t> tops;
    for (int32_t n : nodes) {
        if (n != 0) tops.push_back(elems_[static_cast<size_t>(nodes_[static_cast<size_t>(n)].pos)].index);
    }
    sort_unique(tops);
    tops_.push_back(std::move(tops));
    state_ids_.emplace(nodes, id);
    states_.push_back(std::move(nodes));
    return id;
}

GrammarMachine::State GrammarMachine::advance(State s, uint32_t cp) {
    const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(s)) << 21) | cp;
    auto it = advance_.find(key);
    if (it != advance_.end()) return it->second;
    std::vector<int32_t> next;
    // states_[s] may move while closure() interns nodes; closures only read nodes_.
    const std::vector<int32_t> stacks = states_[static_cast<size_t>(s)];
    for (int32_t n : stacks) {
        if (n == 0) continue;
        const Node nd = nodes_[static_cast<size_t>(n)];
        if (!g_.sets[static_cast<size_t>(elems_[static_cast<size_t>(nd.pos)].index)].contains(cp)) continue;
        const std::vector<int32_t>& c = closure(node(nd.pos + 1, nd.parent));
        next.insert(next.end(), c.begin(), c.end());
    }
    const State r = intern(std::move(next));
    advance_.emplace(key, r);
    return r;
}

bool GrammarMachine::takes_any(State s, uint32_t lo, uint32_t hi) const {
    for (int32_t set : tops_[static_cast<size_t>(s)]) {
        if (g_.sets[static_cast<size_t>(set)].intersects(lo, hi)) return true;
    }
    return false;
}

void GrammarMachine::clear_states() {
    states_.clear();
    accepting_.clear();
    tops_.clear();
    state_ids_.clear();
    advance_.clear();
    initial_ = DEAD;
    std::vector<int32_t> start;
    for (int32_t a : alt_begin_[static_cast<size_t>(g_.root)]) {
        const std::vector<int32_t>& c = closure(node(a, 0));
        start.insert(start.end(), c.begin(), c.end());
    }
    initial_ = intern(std::move(start));
}

// ---------------------------------------------------------------------------------------------

ByteMachine::ByteMachine(Grammar g) : gm_(std::move(g)) {}

ByteMachine::State ByteMachine::initial() { return intern(Pos{gm_.initial()}); }

ByteMachine::State ByteMachine::intern(const Pos& p) {
    const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(p.g)) << 26) | (static_cast<uint64_t>(p.acc) << 5) |
                         (static_cast<uint64_t>(p.need) << 3) | p.len;
    auto it = ids_.find(key);
    if (it != ids_.end()) return it->second;
    const State id = static_cast<State>(states_.size());
    states_.push_back(p);
    trans_.resize(states_.size() * 256, UNKNOWN);
    ids_.emplace(key, id);
    return id;
}

ByteMachine::State ByteMachine::compute(State s, uint8_t b) {
    Pos p = states_[static_cast<size_t>(s)];
    if (p.need == 0) {
        if (b < 0x80) {
            const GrammarMachine::State g = gm_.advance(p.g, b);
            return g == GrammarMachine::DEAD ? DEAD : intern(Pos{g});
        }
        if (b >= 0xC2 && b <= 0xDF) p = Pos{p.g, b & 0x1Fu, 1, 2};
        else if (b >= 0xE0 && b <= 0xEF) p = Pos{p.g, b & 0x0Fu, 2, 3};
        else if (b >= 0xF0 && b <= 0xF4) p = Pos{p.g, b & 0x07u, 3, 4};
        else return DEAD;  // a continuation byte, or a byte no UTF-8 holds
    } else {
        if ((b & 0xC0) != 0x80) return DEAD;
        p.acc = (p.acc << 6) | (b & 0x3Fu);
        --p.need;
    }
    static constexpr uint32_t MIN_OF_LEN[5] = {0, 0, 0x80, 0x800, 0x10000};
    const unsigned shift = 6u * p.need;
    uint32_t lo = p.acc << shift, hi = lo | ((1u << shift) - 1);
    lo = std::max(lo, MIN_OF_LEN[p.len]);
    hi = std::min(hi, MAX_CODE_POINT);
    if (lo > hi || (lo >= 0xD800 && hi <= 0xDFFF)) return DEAD;  // overlong, too large, a surrogate
    if (p.need == 0) {
        const GrammarMachine::State g = gm_.advance(p.g, p.acc);
        return g == GrammarMachine::DEAD ? DEAD : intern(Pos{g});
    }
    return gm_.takes_any(p.g, lo, hi) ? intern(p) : DEAD;
}

bool ByteMachine::accepting(State s) const {
    const Pos& p = states_[static_cast<size_t>(s)];
    return p.need == 0 && gm_.accepting(p.g);
}

bool ByteMachine::can_continue(State s) const {
    const Pos& p = states_[static_cast<size_t>(s)];
    return p.need > 0 || gm_.can_continue(p.g);
}

ByteMachine::State ByteMachine::compact(State keep) {
    Pos p = states_[static_cast<size_t>(keep)];
    const std::vector<int32_t> stacks = gm_.stacks(p.g);
    gm_.clear_states();
    p.g = gm_.intern(stacks);
    states_.clear();
    ids_.clear();
    trans_.clear();
    return intern(p);
}

}  // namespace jllm
