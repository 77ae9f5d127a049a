// tests/unit/engine/test_engine_constrained.cpp — constrained generation and tool calls through
// the Engine on the CPU backend (tests/common/constrained_generation.h; the CUDA backend runs the
// same checks in tests/cuda/model/test_cuda_constrained.cpp).
#include "constrained_generation.h"

namespace jllm {
namespace {

TEST(EngineConstrained, ToolCallsAndSchemasValidOnCpu) { test::check_constrained_generation(DeviceKind::Cpu); }

}  // namespace
}  // namespace jllm
