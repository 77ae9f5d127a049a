// tests/unit/synth/synth_test_util.h — helpers shared by the synth tests: temp paths, writing a
// preset, running one forward pass through the Engine on the CPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "synth/synth_model.h"

namespace jllm::test {

std::string synth_tokenizer_dir();                    // shared/testdata/tokenizers
std::string synth_temp_path(const std::string& tag);  // a unique file name under TMPDIR
SynthOptions synth_options(const std::string& preset, QuantRecipe recipe, uint64_t seed = 42);
// Loads `path` in an Engine (device cpu, 2 threads, small context), evaluates `tokens` and
// returns the logits [tokens, n_vocab]; fails the test on any error.
std::vector<float> synth_eval(const std::string& path, const std::vector<int32_t>& tokens, int64_t* n_vocab);

}  // namespace jllm::test
