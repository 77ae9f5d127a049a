// grammar/regex_gbnf.h — a JSON Schema `pattern` (an ECMA-262 regular expression, the subset
// json_schema.h names) as a GBNF expression over the characters of a JSON string's content: each
// character the regex matches is written as JSON writes it (" and \ escaped, control characters
// as \uXXXX). An end without an anchor (^ or $) takes any other characters there, as `pattern`
// searches rather than matches.
#pragma once

#include <string>
#include <string_view>

namespace jllm {

// Throws JllmError naming the construct it does not take.
std::string regex_to_gbnf(std::string_view pattern);

}  // namespace jllm
