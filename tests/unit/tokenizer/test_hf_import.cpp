// tests/unit/tokenizer/test_hf_import.cpp — the tokenizer.json converter: the GGUF it writes
// (read back through GgufFile), family detection, and errors for files it cannot convert.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "core/error.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "test_paths.h"
#include "tok_test_util.h"
#include "tokenizer/hf_import.h"

namespace jllm::test {
namespace {

std::string tmp_file(const std::string& name, const std::string& content) {
    const std::string path = std::string(JLLM_BINARY_DIR) + "/test_tokenizer_data/" + name;
    std::ofstream(path, std::ios::binary) << content;
    return path;
}

TEST(HfImport, Qwen3GgufKeys) {
    auto f = GgufFile::open(converted_gguf_path("qwen3"));
    EXPECT_EQ(f->tensors().size(), 0u);
    EXPECT_EQ(f->get_string("tokenizer.ggml.model").value_or(""), "gpt2");
    EXPECT_EQ(f->get_string("tokenizer.ggml.pre").value_or(""), "qwen2");
    const GgufArray* tokens = f->get_array("tokenizer.ggml.tokens");
    ASSERT_NE(tokens, nullptr);
    EXPECT_EQ(tokens->count, 151669u);
    EXPECT_EQ(tokens->strings[151667], "<think>");
    const GgufArray* types = f->get_array("tokenizer.ggml.token_type");
    ASSERT_NE(types, nullptr);
    EXPECT_EQ(types->get_int(0), static_cast<int>(TokenType::NORMAL));
    EXPECT_EQ(types->get_int(151643), static_cast<int>(TokenType::CONTROL));
    EXPECT_EQ(types->get_int(151667), static_cast<int>(TokenType::USER_DEFINED));
    const GgufArray* merges = f->get_array("tokenizer.ggml.merges");
    ASSERT_NE(merges, nullptr);
    EXPECT_EQ(merges->count, 151387u);
    EXPECT_EQ(merges->strings[0], "\xC4\xA0 \xC4\xA0");  // "Ġ Ġ"
    EXPECT_FALSE(f->has("tokenizer.ggml.bos_token_id"));
    EXPECT_EQ(f->get_int("tokenizer.ggml.eos_token_id").value_or(-1), 151645);
    EXPECT_EQ(f->get_int("tokenizer.ggml.padding_token_id").value_or(-1), 151643);
    EXPECT_EQ(f->get_bool("tokenizer.ggml.add_bos_token").value_or(true), false);
    EXPECT_EQ(f->get_string("tokenizer.jllm.normalizer").value_or(""), "nfc");
    const auto tmpl = f->get_string("tokenizer.chat_template");
    ASSERT_TRUE(tmpl.has_value());
    EXPECT_NE(tmpl->find("<|im_start|>"), std::string::npos);
}

TEST(HfImport, Llama3GgufKeys) {
    auto f = GgufFile::open(converted_gguf_path("llama3"));
    EXPECT_EQ(f->get_string("tokenizer.ggml.pre").value_or(""), "llama-bpe");
    EXPECT_EQ(f->get_array("tokenizer.ggml.tokens")->count, 128256u);
    EXPECT_EQ(f->get_array("tokenizer.ggml.merges")->count, 280147u);
    EXPECT_EQ(f->get_int("tokenizer.ggml.bos_token_id").value_or(-1), 128000);
    EXPECT_EQ(f->get_int("tokenizer.ggml.eos_token_id").value_or(-1), 128001);
    EXPECT_EQ(f->get_bool("tokenizer.jllm.ignore_merges").value_or(false), true);
    EXPECT_EQ(f->get_string("tokenizer.jllm.normalizer").value_or(""), "none");
}

TEST(HfImport, TinyBpeLstripRstrip) {
    const std::string dir = data_dir() + "/tokenizer/tiny_bpe";
    const TokenizerVocab v = hf_load_vocab(dir + "/tokenizer.json", dir + "/tokenizer_config.json");
    EXPECT_EQ(v.pre, "gpt-2");
    ASSERT_EQ(v.lstrip_ids.size(), 2u);  // <mask>, <user>
    ASSERT_EQ(v.rstrip_ids.size(), 2u);  // [R], <user>
    EXPECT_EQ(v.tokens[v.lstrip_ids[0]], "<mask>");
    EXPECT_EQ(v.tokens[v.rstrip_ids[0]], "[R]");
    EXPECT_EQ(v.tokens[v.eos_id], "<|ctl|>");
}

TEST(HfImport, PreOverrideAndWriterRoundTrip) {
    const std::string dir = shared_dir() + "/testdata/tokenizers/qwen3";
    HfImportOptions opt;
    opt.pre = "qwen2";
    opt.add_bos = true;
    GgufWriter w;
    w.set_string("general.architecture", "qwen3");
    const TokenizerVocab v =
        hf_tokenizer_to_gguf(dir + "/tokenizer.json", dir + "/tokenizer_config.json", w, opt);
    const std::vector<uint8_t> bytes = w.write_to_memory();
    auto f = GgufFile::from_memory(bytes.data(), bytes.size());
    EXPECT_EQ(f->get_bool("tokenizer.ggml.add_bos_token").value_or(false), true);
    auto tok = Tokenizer::from_gguf(*f);
    EXPECT_EQ(tok->n_vocab(), static_cast<int32_t>(v.tokens.size()));
    EXPECT_EQ(tok->encode("Hello world", false, false), (std::vector<int32_t>{9707, 1879}));
}

TEST(HfImport, PaddingToEmbeddingRowsIsTheCallersChoice) {
    const std::string dir = shared_dir() + "/testdata/tokenizers/qwen3";
    TokenizerVocab v = hf_load_vocab(dir + "/tokenizer.json", dir + "/tokenizer_config.json");
    EXPECT_EQ(v.tokens.size(), 151669u);
    pad_vocab_to(v, 151936);
    ASSERT_EQ(v.tokens.size(), 151936u);
    EXPECT_EQ(v.tokens[151935], "[PAD151935]");
    auto tok = Tokenizer::from_vocab(v);
    EXPECT_EQ(tok->n_vocab(), 151936);
    EXPECT_EQ(tok->token_type(151700), TokenType::UNUSED);
    // Padding tokens are never produced from text.
    EXPECT_EQ(tok->encode("[PAD151700]", false, true), hf_tokenizer("qwen3").encode("[PAD151700]", false, true));
}

TEST(HfImport, Errors) {
    EXPECT_THROW(hf_load_vocab("/nonexistent/tokenizer.json", ""), JllmError);
    EXPECT_THROW(hf_load_vocab(tmp_file("bad.json", "{ not json"), ""), JllmError);
    EXPECT_THROW(hf_load_vocab(tmp_file("wordpiece.json",
                                        R"({"model": {"type": "WordPiece", "vocab": {}}})"),
                               ""),
                 JllmError);
    // Byte-level BPE with a pre-tokenizer regex no family has: needs --pre.
    const std::string odd = R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2},
        "merges": ["a b"]}, "added_tokens": [], "normalizer": null,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "\\w+"}, "behavior": "Isolated"},
            {"type": "ByteLevel", "use_regex": false}]},
        "decoder": {"type": "ByteLevel"}})";
    const std::string path = tmp_file("odd.json", odd);
    EXPECT_THROW(hf_load_vocab(path, ""), JllmError);
    HfImportOptions opt;
    opt.pre = "gpt-2";
    const TokenizerVocab v = hf_load_vocab(path, "", opt);
    EXPECT_EQ(v.tokens.size(), 3u);
    EXPECT_EQ(v.merges, (std::vector<std::string>{"a b"}));
    // Metadata of the wrong type is reported, not misread.
    GgufWriter w;
    w.set_string("tokenizer.ggml.model", "gpt2");
    w.set_array_i32("tokenizer.ggml.tokens", {1, 2, 3});
    const auto bytes = w.write_to_memory();
    auto f = GgufFile::from_memory(bytes.data(), bytes.size());
    EXPECT_THROW(Tokenizer::from_gguf(*f), JllmError);
    GgufWriter w2;
    w2.set_string("tokenizer.ggml.model", "gpt2");
    const auto bytes2 = w2.write_to_memory();
    auto f2 = GgufFile::from_memory(bytes2.data(), bytes2.size());
    EXPECT_THROW(Tokenizer::from_gguf(*f2), JllmError);
}

}  // namespace
}  // namespace jllm::test
