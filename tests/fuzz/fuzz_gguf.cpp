// tests/fuzz/fuzz_gguf.cpp — libFuzzer target for the GGUF reader: any byte string must either
// parse or raise JllmError; then everything a parsed file offers is walked (metadata printing,
// model config, tensor bytes) so bad views into the buffer are caught by ASan.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "gguf/gguf.h"
#include "model/model_config.h"
#include "model/model_info.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::unique_ptr<jllm::GgufFile> f;
    try {
        f = jllm::GgufFile::from_memory(data, size, "fuzz");
    } catch (const jllm::JllmError&) {
        return 0;
    }
    try {
        (void)jllm::describe_gguf(*f, true);
    } catch (const jllm::JllmError&) {
    }
    try {
        (void)jllm::load_model_config(*f);
    } catch (const jllm::JllmError&) {
    }
    uint64_t sum = 0;
    for (const jllm::GgufTensorInfo& t : f->tensors()) {
        if (t.nbytes > 0) sum += t.data[0] + t.data[t.nbytes - 1];
    }
    for (const jllm::GgufKV& kv : f->kvs()) {
        if (kv.value.type == jllm::GgufType::ARRAY) {
            const jllm::GgufArray& a = kv.value.arr;
            for (const auto& s : a.strings) sum += s.size();
            if (a.data && a.count > 0 && a.elem_type != jllm::GgufType::STRING) {
                sum += static_cast<uint64_t>(a.get_int(a.count - 1));
            }
        }
    }
    return sum == 0xdeadbeef ? 1 : 0;
}
