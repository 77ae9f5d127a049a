// tests/common/tok_test_util.h — shared helpers of the tokenizer tests: the vocab GGUFs
// of shared/testdata, the qwen3 / llama3 GGUFs converted from tokenizer.json at test time (into
// the build dir, regenerated when older than the test binary), and .inp/.out vector parsing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

// The tokenizers below are cached for the whole process, so `const Tokenizer& t =
// hf_tokenizer("qwen3")` never dangles; GCC 13's heuristic warns about it anyway.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 13
#pragma GCC diagnostic ignored "-Wdangling-reference"
#endif

namespace jllm::test {

// Tokenizer of shared/testdata/vocab/ggml-vocab-<name>.gguf (cached per process).
const Tokenizer& vocab_tokenizer(const std::string& name);
// Tokenizer of shared/testdata/tokenizers/<name>/ converted with hf_import into a GGUF in the
// build dir, then loaded through GgufFile (cached per process). name: qwen3 | llama3, or
// tiny_bpe (tests/data/tokenizer/tiny_bpe, a small tokenizer with lstrip/rstrip added tokens).
const Tokenizer& hf_tokenizer(const std::string& name);
// Path of that converted GGUF (converting it first if needed).
std::string converted_gguf_path(const std::string& name);

struct VocabCase {
    std::string text;
    std::vector<int32_t> ids;
};
// Reads <base>.inp / <base>.out (format in shared/testdata/vocab/SOURCE.md).
std::vector<VocabCase> read_vocab_cases(const std::string& inp_path, const std::string& out_path);

std::string hex_to_bytes(const std::string& hex);
std::string ids_to_string(const std::vector<int32_t>& ids);

}  // namespace jllm::test
