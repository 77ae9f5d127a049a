// tests/unit/grammar/test_gbnf.cpp — the GBNF parser and the matcher, construct by construct:
// hand-written strings accepted, prefixes recognised, the rest refused; grammars that do not
// parse name the line and column.
#include <gtest/gtest.h>

#include <string>

#include "grammar/gbnf.h"
#include "grammar_test_util.h"

using namespace jllm;
using jllm::test::gbnf_match;
using jllm::test::Match;

namespace {

void expect_full(const std::string& g, const std::string& text) {
    EXPECT_EQ(gbnf_match(g, text), Match::Full) << "grammar: " << g << "\ntext: " << text;
}
void expect_prefix(const std::string& g, const std::string& text) {
    EXPECT_EQ(gbnf_match(g, text), Match::Prefix) << "grammar: " << g << "\ntext: " << text;
}
void expect_refused(const std::string& g, const std::string& text) {
    EXPECT_EQ(gbnf_match(g, text), Match::Refused) << "grammar: " << g << "\ntext: " << text;
}

// The error a grammar gives: its line and column, and that the message names them.
void expect_error(const std::string& g, int line, int column, const std::string& part) {
    try {
        (void)parse_gbnf(g);
        ADD_FAILURE() << "parsed: " << g;
    } catch (const GrammarError& e) {
        EXPECT_EQ(e.line(), line) << e.what();
        EXPECT_EQ(e.column(), column) << e.what();
        EXPECT_NE(std::string(e.what()).find("line " + std::to_string(line) + ", column " + std::to_string(column)),
                  std::string::npos)
            << e.what();
        EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
}

}  // namespace

TEST(Gbnf, LiteralsAndEscapes) {
    expect_full(R"(root ::= "hello")", "hello");
    expect_prefix(R"(root ::= "hello")", "hel");
    expect_refused(R"(root ::= "hello")", "help");
    expect_refused(R"(root ::= "hello")", "hello!");
    expect_full(R"(root ::= "a\nb\t\"\\")", "a\nb\t\"\\");
    expect_full(R"(root ::= "\x41\u00e9\U0001F600")", "A\xC3\xA9\xF0\x9F\x98\x80");
    expect_full("root ::= \"caf\xC3\xA9\"", "caf\xC3\xA9");  // UTF-8 in the grammar
    expect_refused("root ::= \"caf\xC3\xA9\"", "cafe");
    expect_full(R"(root ::= "")", "");
}

TEST(Gbnf, CharacterClasses) {
    const std::string g = R"(root ::= [a-z0-9_]+)";
    expect_full(g, "abc_09");
    expect_refused(g, "abC");
    expect_prefix(g, "");
    const std::string neg = R"(root ::= "\"" [^"\\]* "\"")";
    expect_full(neg, "\"it's\"");
    expect_refused(neg, "\"a\\");
    expect_full(neg, "\"\xE2\x82\xAC\"");  // a multi-byte character inside the negated class
    expect_full(R"(root ::= [\]\-\^]+)", "]-^");
    expect_full(R"(root ::= [\x00-\x1F])", std::string("\x01", 1));
    expect_full(R"(root ::= .)", "\xF0\x9F\x98\x80");
    expect_refused(R"(root ::= .)", "ab");
}

TEST(Gbnf, RepetitionOperators) {
    expect_full(R"(root ::= "a"*)", "");
    expect_full(R"(root ::= "a"*)", "aaaa");
    expect_prefix(R"(root ::= "a"+)", "");
    expect_full(R"(root ::= "a"+)", "a");
    expect_full(R"(root ::= "ab"? "c")", "c");
    expect_full(R"(root ::= "ab"? "c")", "abc");
    expect_refused(R"(root ::= "ab"? "c")", "ababc");
    expect_full(R"(root ::= "xy"*)", "xyxy");  // a whole literal repeats
    expect_refused(R"(root ::= "xy"*)", "xyy");
    const std::string exact = R"(root ::= [0-9]{3})";
    expect_prefix(exact, "12");
    expect_full(exact, "123");
    expect_refused(exact, "1234");
    const std::string at_least = R"(root ::= [0-9]{2,})";
    expect_prefix(at_least, "1");
    expect_full(at_least, "12");
    expect_full(at_least, "123456789");
    const std::string between = R"(root ::= "a"{1,3} "b")";
    expect_refused(between, "b");
    expect_full(between, "ab");
    expect_full(between, "aaab");
    expect_refused(between, "aaaab");
    expect_full(R"(root ::= "a"{0} "b")", "b");
    expect_full(R"(root ::= ("a" | "b"){2} "!")", "ba!");
}

TEST(Gbnf, AlternationGroupingRulesComments) {
    const std::string g = R"(# a comment line
root   ::= greeting ", " name   # trailing comment
greeting ::= "hello" | "hi"
name ::= ( [A-Z] [a-z]* ) | "you"
)";
    expect_full(g, "hello, World");
    expect_full(g, "hi, you");
    expect_refused(g, "hey, you");
    expect_prefix(g, "hi, ");
    // A rule continued on the next line by '|', and parentheses across lines.
    const std::string multi = "root ::= \"a\"\n  | \"b\"\n  | ( \"c\"\n    \"d\" )\n";
    expect_full(multi, "a");
    expect_full(multi, "b");
    expect_full(multi, "cd");
    // Right recursion nests.
    const std::string nest = R"g(root ::= "(" root ")" | "x")g";
    expect_full(nest, "((x))");
    expect_refused(nest, "((x)))");
    expect_prefix(nest, "(((");
    // Rules may be used before they are defined, in any order.
    expect_full("root ::= b\nb ::= c c\nc ::= \"z\"", "zz");
}

TEST(Gbnf, AmbiguousGrammarsKeepEveryStack) {
    // Both alternatives stay alive until the text decides.
    const std::string g = R"(root ::= "ab" "c" | "a" "bd" | [a-z]+ "!")";
    expect_full(g, "abc");
    expect_full(g, "abd");
    expect_full(g, "abx!");
    expect_prefix(g, "abe");  // the third alternative still takes it
    expect_refused(g, "ab1");
}

TEST(Gbnf, ErrorsNameLineAndColumn) {
    expect_error("root ::= \"a\" | b", 1, 16, "rule 'b' is used but not defined");
    expect_error("root ::= \"a\"\nx ::= [a-", 2, 10, "unterminated character class");
    expect_error("root = \"a\"", 1, 6, "expected '::='");
    expect_error("root ::= \"abc", 1, 14, "unterminated string");
    expect_error("root ::= \"a\"\nroot ::= \"b\"", 2, 1, "defined twice");
    expect_error("main ::= \"a\"", 1, 13, "no 'root' rule");
    expect_error("root ::= \"a\" )", 1, 14, "unexpected ')'");
    expect_error("root ::= * \"a\"", 1, 10, "nothing to repeat");
    expect_error("root ::= \"a\"{3,1}", 1, 18, "m <= n");
    expect_error("root ::= \"\\q\"", 1, 11, "unknown escape");
    expect_error("root ::= [z-a]", 1, 14, "ends before it starts");
    expect_error("root ::= ( \"a\"", 1, 15, "expected ')'");
    expect_error("root ::= root \"a\" | \"b\"", 1, 24, "left-recursive");
    expect_error("root ::= x \"a\"\nx ::= \"\" | root", 2, 16, "left-recursive");
    expect_error("root ::= <[1000]>", 1, 10, "token references");
}
