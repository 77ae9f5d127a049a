// grammar/grammar.cpp — character sets and the grammar's structural checks (grammar.h).
#include "grammar/grammar.h"

#include <utf8proc.h>

#include <algorithm>

#include "core/error.h"

namespace jllm {

bool next_code_point(std::string_view s, size_t& i, uint32_t& cp) {
    utf8proc_int32_t c = -1;
    const utf8proc_ssize_t n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + i),
                                                static_cast<utf8proc_ssize_t>(s.size() - i), &c);
    if (n <= 0 || c < 0) return false;
    cp = static_cast<uint32_t>(c);
    i += static_cast<size_t>(n);
    return true;
}

bool parse_hex_digits(std::string_view s, size_t& i, int digits, uint32_t& value) {
    value = 0;
    for (int k = 0; k < digits; ++k, ++i) {
        const char h = i < s.size() ? s[i] : '\0';
        const int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
        if (d < 0) return false;
        value = value * 16 + static_cast<uint32_t>(d);
    }
    return true;
}

bool CharSet::contains(uint32_t cp) const {
    // Ranges are sorted: the first range ending at or after cp decides.
    auto it = std::lower_bound(ranges.begin(), ranges.end(), cp,
                               [](const std::pair<uint32_t, uint32_t>& r, uint32_t v) { return r.second < v; });
    return it != ranges.end() && it->first <= cp;
}

bool CharSet::intersects(uint32_t lo, uint32_t hi) const {
    auto it = std::lower_bound(ranges.begin(), ranges.end(), lo,
                               [](const std::pair<uint32_t, uint32_t>& r, uint32_t v) { return r.second < v; });
    return it != ranges.end() && it->first <= hi;
}

void CharSet::normalize() {
    std::sort(ranges.begin(), ranges.end());
    std::vector<std::pair<uint32_t, uint32_t>> out;
    for (const auto& r : ranges) {
        if (r.first > r.second) continue;
        if (!out.empty() && r.first <= out.back().second + 1) {
            out.back().second = std::max(out.back().second, r.second);
        } else {
            out.push_back(r);
        }
    }
    ranges.swap(out);
}

CharSet CharSet::complement() const {
    CharSet c;
    uint32_t next = 0;
    for (const auto& r : ranges) {
        if (r.first > next) c.ranges.emplace_back(next, r.first - 1);
        next = r.second + 1;
    }
    if (next <= MAX_CODE_POINT) c.ranges.emplace_back(next, MAX_CODE_POINT);
    return c;
}

void Grammar::validate() const {
    const size_t n = rules.size();
    if (root < 0 || static_cast<size_t>(root) >= n) throw JllmError("grammar: no root rule");
    for (const GrammarRule& r : rules) {
        if (r.alts.empty()) throw JllmError("grammar: rule '" + r.name + "' has no alternative");
        for (const auto& alt : r.alts) {
            for (const GrammarElem& e : alt) {
                const size_t limit = e.kind == GrammarElem::Rule ? n : sets.size();
                if (e.index < 0 || static_cast<size_t>(e.index) >= limit) {
                    throw JllmError("grammar: rule '" + r.name + "' refers to a missing element");
                }
            }
        }
    }
    // Nullable rules (they can match the empty string), to a fixed point.
    std::vector<char> nullable(n, 0);
    for (bool changed = true; changed;) {
        changed = false;
        for (size_t i = 0; i < n; ++i) {
            if (nullable[i]) continue;
            for (const auto& alt : rules[i].alts) {
                const bool all = std::all_of(alt.begin(), alt.end(), [&](const GrammarElem& e) {
                    return e.kind == GrammarElem::Rule && nullable[static_cast<size_t>(e.index)];
                });
                if (all) {
                    nullable[i] = 1;
                    changed = true;
                    break;
                }
            }
        }
    }
    // Rules each rule can start with before consuming anything; a cycle there is left recursion.
    std::vector<std::vector<int32_t>> starts(n);
    for (size_t i = 0; i < n; ++i) {
        for (const auto& alt : rules[i].alts) {
            for (const GrammarElem& e : alt) {
                if (e.kind != GrammarElem::Rule) break;
                starts[i].push_back(e.index);
                if (!nullable[static_cast<size_t>(e.index)]) break;
            }
        }
    }
    std::vector<char> color(n, 0);  // 0 new, 1 on the path, 2 done
    std::vector<std::pair<int32_t, size_t>> path;
    for (size_t s = 0; s < n; ++s) {
        if (color[s]) continue;
        path.emplace_back(static_cast<int32_t>(s), 0);
        color[s] = 1;
        while (!path.empty()) {
            auto& [r, next] = path.back();
            if (next == starts[static_cast<size_t>(r)].size()) {
                color[static_cast<size_t>(r)] = 2;
                path.pop_back();
                continue;
            }
            const int32_t t = starts[static_cast<size_t>(r)][next++];
            if (color[static_cast<size_t>(t)] == 1) {
                throw JllmError("grammar: rule '" + rules[static_cast<size_t>(t)].name +
                                "' is left-recursive (it can reach itself before matching a character)");
            }
            if (color[static_cast<size_t>(t)] == 0) {
                color[static_cast<size_t>(t)] = 1;
                path.emplace_back(t, 0);
            }
        }
    }
}

}  // namespace jllm
