// engine/python_str.cpp — newline stripping and Python's str.strip() over UTF-8 text.
#include "engine/python_str.h"

#include <cstdint>

#include "tokenizer/unicode_util.h"

namespace jllm {

namespace {

// Python's str.isspace() code points (Jinja's `trim` is str.strip()).
bool is_python_space(uint32_t cp) {
    return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0 ||
           cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 ||
           cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

}  // namespace

std::string lstrip_nl(std::string_view s) {
    size_t b = 0;
    while (b < s.size() && s[b] == '\n') ++b;
    return std::string(s.substr(b));
}

std::string rstrip_nl(std::string_view s) {
    size_t e = s.size();
    while (e > 0 && s[e - 1] == '\n') --e;
    return std::string(s.substr(0, e));
}

std::string strip_nl(std::string_view s) { return lstrip_nl(rstrip_nl(s)); }

std::string python_strip(std::string_view s) {
    size_t b = 0;
    while (b < s.size()) {
        uint32_t cp = 0;
        const size_t len = utf8_decode(s, b, &cp);
        if (len == 0 || !is_python_space(cp)) break;
        b += len;
    }
    size_t e = s.size();
    while (e > b) {
        size_t start = e - 1;
        while (start > b && (static_cast<unsigned char>(s[start]) & 0xc0) == 0x80) --start;
        uint32_t cp = 0;
        const size_t len = utf8_decode(s, start, &cp);
        if (len != e - start || !is_python_space(cp)) break;
        e = start;
    }
    return std::string(s.substr(b, e - b));
}

}  // namespace jllm
