// tests/unit/tokenizer/test_robustness.cpp — any bytes in, no crash out: seeded random byte
// strings and pathological runs (100k letters, spaces, digits, punctuation) through encode,
// decode and the streaming detokenizer of every tokenizer type, within a time bound that
// catches quadratic behaviour.
#include <gtest/gtest.h>

#include <time.h>

#include <random>

#include "tok_test_util.h"
#include "tokenizer/streaming_detokenizer.h"
#include "tokenizer/unicode_util.h"

namespace jllm::test {
namespace {

std::vector<const Tokenizer*> all_tokenizers() {
    return {&hf_tokenizer("qwen3"), &hf_tokenizer("llama3"), &vocab_tokenizer("llama-spm"),
            &vocab_tokenizer("starcoder"), &vocab_tokenizer("gpt-2")};
}

void exercise(const Tokenizer& tok, const std::string& text) {
    for (bool special : {false, true}) {
        const auto ids = tok.encode(text, false, special);
        for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok.n_vocab());
        const std::string dec = tok.decode(ids);
        StreamingDetokenizer sd(tok);
        std::string streamed;
        for (int32_t id : ids) streamed += sd.push(id);
        streamed += sd.flush();
        EXPECT_TRUE(utf8_is_valid(streamed));
        if (utf8_is_valid(dec)) {
            EXPECT_EQ(streamed, dec);
        }
    }
}

TEST(TokenizerRobustness, RandomBytes) {
    std::mt19937 rng(1234);
    const char* alphabet[] = {"a", " ", "\n", "<|im_start|>", "<think>", "\xE2\x96\x81", "'s",
                              "1", "\xF0\x9F", "\x80", "\xE6\x97\xA5", "\xCC\x81", "\t", "<s>"};
    for (const Tokenizer* tok : all_tokenizers()) {
        for (int iter = 0; iter < 200; ++iter) {
            std::string s;
            const int n = static_cast<int>(rng() % 64);
            for (int i = 0; i < n; ++i) {
                if (rng() % 2) s.push_back(static_cast<char>(rng() & 0xFF));
                else s += alphabet[rng() % (sizeof(alphabet) / sizeof(alphabet[0]))];
            }
            exercise(*tok, s);
        }
    }
}

// CPU time of this thread (not wall time): other processes on a loaded CI machine do not count.
double thread_cpu_ms() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

// A guard against quadratic behaviour on long runs of one character class (the bound is ~100x
// the measured time), in thread CPU time so machine load cannot fail it.
TEST(TokenizerRobustness, LongRunsStayFast) {
    const std::string runs[] = {std::string(100000, 'a'), std::string(100000, ' '),
                                std::string(100000, '7'), std::string(100000, '!'),
                                std::string(50000, '\n') + std::string(50000, ' ')};
    for (const Tokenizer* tok : all_tokenizers()) {
        for (const std::string& r : runs) {
            const double t0 = thread_cpu_ms();
            const auto ids = tok->encode(r, false, false);
            const double ms = thread_cpu_ms() - t0;
            EXPECT_FALSE(ids.empty());
            EXPECT_EQ(tok->decode(ids).size() >= r.size(), true);
            EXPECT_LT(ms, 2000.0) << tok->pre() << " run of '" << r[0] << "'";
        }
    }
}

}  // namespace
}  // namespace jllm::test
