// tests/unit/tokenizer/test_vocab_vectors.cpp — the .inp/.out conformance vectors of
// shared/testdata/vocab against their vocab GGUFs, and (qwen2, llama-bpe, deepseek-r1-qwen)
// against GGUFs converted from the reference tokenizer.json files. Exact ids, every case.
#include <gtest/gtest.h>

#include "test_paths.h"
#include "tok_test_util.h"

namespace jllm::test {
namespace {

void check_vectors(const Tokenizer& tok, const std::string& vec_name, size_t* n_ok, size_t* n) {
    const std::string base = shared_dir() + "/testdata/vocab/ggml-vocab-" + vec_name + ".gguf";
    const auto cases = read_vocab_cases(base + ".inp", base + ".out");
    ASSERT_EQ(cases.size(), 46u) << base;
    *n_ok = 0;
    *n = cases.size();
    for (const auto& c : cases) {
        const auto got = tok.encode(c.text, /*add_bos=*/false, /*parse_special=*/false);
        EXPECT_EQ(ids_to_string(got), ids_to_string(c.ids)) << "input: [" << c.text << "]";
        if (got == c.ids) ++*n_ok;
    }
    std::printf("[vectors] %s: %zu/%zu exact\n", vec_name.c_str(), *n_ok, *n);
}

struct Param {
    const char* vectors;  // name of the .inp/.out pair
    const char* source;   // "vocab:<gguf name>" or "hf:<tokenizers folder>"
};

class VocabVectors : public ::testing::TestWithParam<Param> {};

TEST_P(VocabVectors, ExactIds) {
    const Param p = GetParam();
    const std::string src = p.source;
    const Tokenizer& tok = src.rfind("vocab:", 0) == 0 ? vocab_tokenizer(src.substr(6))
                                                       : hf_tokenizer(src.substr(3));
    size_t ok = 0, n = 0;
    check_vectors(tok, p.vectors, &ok, &n);
    EXPECT_EQ(ok, n);
}

INSTANTIATE_TEST_SUITE_P(
    All, VocabVectors,
    ::testing::Values(Param{"gpt-2", "vocab:gpt-2"}, Param{"llama-spm", "vocab:llama-spm"},
                      Param{"starcoder", "vocab:starcoder"}, Param{"refact", "vocab:refact"},
                      Param{"qwen2", "hf:qwen3"}, Param{"deepseek-r1-qwen", "hf:qwen3"},
                      Param{"llama-bpe", "hf:llama3"}),
    [](const ::testing::TestParamInfo<Param>& info) {
        std::string s = info.param.vectors;
        for (char& c : s) {
            if (c == '-') c = '_';
        }
        return s;
    });

}  // namespace
}  // namespace jllm::test
