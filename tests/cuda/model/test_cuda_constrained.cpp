// tests/cuda/model/test_cuda_constrained.cpp — constrained generation and tool calls through the
// Engine on the CUDA backend: the checks of tests/common/constrained_generation.h (validity only:
// the synthetic model's weights are random).
#include "constrained_generation.h"

#include "backend/cuda/cuda_backend.h"

namespace jllm {
namespace {

TEST(CudaConstrained, ToolCallsAndSchemasValidOnGpu) {
    if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device";
    test::check_constrained_generation(DeviceKind::Cuda);
}

}  // namespace
}  // namespace jllm
