// engine/python_json.h — JSON written the way Python's json.dumps(ensure_ascii=False,
// sort_keys=False) writes it, which is what the chat templates' `tojson` prints: keys in the
// given order, ", " and ": " separators (or newline + `indent` spaces), non-ASCII kept, floats
// in Python's repr. Parsing keeps key order (nlohmann::ordered_json) so the output can follow it.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace jllm {

using OrderedJson = nlohmann::ordered_json;

// Parses `text` keeping key order. Invalid JSON -> JllmError naming `what`.
OrderedJson parse_ordered_json(std::string_view text, const char* what);

// json.dumps of a parsed value; `indent` < 0: one line.
std::string python_json_dumps_value(const OrderedJson& j, int indent = -1);

// Re-serialises JSON text the way Python's json.dumps(ensure_ascii=False) does — keys in the
// given order, ", " and ": " separators (or newline + `indent` spaces when indent >= 0), non-ASCII
// kept, floats in Python repr. Invalid JSON -> JllmError.
std::string python_json_dumps(std::string_view json_text, int indent = -1);

}  // namespace jllm
