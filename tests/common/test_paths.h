// tests/common/test_paths.h — where tests find shared test data and downloaded models.
// Environment variables JLLM_SHARED_DIR / JLLM_MODELS_DIR override the configured paths.
#pragma once

#include <string>

namespace jllm::test {

std::string shared_dir();           // ../shared (tokenizers, vocab vectors)
std::string models_dir();           // models/ (SmolLM2, downloaded by scripts/fetch_model.sh)
std::string source_dir();           // repository root
std::string data_dir();             // tests/data
std::string smollm2_path();         // models/SmolLM2-135M-Instruct.Q4_1.gguf
bool file_exists(const std::string& path);
std::string read_file(const std::string& path);

}  // namespace jllm::test
