// tokenizer/unicode_util.cpp — UTF-8 validation / decoding / lossy decoding, the byte-level alphabet, NFC.
#include "tokenizer/unicode_util.h"

#include <cstdlib>
#include <utf8proc.h>

#include "core/error.h"

namespace jllm {

namespace {

// Second-byte range for each lead byte (Unicode Table 3-7); later bytes are always 80..BF.
bool second_byte_ok(uint8_t lead, uint8_t b) {
    switch (lead) {
        case 0xE0: return b >= 0xA0 && b <= 0xBF;
        case 0xED: return b >= 0x80 && b <= 0x9F;
        case 0xF0: return b >= 0x90 && b <= 0xBF;
        case 0xF4: return b >= 0x80 && b <= 0x8F;
        default: return b >= 0x80 && b <= 0xBF;
    }
}

}  // namespace

size_t utf8_scan(std::string_view s, size_t i, bool* complete, bool* truncated) {
    const uint8_t c = static_cast<uint8_t>(s[i]);
    *complete = false;
    bool trunc_dummy = false;
    if (!truncated) truncated = &trunc_dummy;
    *truncated = false;
    if (c < 0x80) {
        *complete = true;
        return 1;
    }
    size_t need;
    if (c >= 0xC2 && c <= 0xDF) need = 2;
    else if (c >= 0xE0 && c <= 0xEF) need = 3;
    else if (c >= 0xF0 && c <= 0xF4) need = 4;
    else return 1;  // 80..C1, F5..FF never start a character
    size_t n = 1;
    while (n < need && i + n < s.size()) {
        const uint8_t b = static_cast<uint8_t>(s[i + n]);
        const bool ok = (n == 1) ? second_byte_ok(c, b) : (b >= 0x80 && b <= 0xBF);
        if (!ok) break;
        ++n;
    }
    *complete = (n == need);
    *truncated = !*complete && i + n == s.size();
    return n;
}

size_t utf8_valid_len(std::string_view s, size_t i) {
    bool complete = false;
    const size_t n = utf8_scan(s, i, &complete, nullptr);
    return complete ? n : 0;
}

size_t utf8_decode(std::string_view s, size_t i, uint32_t* cp) {
    const size_t n = utf8_valid_len(s, i);
    if (n == 0) return 0;
    const auto b = [&](size_t k) { return static_cast<uint32_t>(static_cast<uint8_t>(s[i + k])); };
    switch (n) {
        case 1: *cp = b(0); break;
        case 2: *cp = ((b(0) & 0x1Fu) << 6) | (b(1) & 0x3Fu); break;
        case 3: *cp = ((b(0) & 0x0Fu) << 12) | ((b(1) & 0x3Fu) << 6) | (b(2) & 0x3Fu); break;
        default: *cp = ((b(0) & 0x07u) << 18) | ((b(1) & 0x3Fu) << 12) | ((b(2) & 0x3Fu) << 6) | (b(3) & 0x3Fu);
    }
    return n;
}

bool utf8_is_valid(std::string_view s) {
    size_t i = 0;
    while (i < s.size()) {
        if (static_cast<uint8_t>(s[i]) < 0x80) {
            ++i;
            continue;
        }
        const size_t n = utf8_valid_len(s, i);
        if (n == 0) return false;
        i += n;
    }
    return true;
}

std::string utf8_lossy(std::string_view s) {
    if (utf8_is_valid(s)) return std::string(s);
    std::string out;
    out.reserve(s.size() + 16);
    size_t i = 0;
    while (i < s.size()) {
        bool complete = false;
        const size_t n = utf8_scan(s, i, &complete, nullptr);
        if (complete) out.append(s.data() + i, n);
        else out.append("\xEF\xBF\xBD");
        i += n;
    }
    return out;
}

void utf8_append(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

std::string nfc_normalize(std::string_view s) {
    bool maybe = false;
    for (char ch : s) {
        if (static_cast<uint8_t>(ch) >= 0xCC) {
            maybe = true;
            break;
        }
    }
    if (!maybe) return std::string(s);
    utf8proc_uint8_t* dst = nullptr;
    const utf8proc_ssize_t n =
        utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                     static_cast<utf8proc_ssize_t>(s.size()), &dst,
                     static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
    if (n < 0) {
        throw JllmError(strfmt("tokenizer: NFC normalization failed: %s",
                               utf8proc_errmsg(n)));
    }
    std::string out(reinterpret_cast<const char*>(dst), static_cast<size_t>(n));
    std::free(dst);
    return out;
}

ByteUnicodeMap::ByteUnicodeMap() {
    for (auto& v : cp_to_byte) v = -1;
    uint32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
        const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        byte_to_cp[b] = printable ? static_cast<uint32_t>(b) : next++;
        byte_to_utf8[b].clear();
        utf8_append(byte_to_utf8[b], byte_to_cp[b]);
        cp_to_byte[byte_to_cp[b]] = static_cast<int16_t>(b);
    }
}

const ByteUnicodeMap& ByteUnicodeMap::get() {
    static const ByteUnicodeMap map;
    return map;
}

std::string byte_level_decode(std::string_view text) {
    const ByteUnicodeMap& m = ByteUnicodeMap::get();
    std::string out;
    out.reserve(text.size());
    size_t i = 0;
    while (i < text.size()) {
        const uint8_t c = static_cast<uint8_t>(text[i]);
        size_t n = utf8_valid_len(text, i);
        if (n == 0) {  // not UTF-8 at all: copy the byte
            out.push_back(static_cast<char>(c));
            ++i;
            continue;
        }
        uint32_t cp;
        if (n == 1) cp = c;
        else if (n == 2) cp = ((c & 0x1Fu) << 6) | (static_cast<uint8_t>(text[i + 1]) & 0x3Fu);
        else cp = 0x200;  // 3- and 4-byte characters are never in the alphabet
        if (cp < 0x200 && m.cp_to_byte[cp] >= 0) out.push_back(static_cast<char>(m.cp_to_byte[cp]));
        else out.append(text.data() + i, n);
        i += n;
    }
    return out;
}

}  // namespace jllm
