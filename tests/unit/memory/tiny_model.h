// tests/unit/memory/tiny_model.h — a tiny llama-shaped GGUF (2 layers, n_embd 64, Q8_0 weights,
// the tiny_bpe tokenizer) written with GgufWriter, for engine-level memory tests.
#pragma once

#include <string>

namespace jllm::test {

// Writes (once per process) and returns the path of the tiny model.
std::string tiny_model_path();

}  // namespace jllm::test
