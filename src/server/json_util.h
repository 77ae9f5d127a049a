// server/json_util.h — JSON at the HTTP boundary: a nesting-depth pre-scan (nlohmann's DOM
// builder and dump() recurse, so pathological nesting never reaches them), parsing that reports
// instead of throwing, serialisation that never throws on ill-formed UTF-8, and a UTF-8 check.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace jllm::server {

using Json = nlohmann::ordered_json;  // keeps the order of a request's keys (a schema's properties)

// Deepest array/object nesting any request may have; real OpenAI requests stay under 10.
constexpr int MAX_JSON_DEPTH = 64;

// Nesting depth of `text` (brackets inside strings do not count); stops scanning once the
// depth exceeds `limit` and returns limit + 1.
int json_nesting_depth(std::string_view text, int limit);

// Parses `body` after the depth pre-scan. On failure returns false with a message for the client.
bool parse_json_body(std::string_view body, Json& out, std::string& error);

// Compact JSON; ill-formed UTF-8 inside strings becomes U+FFFD instead of throwing.
std::string dump_json(const Json& j);

bool is_valid_utf8(std::string_view s);

}  // namespace jllm::server
