// grammar/grammar.h — a context-free grammar over Unicode code points, as parsed from GBNF
// (grammar/gbnf.h) or built from a JSON Schema (grammar/json_schema.h). Every rule is a list of
// alternatives, every alternative a sequence of elements: a character set (one code point for a
// literal, ranges for a class) or a reference to a rule. Repetition and grouping are already
// expanded into helper rules, so the matcher (grammar/matcher.h) sees only these two kinds.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace jllm {

constexpr uint32_t MAX_CODE_POINT = 0x10FFFF;

// The grammar sources' text (GBNF, regex patterns): the code point at s[i], i advanced past it;
// false (i unchanged) where s holds no valid UTF-8 there.
bool next_code_point(std::string_view s, size_t& i, uint32_t& cp);
// The value of the hex digits s[i .. i + digits), i advanced past them; false (i at the first
// non-digit) where there are fewer.
bool parse_hex_digits(std::string_view s, size_t& i, int digits, uint32_t& value);

// A set of code points as sorted, disjoint, non-adjacent inclusive ranges.
struct CharSet {
    std::vector<std::pair<uint32_t, uint32_t>> ranges;
    bool contains(uint32_t cp) const;
    bool intersects(uint32_t lo, uint32_t hi) const;  // any code point in [lo, hi]
    // Sorts and merges `ranges`; complement: the set of every code point not in it.
    void normalize();
    CharSet complement() const;
};

struct GrammarElem {
    enum Kind : uint8_t { Chars, Rule };
    Kind kind = Chars;
    int32_t index = 0;  // Chars: into Grammar::sets; Rule: into Grammar::rules
};

struct GrammarRule {
    std::string name;
    std::vector<std::vector<GrammarElem>> alts;  // an empty alternative matches the empty string
};

struct Grammar {
    std::vector<GrammarRule> rules;
    std::vector<CharSet> sets;
    int32_t root = -1;

    // Checks that every rule has an alternative and no rule reaches itself before consuming a code
    // point (left recursion, which no top-down matcher can walk); throws JllmError naming the rule.
    void validate() const;
};

}  // namespace jllm
