// tests/cuda/ops/op_test_env.cpp — the op test program's environment: the per-thread stack check
// (cuda_test_util.h) around every test, or one skipped test where the build has no CUDA backend.
// The tests are in one file per op family (test_<op>.cpp), each with its error bounds in a
// table at its top.
#include <gtest/gtest.h>

#if JLLM_CUDA

#include "cuda_test_util.h"

namespace jllm::test {
namespace {

// Fails the program if a kernel outgrew the per-thread stack (cuda_test_util.h).
::testing::Environment* const g_stack_env = ::testing::AddGlobalTestEnvironment(new ThreadStackEnv);

}  // namespace
}  // namespace jllm::test

#else

TEST(CudaOps, NotBuilt) { GTEST_SKIP() << "built without the CUDA backend"; }

#endif
