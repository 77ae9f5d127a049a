// model/model_info.h — the human-readable description behind `jetson-llm --info`.
#pragma once

#include <string>

namespace jllm {

class GgufFile;

// Architecture, name, hyper-parameters the engine uses, tokenizer type and vocab size, tensor
// count by type, file size. `verbose` adds every metadata key and every tensor.
std::string describe_gguf(const GgufFile& f, bool verbose);

}  // namespace jllm
