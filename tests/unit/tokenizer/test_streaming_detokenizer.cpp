// tests/unit/tokenizer/test_streaming_detokenizer.cpp — the streaming detokenizer never emits
// an incomplete or ill-formed UTF-8 sequence, holds split characters until they complete,
// flushes what is left as U+FFFD, and for valid text streams exactly what decode() returns.
#include <gtest/gtest.h>

#include "core/error.h"
#include "tok_test_util.h"
#include "tokenizer/streaming_detokenizer.h"
#include "tokenizer/unicode_util.h"

namespace jllm::test {
namespace {

const std::string REPL = "\xEF\xBF\xBD";

std::string stream_all(const Tokenizer& tok, const std::vector<int32_t>& ids, size_t* held_steps) {
    StreamingDetokenizer sd(tok);
    std::string out;
    *held_steps = 0;
    for (int32_t id : ids) {
        const std::string part = sd.push(id);
        EXPECT_TRUE(utf8_is_valid(part)) << "id " << id;
        if (sd.pending_bytes() > 0) ++*held_steps;
        out += part;
    }
    out += sd.flush();
    EXPECT_EQ(sd.pending_bytes(), 0u);
    return out;
}

// Byte-level token that is exactly raw byte b.
int32_t byte_token(const Tokenizer& tok, uint8_t b) {
    return tok.find_token(ByteUnicodeMap::get().byte_to_utf8[b]);
}

TEST(StreamingDetokenizer, EqualsDecodeForValidText) {
    for (const char* name : {"qwen3", "llama3"}) {
        const Tokenizer& tok = hf_tokenizer(name);
        const std::string text =
            "Emoji 👨\u200d👩\u200d👧\u200d👦 👍🏽 🇯🇵, CJK 吾輩は猫である, Khmer សួស្តី, math ∑ᵢ, "
            "Tamil வணக்கம், <|im_end|> as text, tabs\t\tand\n\nlines.";
        const auto ids = tok.encode(text, false, false);
        size_t held = 0;
        EXPECT_EQ(stream_all(tok, ids, &held), tok.decode(ids)) << name;
        EXPECT_GT(held, 0u) << name << ": no character was ever split across tokens";
    }
}

TEST(StreamingDetokenizer, HoldsSplitCharacterUntilComplete) {
    const Tokenizer& tok = hf_tokenizer("qwen3");
    StreamingDetokenizer sd(tok);
    // U+1F999 (🦙) = F0 9F A6 99, pushed one byte token at a time.
    EXPECT_EQ(sd.push(byte_token(tok, 0xF0)), "");
    EXPECT_EQ(sd.push(byte_token(tok, 0x9F)), "");
    EXPECT_EQ(sd.push(byte_token(tok, 0xA6)), "");
    EXPECT_EQ(sd.pending_bytes(), 3u);
    EXPECT_EQ(sd.push(byte_token(tok, 0x99)), "\xF0\x9F\xA6\x99");
    EXPECT_EQ(sd.flush(), "");
}

TEST(StreamingDetokenizer, IllFormedBytesBecomeReplacementCharacters) {
    const Tokenizer& tok = hf_tokenizer("qwen3");
    StreamingDetokenizer sd(tok);
    EXPECT_EQ(sd.push(byte_token(tok, 0xE4)), "");
    // A lead byte followed by ASCII can never complete: one U+FFFD, then the ASCII.
    EXPECT_EQ(sd.push(byte_token(tok, 'a')), REPL + "a");
    EXPECT_EQ(sd.push(byte_token(tok, 0x80)), REPL);  // stray continuation byte
    EXPECT_EQ(sd.push(byte_token(tok, 0xE4)), "");
    EXPECT_EQ(sd.push(byte_token(tok, 0xB8)), "");
    EXPECT_EQ(sd.flush(), REPL);  // the stream ended inside a character
    EXPECT_EQ(sd.pending_bytes(), 0u);
    EXPECT_EQ(sd.push(byte_token(tok, 'b')), "b");
}

TEST(StreamingDetokenizer, ResetDropsHeldBytes) {
    const Tokenizer& tok = hf_tokenizer("qwen3");
    StreamingDetokenizer sd(tok);
    EXPECT_EQ(sd.push(byte_token(tok, 0xF0)), "");
    sd.reset();
    EXPECT_EQ(sd.pending_bytes(), 0u);
    EXPECT_EQ(sd.flush(), "");
}

TEST(StreamingDetokenizer, SpmStripsTheLeadingSpaceOnce) {
    const Tokenizer& tok = vocab_tokenizer("llama-spm");
    const auto ids = tok.encode("Hello world", true, false);  // <s> ▁Hello ▁world
    size_t held = 0;
    EXPECT_EQ(stream_all(tok, ids, &held), "<s>Hello world");
    EXPECT_EQ(stream_all(tok, tok.encode("Hello world", false, false), &held), "Hello world");
    StreamingDetokenizer sd(tok);
    EXPECT_EQ(sd.push(15043), "Hello");
    EXPECT_EQ(sd.push(15043), " Hello");
    sd.reset();
    EXPECT_EQ(sd.push(15043), "Hello");
}

TEST(StreamingDetokenizer, AppendingFormMatches) {
    const Tokenizer& tok = hf_tokenizer("llama3");
    const auto ids = tok.encode("añb 🦙🦙 日本 \xF0\x9F", false, false);
    StreamingDetokenizer a(tok), b(tok);
    std::string one, two;
    two.reserve(256);
    for (int32_t id : ids) {
        one += a.push(id);
        b.push(id, two);
    }
    one += a.flush();
    two += b.flush();
    EXPECT_EQ(one, two);
    EXPECT_EQ(two, "añb 🦙🦙 日本 \xEF\xBF\xBD");
}

TEST(StreamingDetokenizer, BadIdThrows) {
    const Tokenizer& tok = hf_tokenizer("qwen3");
    StreamingDetokenizer sd(tok);
    EXPECT_THROW(sd.push(-1), JllmError);
    EXPECT_THROW(sd.push(tok.n_vocab()), JllmError);
}

}  // namespace
}  // namespace jllm::test
