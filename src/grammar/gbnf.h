// grammar/gbnf.h — GBNF text (the grammar format llama.cpp users write) into a Grammar:
//   name ::= alternatives        rules, one per line (a line starting with `|` continues the rule
//                                before it; parentheses may span lines); `root` is the start
//   a b | c                      sequence and alternation; ( ... ) grouping
//   "literal"  [a-z0-9_]  [^"\\]  .   literals with escapes (\n \r \t \\ \" \xHH \uHHHH
//                                \UHHHHHHHH), character classes with ranges and negation, any
//                                character
//   x*  x+  x?  x{m}  x{m,}  x{m,n}   repetition of the element before (a whole literal, a class,
//                                a rule or a group)
//   # comment                    to the end of the line
// Anything else, an undefined rule, a duplicate rule, a missing root, left recursion: GrammarError
// naming the line and column (1-based; the column counts bytes).
#pragma once

#include <string>
#include <string_view>

#include "core/error.h"
#include "grammar/grammar.h"

namespace jllm {

class GrammarError : public JllmError {
public:
    GrammarError(int line, int column, const std::string& what);
    int line() const { return line_; }
    int column() const { return column_; }

private:
    int line_, column_;
};

// `root`: the start rule's name.
Grammar parse_gbnf(std::string_view text, std::string_view root = "root");

}  // namespace jllm
