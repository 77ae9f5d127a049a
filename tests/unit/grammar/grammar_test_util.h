// tests/unit/grammar/grammar_test_util.h — matching whole strings and prefixes against a grammar
// through the byte machine, for the grammar tests.
#pragma once

#include <string>

#include "grammar/gbnf.h"
#include "grammar/matcher.h"

namespace jllm::test {

// How far `text` gets: Full (a sentence of the grammar), Prefix (every byte taken, not complete),
// Refused (some byte refused).
enum class Match { Full, Prefix, Refused };

inline Match match_text(ByteMachine& bm, const std::string& text) {
    ByteMachine::State s = bm.initial();
    for (char c : text) {
        s = bm.step(s, static_cast<uint8_t>(c));
        if (s == ByteMachine::DEAD) return Match::Refused;
    }
    return bm.accepting(s) ? Match::Full : Match::Prefix;
}

inline Match match_text(const Grammar& g, const std::string& text) {
    ByteMachine bm(g);
    return match_text(bm, text);
}

inline Match gbnf_match(const std::string& gbnf, const std::string& text) { return match_text(parse_gbnf(gbnf), text); }

}  // namespace jllm::test
