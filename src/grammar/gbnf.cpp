// grammar/gbnf.cpp — a recursive-descent GBNF parser (see gbnf.h). Repetition becomes helper
// rules: x* is S ::= x S | (empty); x{m,n} is m copies of x, then a chain of n - m optional
// copies, each nested in the one before, so a bounded repetition never backtracks.
#include "grammar/gbnf.h"

#include <map>
#include <vector>

#include "core/error.h"

namespace jllm {

GrammarError::GrammarError(int line, int column, const std::string& what)
    : JllmError(strfmt("grammar: line %d, column %d: %s", line, column, what.c_str())), line_(line), column_(column) {}

namespace {

constexpr int MAX_REPEAT = 100000;  // the largest m or n in x{m,n}

class GbnfParser {
public:
    GbnfParser(std::string_view text, std::string_view root) : s_(text), root_name_(root) {}

    Grammar parse() {
        skip(true);
        while (i_ < s_.size()) {
            parse_rule();
            skip(true);
        }
        for (size_t r = 0; r < g_.rules.size(); ++r) {
            if (!defined_[r]) fail_at(first_use_[r], "rule '" + g_.rules[r].name + "' is used but not defined");
        }
        const auto it = ids_.find(std::string(root_name_));
        if (it == ids_.end()) fail_at(s_.size(), "no '" + std::string(root_name_) + "' rule");
        g_.root = it->second;
        try {
            g_.validate();
        } catch (const JllmError& e) {
            fail_at(s_.size(), e.what());
        }
        return std::move(g_);
    }

private:
    using Item = std::vector<GrammarElem>;

    [[noreturn]] void fail_at(size_t pos, const std::string& what) const {
        int line = 1, col = 1;
        for (size_t k = 0; k < pos && k < s_.size(); ++k) {
            if (s_[k] == '\n') {
                ++line;
                col = 1;
            } else {
                ++col;
            }
        }
        throw GrammarError(line, col, what);
    }
    [[noreturn]] void fail(const std::string& what) const { fail_at(i_, what); }

    bool eof() const { return i_ >= s_.size(); }
    char peek() const { return eof() ? '\0' : s_[i_]; }

    // Spaces, tabs, comments; newlines too where `newlines` (inside parentheses, between rules).
    void skip(bool newlines) {
        while (!eof()) {
            const char c = s_[i_];
            if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
                ++i_;
            } else if (c == '#') {
                while (!eof() && s_[i_] != '\n') ++i_;
            } else {
                break;
            }
        }
    }

    static bool name_char(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    }

    std::string parse_name() {
        const size_t b = i_;
        while (!eof() && name_char(s_[i_])) ++i_;
        if (i_ == b) fail("expected a rule name");
        return std::string(s_.substr(b, i_ - b));
    }

    int32_t rule_id(const std::string& name, size_t pos) {
        auto it = ids_.find(name);
        if (it != ids_.end()) return it->second;
        const int32_t id = static_cast<int32_t>(g_.rules.size());
        g_.rules.push_back(GrammarRule{name, {}});
        defined_.push_back(false);
        first_use_.push_back(pos);
        ids_.emplace(name, id);
        return id;
    }

    int32_t new_rule(const std::string& base, std::vector<std::vector<GrammarElem>> alts) {
        const int32_t id = static_cast<int32_t>(g_.rules.size());
        g_.rules.push_back(GrammarRule{base + "-" + std::to_string(id), std::move(alts)});
        defined_.push_back(true);
        first_use_.push_back(i_);
        return id;
    }

    void parse_rule() {
        const size_t at = i_;
        const std::string name = parse_name();
        skip(false);
        if (s_.substr(i_, 3) != "::=") fail("expected '::=' after the rule name '" + name + "'");
        i_ += 3;
        skip(true);
        const int32_t id = rule_id(name, at);
        if (defined_[static_cast<size_t>(id)]) fail_at(at, "rule '" + name + "' is defined twice");
        defined_[static_cast<size_t>(id)] = true;
        current_ = name;
        g_.rules[static_cast<size_t>(id)].alts = parse_alternates(false);
        skip(false);
        if (!eof() && peek() != '\n') fail(std::string("unexpected '") + peek() + "'");
    }

    std::vector<std::vector<GrammarElem>> parse_alternates(bool nested) {
        std::vector<std::vector<GrammarElem>> alts;
        alts.push_back(parse_sequence(nested));
        for (;;) {
            skip(nested);
            if (!nested && peek() == '\n') {
                // A rule continues on the next line that starts with '|'.
                const size_t save = i_;
                skip(true);
                if (peek() != '|') {
                    i_ = save;
                    break;
                }
            }
            if (peek() != '|') break;
            ++i_;
            skip(true);
            alts.push_back(parse_sequence(nested));
        }
        return alts;
    }

    std::vector<GrammarElem> parse_sequence(bool nested) {
        std::vector<GrammarElem> seq;
        Item last;  // the element a postfix operator repeats
        for (;;) {
            skip(nested);
            if (eof()) break;
            const char c = peek();
            if (c == '|' || c == ')' || c == '\n') break;
            if (c == '*' || c == '+' || c == '?' || c == '{') {
                if (last.empty()) fail(std::string("'") + c + "' has nothing to repeat");
                seq.resize(seq.size() - last.size());
                last = repeat(last);
                seq.insert(seq.end(), last.begin(), last.end());
                last.clear();  // x** is not a thing
                continue;
            }
            last = parse_item();
            seq.insert(seq.end(), last.begin(), last.end());
        }
        return seq;
    }

    Item parse_item() {
        const char c = peek();
        if (c == '"') return parse_literal();
        if (c == '[') return {chars(parse_class())};
        if (c == '.') {
            ++i_;
            CharSet any;
            any.ranges.emplace_back(0, MAX_CODE_POINT);
            return {chars(std::move(any))};
        }
        if (c == '(') {
            ++i_;
            skip(true);
            auto alts = parse_alternates(true);
            skip(true);
            if (peek() != ')') fail("expected ')'");
            ++i_;
            return {GrammarElem{GrammarElem::Rule, new_rule(current_, std::move(alts))}};
        }
        if (c == '<') fail("token references (<...>) are not supported");
        if (name_char(c)) {
            const size_t at = i_;
            const std::string name = parse_name();
            return {GrammarElem{GrammarElem::Rule, rule_id(name, at)}};
        }
        fail(std::string("unexpected '") + c + "'");
    }

    GrammarElem chars(CharSet set) {
        set.normalize();
        g_.sets.push_back(std::move(set));
        return GrammarElem{GrammarElem::Chars, static_cast<int32_t>(g_.sets.size() - 1)};
    }

    // One code point of UTF-8 text, or an escape sequence.
    uint32_t parse_char() {
        if (eof()) fail("unexpected end of the grammar");
        const unsigned char c = static_cast<unsigned char>(s_[i_]);
        if (c == '\\') {
            ++i_;
            if (eof()) fail("unfinished escape");
            const char e = s_[i_++];
            switch (e) {
                case 'n': return '\n';
                case 'r': return '\r';
                case 't': return '\t';
                case '\\': case '"': case '\'': case '[': case ']': case '-': case '^': case '/': return static_cast<uint32_t>(e);
                case 'x': return parse_hex(2);
                case 'u': return parse_hex(4);
                case 'U': return parse_hex(8);
                default: i_ -= 2; fail(std::string("unknown escape '\\") + e + "'");
            }
        }
        uint32_t cp = 0;
        if (!next_code_point(s_, i_, cp)) fail("invalid UTF-8");
        return cp;
    }

    uint32_t parse_hex(int digits) {
        uint32_t v = 0;
        if (!parse_hex_digits(s_, i_, digits, v)) fail(strfmt("expected %d hex digits", digits));
        if (v > MAX_CODE_POINT) fail("code point out of range");
        return v;
    }

    Item parse_literal() {
        ++i_;  // "
        Item item;
        while (peek() != '"') {
            if (eof() || peek() == '\n') fail("unterminated string");
            CharSet one;
            const uint32_t cp = parse_char();
            one.ranges.emplace_back(cp, cp);
            item.push_back(chars(std::move(one)));
        }
        ++i_;
        if (item.empty()) {  // "" matches the empty string: an empty rule keeps repetition simple
            item.push_back(GrammarElem{GrammarElem::Rule, new_rule(current_, {{}})});
        }
        return item;
    }

    CharSet parse_class() {
        ++i_;  // [
        bool negate = false;
        if (peek() == '^') {
            negate = true;
            ++i_;
        }
        CharSet set;
        while (peek() != ']') {
            if (eof() || peek() == '\n') fail("unterminated character class");
            const uint32_t lo = parse_char();
            uint32_t hi = lo;
            if (peek() == '-' && i_ + 1 < s_.size() && s_[i_ + 1] != ']') {
                ++i_;
                hi = parse_char();
                if (hi < lo) fail("a range ends before it starts");
            }
            set.ranges.emplace_back(lo, hi);
        }
        ++i_;
        set.normalize();
        if (negate) set = set.complement();
        if (set.ranges.empty()) fail("the character class matches nothing");
        return set;
    }

    int parse_count() {
        const size_t b = i_;
        int64_t v = 0;
        while (peek() >= '0' && peek() <= '9') {
            v = v * 10 + (peek() - '0');
            if (v > MAX_REPEAT) fail(strfmt("repetition count over %d", MAX_REPEAT));
            ++i_;
        }
        if (i_ == b) fail("expected a number");
        return static_cast<int>(v);
    }

    // The operator at i_ applied to x; returns what replaces x in the sequence.
    Item repeat(Item x) {
        const char op = peek();
        ++i_;
        int lo = 0, hi = -1;  // hi < 0: unbounded
        if (op == '+') lo = 1;
        else if (op == '?') hi = 1;
        else if (op == '{') {
            skip(false);
            lo = parse_count();
            skip(false);
            hi = lo;
            if (peek() == ',') {
                ++i_;
                skip(false);
                hi = peek() == '}' ? -1 : parse_count();
                skip(false);
            }
            if (peek() != '}') fail("expected '}'");
            ++i_;
            if (hi >= 0 && hi < lo) fail("x{m,n} needs m <= n");
        }
        if (x.size() > 1) x = {GrammarElem{GrammarElem::Rule, new_rule(current_, {x})}};
        const GrammarElem e = x[0];
        Item out(static_cast<size_t>(lo), e);
        if (hi < 0) {
            // S ::= e S | (empty)
            const int32_t s = new_rule(current_, {});
            g_.rules[static_cast<size_t>(s)].alts = {{e, GrammarElem{GrammarElem::Rule, s}}, {}};
            out.push_back(GrammarElem{GrammarElem::Rule, s});
        } else if (hi > lo) {
            // O_1 ::= e | (empty); O_k ::= e O_{k-1} | (empty)
            int32_t o = new_rule(current_, {{e}, {}});
            for (int k = 2; k <= hi - lo; ++k) o = new_rule(current_, {{e, GrammarElem{GrammarElem::Rule, o}}, {}});
            out.push_back(GrammarElem{GrammarElem::Rule, o});
        }
        if (out.empty()) out.push_back(GrammarElem{GrammarElem::Rule, new_rule(current_, {{}})});  // x{0}
        return out;
    }

    std::string_view s_;
    std::string_view root_name_;
    size_t i_ = 0;
    Grammar g_;
    std::map<std::string, int32_t> ids_;
    std::vector<bool> defined_;
    std::vector<size_t> first_use_;
    std::string current_ = "rule";
};

}  // namespace

Grammar parse_gbnf(std::string_view text, std::string_view root) { return GbnfParser(text, root).parse(); }

}  // namespace jllm
