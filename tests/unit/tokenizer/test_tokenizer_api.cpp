// tests/unit/tokenizer/test_tokenizer_api.cpp — hand-worked cases for the Tokenizer API: special
// tokens parsed only on request, end-of-generation sets, BOS, SentencePiece byte fallback and
// space marker, id errors, the pre-tokenizer table and its unknown-name fallback, lossy UTF-8.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "test_paths.h"
#include "tok_test_util.h"
#include "tokenizer/hf_import.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/unicode_util.h"

namespace jllm::test {
namespace {

bool contains(const std::vector<int32_t>& v, int32_t id) {
    return std::find(v.begin(), v.end(), id) != v.end();
}

TEST(TokenizerQwen3, SpecialTokensOnlyWhenAsked) {
    const Tokenizer& tok = hf_tokenizer("qwen3");
    const std::string text = "<|im_start|>user\nHi<|im_end|>";
    const auto parsed = tok.encode(text, false, true);
    const auto plain = tok.encode(text, false, false);
    ASSERT_FALSE(parsed.empty());
    EXPECT_EQ(parsed.front(), 151644);
    EXPECT_EQ(parsed.back(), 151645);
    EXPECT_FALSE(contains(plain, 151644));
    EXPECT_FALSE(contains(plain, 151645));
    EXPECT_EQ(tok.decode(plain), text);  // user text stays text
    EXPECT_EQ(tok.decode(parsed), text);
}

TEST(TokenizerQwen3, AddedNonSpecialTokensAlwaysMatch) {
    const Tokenizer& tok = hf_tokenizer("qwen3");
    // <think> is an added token with special=false (USER_DEFINED), as in Hugging Face.
    EXPECT_EQ(tok.find_token("<think>"), 151667);
    EXPECT_EQ(tok.token_type(151667), TokenType::USER_DEFINED);
    EXPECT_EQ(tok.token_type(151644), TokenType::CONTROL);
    const auto ids = tok.encode("<think>\nx\n</think>", false, false);
    EXPECT_EQ(ids.front(), 151667);
    EXPECT_EQ(ids.back(), 151668);
}

TEST(TokenizerQwen3, MetadataAndEog) {
    const Tokenizer& tok = hf_tokenizer("qwen3");
    EXPECT_EQ(tok.n_vocab(), 151669);  // 151643 BPE + 26 added; embedding padding is not ours
    EXPECT_EQ(tok.bos_id(), -1);
    EXPECT_EQ(tok.eos_id(), 151645);
    EXPECT_EQ(tok.pad_id(), 151643);
    EXPECT_FALSE(tok.add_bos());
    EXPECT_TRUE(tok.nfc());
    EXPECT_EQ(tok.model(), "gpt2");
    EXPECT_EQ(tok.pre(), "qwen2");
    EXPECT_EQ(tok.eog_ids(), (std::vector<int32_t>{151643, 151645}));
    EXPECT_TRUE(tok.is_eog(151645));
    EXPECT_TRUE(tok.is_eog(151643));
    EXPECT_FALSE(tok.is_eog(151644));
    EXPECT_FALSE(tok.is_eog(-1));
    EXPECT_FALSE(tok.is_eog(tok.n_vocab()));
    EXPECT_NE(tok.chat_template().find("<|im_start|>"), std::string::npos);
    EXPECT_EQ(tok.find_token("no such token, surely"), -1);
    EXPECT_EQ(tok.token_text(151645), "<|im_end|>");
    // add_bos with no BOS in the vocabulary adds nothing.
    EXPECT_EQ(tok.encode("Hello", true, false), tok.encode("Hello", false, false));
}

TEST(TokenizerQwen3, BadIdsThrow) {
    const Tokenizer& tok = hf_tokenizer("qwen3");
    EXPECT_THROW(tok.token_to_piece(-1), JllmError);
    EXPECT_THROW(tok.token_to_piece(tok.n_vocab()), JllmError);
    EXPECT_THROW(tok.decode({1, 2, tok.n_vocab() + 5}), JllmError);
    EXPECT_THROW(tok.token_text(-3), JllmError);
}

TEST(TokenizerQwen3, NfcAppliesToText) {
    const Tokenizer& tok = hf_tokenizer("qwen3");
    EXPECT_EQ(tok.encode("cafe\xCC\x81", false, false), tok.encode("caf\xC3\xA9", false, false));
}

TEST(TokenizerLlama3, BosAndEog) {
    const Tokenizer& tok = hf_tokenizer("llama3");
    EXPECT_EQ(tok.n_vocab(), 128256);
    EXPECT_EQ(tok.bos_id(), 128000);
    EXPECT_EQ(tok.eos_id(), 128001);
    EXPECT_TRUE(tok.is_eog(128001));  // <|end_of_text|>
    EXPECT_TRUE(tok.is_eog(128009));  // <|eot_id|>
    EXPECT_FALSE(tok.is_eog(128000));
    EXPECT_FALSE(tok.nfc());
    const auto ids = tok.encode("Hello", true, false);
    ASSERT_EQ(ids.size(), 2u);
    EXPECT_EQ(ids[0], 128000);
    EXPECT_EQ(tok.decode(ids), "<|begin_of_text|>Hello");
    // Llama 3.1's <|eom_id|> is end-of-generation where the vocabulary has it.
    TokenizerVocab v = hf_load_vocab(shared_dir() + "/testdata/tokenizers/llama3/tokenizer.json",
                                     shared_dir() + "/testdata/tokenizers/llama3/tokenizer_config.json");
    v.tokens[128008] = "<|eom_id|>";
    auto t31 = Tokenizer::from_vocab(std::move(v));
    EXPECT_TRUE(t31->is_eog(128008));
    EXPECT_EQ(t31->eog_ids(), (std::vector<int32_t>{128001, 128008, 128009}));
}

TEST(TokenizerSpm, BosSpaceMarkerAndByteFallback) {
    const Tokenizer& tok = vocab_tokenizer("llama-spm");
    EXPECT_TRUE(tok.add_bos());
    EXPECT_EQ(tok.bos_id(), 1);
    EXPECT_EQ(tok.eos_id(), 2);
    EXPECT_EQ(tok.encode("Hello world", true, false), (std::vector<int32_t>{1, 15043, 3186}));
    EXPECT_EQ(tok.decode({1, 15043, 3186}), "<s>Hello world");
    EXPECT_EQ(tok.decode({15043, 3186}), "Hello world");
    EXPECT_EQ(tok.token_to_piece(15043), " Hello");
    // A character the vocabulary lacks falls back to its UTF-8 bytes as <0xNN> tokens.
    const std::string rare = "\xF0\x9D\x94\x98";  // U+1D518
    const auto ids = tok.encode(rare, false, false);
    ASSERT_EQ(ids.size(), 5u);  // "▁" + 4 bytes
    for (size_t i = 1; i < ids.size(); ++i) EXPECT_EQ(tok.token_type(ids[i]), TokenType::BYTE);
    EXPECT_EQ(tok.token_to_piece(ids[1]), "\xF0");
    EXPECT_EQ(tok.decode(ids), rare);
    for (const char* s : {"Hello world", " leading space", "a\nb\tc", "  two", "日本語 text"}) {
        EXPECT_EQ(tok.decode(tok.encode(s, true, false)), std::string("<s>") + s) << s;
    }
}

TEST(TokenizerSpm, ControlTokensParsedOnlyWhenAsked) {
    const Tokenizer& tok = vocab_tokenizer("llama-spm");
    const auto parsed = tok.encode("<s>Hi</s>", false, true);
    EXPECT_EQ(parsed.front(), 1);
    EXPECT_EQ(parsed.back(), 2);
    const auto plain = tok.encode("<s>Hi</s>", false, false);
    EXPECT_FALSE(contains(plain, 1));
    EXPECT_FALSE(contains(plain, 2));
    EXPECT_TRUE(tok.is_eog(2));
}

TEST(PreTokenizerTable, FamiliesAndFallback) {
    for (const char* name : {"qwen2", "llama-bpe", "smollm", "gpt-2", "starcoder", "refact",
                             "llama3", "gpt2"}) {
        EXPECT_NE(find_pre_tokenizer(name), nullptr) << name;
    }
    EXPECT_EQ(find_pre_tokenizer("no-such-family"), nullptr);
    EXPECT_STREQ(find_pre_tokenizer("deepseek-r1-qwen")->name, "qwen2");
    EXPECT_STREQ(find_pre_tokenizer("llama3")->name, "llama-bpe");
    EXPECT_STREQ(default_pre_tokenizer().name, "gpt-2");
    // An unknown name loads (with a warning) and behaves as the default.
    HfImportOptions opt;
    opt.pre = "no-such-family";
    const std::string dir = data_dir() + "/tokenizer/tiny_bpe";
    auto odd = Tokenizer::from_vocab(hf_load_vocab(dir + "/tokenizer.json", "", opt));
    opt.pre = "gpt-2";
    auto ref = Tokenizer::from_vocab(hf_load_vocab(dir + "/tokenizer.json", "", opt));
    EXPECT_EQ(odd->pre(), "no-such-family");
    const std::string text = "Hello, y'all! 12345 ﬁ  \n\n x";
    EXPECT_EQ(odd->encode(text, false, false), ref->encode(text, false, false));
}

TEST(PreTokenizerSplit, DigitsAndWhitespace) {
    PreTokenizer qwen(*find_pre_tokenizer("qwen2"));
    std::vector<std::string_view> p;
    qwen.split("ab 123  \n\nx", p);
    EXPECT_EQ(p, (std::vector<std::string_view>{"ab", " ", "1", "2", "3", "  \n\n", "x"}));
    PreTokenizer llama(*find_pre_tokenizer("llama-bpe"));
    p.clear();
    llama.split("1234567 I'M", p);
    EXPECT_EQ(p, (std::vector<std::string_view>{"123", "456", "7", " I", "'M"}));
    PreTokenizer star(*find_pre_tokenizer("starcoder"));
    p.clear();
    star.split("x 42", p);
    EXPECT_EQ(p, (std::vector<std::string_view>{"x", " ", "4", "2"}));
    // U+180E is not White_Space (Hugging Face's \s), though PCRE2's own \s would take it.
    PreTokenizer gpt2(*find_pre_tokenizer("gpt-2"));
    p.clear();
    gpt2.split("a \xE1\xA0\x8E b", p);
    EXPECT_EQ(p, (std::vector<std::string_view>{"a", " \xE1\xA0\x8E", " b"}));
}

TEST(Utf8, LossyMatchesPythonReplace) {
    const std::string R = "\xEF\xBF\xBD";
    EXPECT_EQ(utf8_lossy("abc"), "abc");
    EXPECT_EQ(utf8_lossy("a\x80z"), "a" + R + "z");
    EXPECT_EQ(utf8_lossy("x\xE2\x82 y"), "x" + R + " y");          // truncated: one U+FFFD
    EXPECT_EQ(utf8_lossy("x\xF0\x9F\x98"), "x" + R);                // truncated at the end
    EXPECT_EQ(utf8_lossy("\xC0\xAF"), R + R);                       // overlong: two
    EXPECT_EQ(utf8_lossy("\xED\xA0\x80"), R + R + R);               // surrogate: three
    EXPECT_EQ(utf8_lossy("\xF4\x90\x80\x80"), R + R + R + R);       // above U+10FFFF
    EXPECT_EQ(utf8_lossy("\xE6\x97\xA5\xFF"), "\xE6\x97\xA5" + R);
    EXPECT_TRUE(utf8_is_valid("\xF0\x9F\xA6\x99"));
    EXPECT_FALSE(utf8_is_valid("\xF0\x9F\xA6"));
    EXPECT_EQ(nfc_normalize("e\xCC\x81"), "\xC3\xA9");
    EXPECT_EQ(nfc_normalize("plain ascii"), "plain ascii");
}

TEST(Tokenizer, InvalidUtf8IsEncodedAsReplacementCharacters) {
    const Tokenizer& tok = hf_tokenizer("qwen3");
    EXPECT_EQ(tok.encode("a\xFF" "b", false, false), tok.encode("a\xEF\xBF\xBD" "b", false, false));
}

TEST(Tokenizer, BadVocabulariesThrow) {
    TokenizerVocab base;
    base.model = "gpt2";
    base.pre = "gpt-2";
    base.tokens = {"a", "b", "ab"};
    base.merges = {"a b"};
    EXPECT_NO_THROW(Tokenizer::from_vocab(base));
    EXPECT_EQ(Tokenizer::from_vocab(base)->encode("abab", false, false),
              (std::vector<int32_t>{2, 2}));
    {
        TokenizerVocab v = base;
        v.model = "wordpiece";
        EXPECT_THROW(Tokenizer::from_vocab(v), JllmError);
    }
    {
        TokenizerVocab v = base;
        v.bos_id = 3;
        EXPECT_THROW(Tokenizer::from_vocab(v), JllmError);
    }
    {
        TokenizerVocab v = base;
        v.token_types = {1, 1};
        EXPECT_THROW(Tokenizer::from_vocab(v), JllmError);
    }
    {
        TokenizerVocab v = base;
        v.tokens.clear();
        EXPECT_THROW(Tokenizer::from_vocab(v), JllmError);
    }
    {
        TokenizerVocab v = base;
        v.merges = {"ab"};
        EXPECT_THROW(Tokenizer::from_vocab(v), JllmError);
    }
    {
        TokenizerVocab v = base;
        v.model = "llama";  // SPM needs one score per token
        EXPECT_THROW(Tokenizer::from_vocab(v), JllmError);
    }
    {
        TokenizerVocab v = base;
        v.normalizer = "nfkc";
        EXPECT_THROW(Tokenizer::from_vocab(v), JllmError);
    }
}

}  // namespace
}  // namespace jllm::test
