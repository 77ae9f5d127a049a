// server/json_util.cpp — depth pre-scan, non-throwing parse and dump, UTF-8 validation.
#include "server/json_util.h"

#include <cstdint>

namespace jllm::server {

int json_nesting_depth(std::string_view text, int limit) {
    int depth = 0, deepest = 0;
    bool in_string = false, escaped = false;
    for (const char c : text) {
        if (in_string) {
            if (escaped) {
                escaped = false;
            } else if (c == '\\') {
                escaped = true;
            } else if (c == '"') {
                in_string = false;
            }
            continue;
        }
        if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > deepest) {
                deepest = depth;
                if (deepest > limit) return limit + 1;
            }
        } else if (c == ']' || c == '}') {
            if (depth > 0) depth--;
        }
    }
    return deepest;
}

bool parse_json_body(std::string_view body, Json& out, std::string& error) {
    if (json_nesting_depth(body, MAX_JSON_DEPTH) > MAX_JSON_DEPTH) {
        error = "the JSON body is nested deeper than " + std::to_string(MAX_JSON_DEPTH) + " levels";
        return false;
    }
    try {
        out = Json::parse(body.begin(), body.end());
    } catch (const std::exception& e) {
        error = std::string("invalid JSON body: ") + e.what();
        return false;
    }
    return true;
}

std::string dump_json(const Json& j) {
    try {
        return j.dump(-1, ' ', false, Json::error_handler_t::replace);
    } catch (const std::exception&) {
        return "{}";
    }
}

bool is_valid_utf8(std::string_view s) {
    size_t i = 0;
    const size_t n = s.size();
    while (i < n) {
        const auto c = static_cast<uint8_t>(s[i]);
        if (c < 0x80) {
            i++;
            continue;
        }
        int len = 0;
        uint32_t cp = 0;
        if ((c & 0xE0) == 0xC0) {
            len = 2;
            cp = c & 0x1F;
        } else if ((c & 0xF0) == 0xE0) {
            len = 3;
            cp = c & 0x0F;
        } else if ((c & 0xF8) == 0xF0) {
            len = 4;
            cp = c & 0x07;
        } else {
            return false;
        }
        if (i + static_cast<size_t>(len) > n) return false;
        for (int k = 1; k < len; ++k) {
            const auto cc = static_cast<uint8_t>(s[i + static_cast<size_t>(k)]);
            if ((cc & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (cc & 0x3F);
        }
        // Overlong forms, surrogates and values past U+10FFFF are ill-formed.
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
            (cp >= 0xD800 && cp <= 0xDFFF)) {
            return false;
        }
        i += static_cast<size_t>(len);
    }
    return true;
}

}  // namespace jllm::server
