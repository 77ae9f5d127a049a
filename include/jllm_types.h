// include/jllm_types.h — the enums every layer shares (the engine's configuration, the backends,
// the memory plan): which device runs the model, how its KV cache is stored, where its weights
// live. Kept apart so the backends need not include the Engine API for them.
#pragma once

#include <cstdint>

namespace jllm {

enum class DeviceKind { Auto, Cpu, Cuda };
// KV cache storage: INT8 (one fp16 scale per position and KV head) or FP16.
enum class KvType { Int8, Fp16 };
// GPU weight placement: Copy to device memory (the mapped file's pages dropped behind the copy),
// Mapped (read in place from the mapped file, zero-copy), or Auto (copied, on integrated GPUs too:
// the iGPU does not cache pinned host memory, and only copies take the GPU's tiled layout). The
// CPU always reads the mapped file.
enum class WeightPlacement { Auto, Copy, Mapped };

const char* kv_type_name(KvType t);  // "int8" / "fp16"

}  // namespace jllm
