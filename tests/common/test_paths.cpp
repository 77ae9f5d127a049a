// tests/common/test_paths.cpp — test data locations.
#include "test_paths.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <sys/stat.h>

namespace jllm::test {

static std::string env_or(const char* name, const char* fallback) {
    const char* v = std::getenv(name);
    return (v && *v) ? std::string(v) : std::string(fallback);
}

std::string shared_dir() { return env_or("JLLM_SHARED_DIR", JLLM_SHARED_DIR); }
std::string models_dir() { return env_or("JLLM_MODELS_DIR", JLLM_MODELS_DIR); }
std::string source_dir() { return JLLM_SOURCE_DIR; }
std::string data_dir() { return source_dir() + "/tests/data"; }
std::string smollm2_path() { return models_dir() + "/SmolLM2-135M-Instruct.Q4_1.gguf"; }

bool file_exists(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0;
}

std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

}  // namespace jllm::test
