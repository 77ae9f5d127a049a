// grammar/regex_gbnf.cpp — see regex_gbnf.h. A recursive-descent parser of the regex whose atoms
// become character sets; each set is then written as the JSON string content that decodes to its
// characters.
#include "grammar/regex_gbnf.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"
#include "grammar/grammar.h"

namespace jllm {

namespace {

CharSet range_set(std::initializer_list<std::pair<uint32_t, uint32_t>> r) {
    CharSet s;
    s.ranges.assign(r.begin(), r.end());
    s.normalize();
    return s;
}

std::string class_char(uint32_t c) {
    if (c == ']' || c == '\\' || c == '-' || c == '^') return std::string("\\") + static_cast<char>(c);
    if (c >= 0x20 && c < 0x7F) return std::string(1, static_cast<char>(c));
    if (c <= 0xFF) return strfmt("\\x%02X", c);
    if (c <= 0xFFFF) return strfmt("\\u%04X", c);
    return strfmt("\\U%08X", c);
}

// The set as JSON string content in GBNF: its plain characters as one class, ", \ and the
// control characters as their escapes.
std::string json_chars(const CharSet& set) {
    std::vector<std::string> alts;
    // The plain characters: the set without the control characters, " and \.
    const CharSet allowed = range_set({{0x00, 0x1F}, {'"', '"'}, {'\\', '\\'}}).complement();
    CharSet keep;
    for (const auto& a : set.ranges) {
        for (const auto& b : allowed.ranges) {
            const uint32_t lo = std::max(a.first, b.first), hi = std::min(a.second, b.second);
            if (lo <= hi) keep.ranges.emplace_back(lo, hi);
        }
    }
    keep.normalize();
    if (!keep.ranges.empty()) {
        std::string c = "[";
        for (const auto& r : keep.ranges) {
            c += class_char(r.first);
            if (r.second != r.first) c += "-" + class_char(r.second);
        }
        alts.push_back(c + "]");
    }
    if (set.contains('"')) alts.push_back("\"\\\\\\\"\"");    // \"
    if (set.contains('\\')) alts.push_back("\"\\\\\\\\\"");   // \\ (two backslashes)
    for (uint32_t c = 0; c < 0x20; ++c) {
        if (!set.contains(c)) continue;
        if (c == '\n') alts.push_back("\"\\\\n\"");
        else if (c == '\t') alts.push_back("\"\\\\t\"");
        else if (c == '\r') alts.push_back("\"\\\\r\"");
        else alts.push_back(strfmt("\"\\\\u%04x\"", c));
    }
    if (alts.empty()) throw JllmError("pattern: a character class that matches nothing");
    if (alts.size() == 1) return alts[0];
    std::string out = "(";
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
    return out + ")";
}

class RegexParser {
public:
    explicit RegexParser(std::string_view p) : s_(p) {}

    std::string parse() {
        bool start = false, end = false;
        if (!s_.empty() && s_[0] == '^') {
            start = true;
            i_ = 1;
        }
        size_t n = s_.size();
        if (n > i_ && s_[n - 1] == '$' && (n < 2 || s_[n - 2] != '\\')) {
            end = true;
            s_ = s_.substr(0, n - 1);
        }
        std::string body = alternation();
        if (i_ != s_.size()) fail(std::string("unexpected '") + s_[i_] + "'");
        std::string out = "(" + body + ")";
        if (!start) out = "char* " + out;
        if (!end) out += " char*";
        return out;
    }

private:
    [[noreturn]] void fail(const std::string& what) const {
        throw JllmError(strfmt("pattern: %s at offset %zu", what.c_str(), i_));
    }
    bool eof() const { return i_ >= s_.size(); }
    char peek() const { return eof() ? '\0' : s_[i_]; }

    std::string alternation() {
        std::string out = sequence();
        while (peek() == '|') {
            ++i_;
            out += " | " + sequence();
        }
        return out;
    }

    std::string sequence() {
        std::string out;
        while (!eof() && peek() != '|' && peek() != ')') {
            std::string atom = this->atom();
            atom += quantifier();
            out += (out.empty() ? "" : " ") + atom;
        }
        return out.empty() ? "\"\"" : out;
    }

    std::string quantifier() {
        std::string q;
        const char c = peek();
        if (c == '*' || c == '+' || c == '?') {
            ++i_;
            q = std::string(1, c);
        } else if (c == '{' && i_ + 1 < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_ + 1]))) {
            const size_t close = s_.find('}', i_);
            if (close == std::string_view::npos) fail("unterminated {");
            q = std::string(s_.substr(i_, close - i_ + 1));
            for (char x : q.substr(1, q.size() - 2)) {
                if (!std::isdigit(static_cast<unsigned char>(x)) && x != ',') fail("a bad {m,n}");
            }
            i_ = close + 1;
        } else {
            return "";
        }
        if (peek() == '?') ++i_;  // lazy: the same strings
        if (peek() == '*' || peek() == '+' || peek() == '{') fail("a quantifier after a quantifier");
        return q;
    }

    std::string atom() {
        const char c = peek();
        if (c == '(') {
            ++i_;
            if (peek() == '?') {
                if (i_ + 1 < s_.size() && s_[i_ + 1] == ':') {
                    i_ += 2;
                } else {
                    fail("lookaround and named groups are not supported");
                }
            }
            std::string inner = alternation();
            if (peek() != ')') fail("expected ')'");
            ++i_;
            return "(" + inner + ")";
        }
        if (c == '[') return json_chars(char_class());
        if (c == '.') {
            ++i_;
            return json_chars(range_set({{0, '\n' - 1}, {'\n' + 1, MAX_CODE_POINT}}));
        }
        if (c == '^' || c == '$') fail("an anchor inside the pattern");
        if (c == '*' || c == '+' || c == '?') fail("nothing to repeat");
        if (c == '\\') return json_chars(escape(false));
        CharSet one;
        const uint32_t cp = utf8_char();
        one.ranges.emplace_back(cp, cp);
        return json_chars(one);
    }

    uint32_t utf8_char() {
        uint32_t cp = 0;
        if (!next_code_point(s_, i_, cp)) fail("invalid UTF-8");
        return cp;
    }

    uint32_t hex(int digits) {
        uint32_t v = 0;
        if (!parse_hex_digits(s_, i_, digits, v)) fail("expected hex digits");
        return v;
    }

    // After a backslash (i_ at it): the set it stands for.
    CharSet escape(bool in_class) {
        ++i_;
        if (eof()) fail("a pattern ending in \\");
        const char e = s_[i_++];
        static const CharSet DIGIT = range_set({{'0', '9'}});
        static const CharSet WORD = range_set({{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}});
        static const CharSet SPACE = range_set({{'\t', '\r'}, {' ', ' '}});
        switch (e) {
            case 'd': return DIGIT;
            case 'D': return DIGIT.complement();
            case 'w': return WORD;
            case 'W': return WORD.complement();
            case 's': return SPACE;
            case 'S': return SPACE.complement();
            case 'n': return range_set({{'\n', '\n'}});
            case 't': return range_set({{'\t', '\t'}});
            case 'r': return range_set({{'\r', '\r'}});
            case 'f': return range_set({{'\f', '\f'}});
            case 'v': return range_set({{'\v', '\v'}});
            case 'x': { const uint32_t v = hex(2); return range_set({{v, v}}); }
            case 'u': { const uint32_t v = hex(4); return range_set({{v, v}}); }
            case 'b': if (in_class) return range_set({{'\b', '\b'}}); fail("\\b (word boundaries) is not supported");
            case 'B': fail("\\B is not supported");
            default: break;
        }
        if (std::isdigit(static_cast<unsigned char>(e))) fail("backreferences are not supported");
        if (std::isalnum(static_cast<unsigned char>(e))) fail(std::string("unknown escape \\") + e);
        const uint32_t v = static_cast<unsigned char>(e);
        return range_set({{v, v}});
    }

    CharSet char_class() {
        ++i_;  // [
        bool negate = false;
        if (peek() == '^') {
            negate = true;
            ++i_;
        }
        CharSet set;
        bool first = true;
        while (!eof() && (peek() != ']' || first)) {
            first = false;
            CharSet lo_set;
            uint32_t lo = 0;
            bool single = true;
            if (peek() == '\\') {
                lo_set = escape(true);
                single = lo_set.ranges.size() == 1 && lo_set.ranges[0].first == lo_set.ranges[0].second;
                lo = lo_set.ranges.empty() ? 0 : lo_set.ranges[0].first;
            } else {
                lo = utf8_char();
                lo_set.ranges.emplace_back(lo, lo);
            }
            if (single && peek() == '-' && i_ + 1 < s_.size() && s_[i_ + 1] != ']') {
                ++i_;
                uint32_t hi = 0;
                if (peek() == '\\') {
                    const CharSet h = escape(true);
                    if (h.ranges.size() != 1 || h.ranges[0].first != h.ranges[0].second) fail("a range ending in a class");
                    hi = h.ranges[0].first;
                } else {
                    hi = utf8_char();
                }
                if (hi < lo) fail("a range ends before it starts");
                set.ranges.emplace_back(lo, hi);
            } else {
                set.ranges.insert(set.ranges.end(), lo_set.ranges.begin(), lo_set.ranges.end());
            }
        }
        if (peek() != ']') fail("unterminated [");
        ++i_;
        set.normalize();
        return negate ? set.complement() : set;
    }

    std::string_view s_;
    size_t i_ = 0;
};

}  // namespace

std::string regex_to_gbnf(std::string_view pattern) { return RegexParser(pattern).parse(); }

}  // namespace jllm
