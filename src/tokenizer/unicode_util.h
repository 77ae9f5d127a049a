// tokenizer/unicode_util.h — the UTF-8 and Unicode helpers the tokenizer needs: strict decoding,
// lossy decoding of arbitrary bytes (invalid sequences become U+FFFD exactly as Python's
// errors="replace" does), the GPT-2 byte <-> printable-character map of byte-level BPE, and NFC
// via utf8proc.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace jllm {

// Length of the well-formed UTF-8 sequence starting at s[i], or 0 if the bytes there are not
// one (Unicode Table 3-7: no overlongs, no surrogates, nothing above U+10FFFF).
size_t utf8_valid_len(std::string_view s, size_t i);

// Maximal subpart at s[i]: the number of bytes (>= 1) that are a well-formed character or a
// valid prefix of one. *complete: a whole character. *truncated (may be null): a valid prefix
// cut short only by the end of s, so more bytes could still complete it.
size_t utf8_scan(std::string_view s, size_t i, bool* complete, bool* truncated);

// Byte length a lead byte announces (1 for ASCII and for stray bytes).
inline size_t utf8_lead_len(uint8_t c) {
    if (c < 0xC0) return 1;
    if (c < 0xE0) return 2;
    if (c < 0xF0) return 3;
    return 4;
}

// Decodes the well-formed UTF-8 character at s[i] into *cp and returns its length; returns 0
// (and leaves *cp alone) where utf8_valid_len does: overlongs, surrogates and bytes that do not
// form a character are not decoded.
size_t utf8_decode(std::string_view s, size_t i, uint32_t* cp);

// True when every byte sequence in s is well-formed UTF-8.
bool utf8_is_valid(std::string_view s);

// Replaces each maximal ill-formed subpart by U+FFFD (Unicode 3.9 "best practice", which is
// what Python's bytes.decode("utf-8", "replace") does). Valid input is returned unchanged.
std::string utf8_lossy(std::string_view s);

// Appends the UTF-8 encoding of code point cp.
void utf8_append(std::string& out, uint32_t cp);

// NFC of valid UTF-8 text. Text whose bytes are all below 0xCC (code points < U+0300, all
// NFC-stable and never the second half of a composition) is returned without calling utf8proc.
std::string nfc_normalize(std::string_view s);

// GPT-2 byte-level alphabet: byte b is shown as one printable code point (printable Latin-1
// bytes as themselves, the other 68 bytes as U+0100 + k in byte order).
struct ByteUnicodeMap {
    ByteUnicodeMap();
    uint32_t byte_to_cp[256];
    std::string byte_to_utf8[256];  // UTF-8 of byte_to_cp[b]
    // Inverse for code points < 0x200; -1 where a code point is not in the alphabet.
    int16_t cp_to_byte[0x200];
    static const ByteUnicodeMap& get();
};

// Decodes byte-level text (token strings of a gpt2 vocab) back to raw bytes. Code points outside
// the alphabet (added tokens written verbatim) are copied as their UTF-8.
std::string byte_level_decode(std::string_view token_text);

}  // namespace jllm
