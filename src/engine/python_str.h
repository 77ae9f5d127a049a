// engine/python_str.h — the string methods the chat templates call, with the semantics of their
// Python originals: startswith / endswith / `in`, lstrip / rstrip / strip of '\n', and
// str.strip() (Jinja's `trim`) over Python's whitespace code points.
#pragma once

#include <string>
#include <string_view>

namespace jllm {

inline bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
inline bool ends_with(std::string_view s, std::string_view p) {
    return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}
inline bool contains(std::string_view s, std::string_view p) { return s.find(p) != std::string_view::npos; }

// s.lstrip('\n'), s.rstrip('\n'), s.strip('\n').
std::string lstrip_nl(std::string_view s);
std::string rstrip_nl(std::string_view s);
std::string strip_nl(std::string_view s);

// s.strip(): drops leading and trailing characters that Python's str.isspace() accepts. Bytes
// that are not well-formed UTF-8 are not whitespace (Python would see U+FFFD there).
std::string python_strip(std::string_view s);

}  // namespace jllm
