// tests/unit/engine/test_env_options.cpp — the environment's backend options (read once by
// backend_options_from_env): defaults, every knob's values, and a value outside the allowed ones
// stopping the load with an error that names the variable.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "engine/env_options.h"
#include "core/error.h"

using namespace jllm;

namespace {

const char* const KNOBS[] = {"JLLM_CPU_SIMD",        "JLLM_CUDA_GRAPH",      "JLLM_CUDA_PROFILE",
                             "JLLM_CUDA_SYNC_CHECK", "JLLM_CUDA_WARMUP",     "JLLM_CUDA_ATTN_KERNEL",
                             "JLLM_CUDA_ATTN_WARPS", "JLLM_CUDA_ATTN_SPLITS", "JLLM_CUDA_GEMM",
                             "JLLM_CUDA_GEMM_S8_MIN", "JLLM_CUDA_TILES", "JLLM_CUDA_GEMV"};

// Every knob unset for the test's scope (and after it).
struct CleanEnv {
    CleanEnv() { clear(); }
    ~CleanEnv() { clear(); }
    static void clear() {
        for (const char* k : KNOBS) ::unsetenv(k);
    }
};

}  // namespace

TEST(BackendOptions, DefaultsWithoutTheEnvironment) {
    CleanEnv env;
    const BackendOptions o = backend_options_from_env();
    EXPECT_EQ(o.cpu.simd, simd_level_best());
    EXPECT_TRUE(o.cuda.graphs);
    EXPECT_FALSE(o.cuda.profile);
    EXPECT_FALSE(o.cuda.sync_check);
    EXPECT_TRUE(o.cuda.warm_up);
    EXPECT_EQ(o.cuda.attention.kernel, cuda::AttnKernel::Auto);
    EXPECT_EQ(o.cuda.attention.decode_warps, cuda::ATTN_DECODE_WARPS_DEFAULT);
    EXPECT_EQ(o.cuda.attn_max_split, cuda::ATTN_MAX_SPLIT);
    EXPECT_TRUE(o.cuda.gemm_int8);
    EXPECT_EQ(o.cuda.gemm_int8_min_tokens, cuda::GEMM_S8_MIN_TOKENS);
    EXPECT_FALSE(o.cuda.gemv_int8);
    EXPECT_TRUE(o.cuda.tiled_weights);
}

TEST(BackendOptions, EveryKnobTakesItsValues) {
    CleanEnv env;
    ::setenv("JLLM_CPU_SIMD", "scalar", 1);
    ::setenv("JLLM_CUDA_GRAPH", "0", 1);
    ::setenv("JLLM_CUDA_PROFILE", "1", 1);
    ::setenv("JLLM_CUDA_SYNC_CHECK", "1", 1);
    ::setenv("JLLM_CUDA_WARMUP", "0", 1);
    ::setenv("JLLM_CUDA_ATTN_KERNEL", "simt", 1);
    ::setenv("JLLM_CUDA_ATTN_WARPS", "2", 1);
    ::setenv("JLLM_CUDA_ATTN_SPLITS", "16", 1);
    ::setenv("JLLM_CUDA_GEMM", "fp16", 1);
    ::setenv("JLLM_CUDA_GEMM_S8_MIN", "33", 1);
    ::setenv("JLLM_CUDA_GEMV", "int8", 1);
    ::setenv("JLLM_CUDA_TILES", "0", 1);
    const BackendOptions o = backend_options_from_env();
    EXPECT_EQ(o.cpu.simd, SimdLevel::Scalar);
    EXPECT_FALSE(o.cuda.graphs);
    EXPECT_TRUE(o.cuda.profile);
    EXPECT_TRUE(o.cuda.sync_check);
    EXPECT_FALSE(o.cuda.warm_up);
    EXPECT_EQ(o.cuda.attention.kernel, cuda::AttnKernel::Simt);
    EXPECT_EQ(o.cuda.attention.decode_warps, 2);
    EXPECT_EQ(o.cuda.attn_max_split, 16);
    EXPECT_FALSE(o.cuda.gemm_int8);
    EXPECT_EQ(o.cuda.gemm_int8_min_tokens, 33);
    EXPECT_TRUE(o.cuda.gemv_int8);
    EXPECT_FALSE(o.cuda.tiled_weights);
}

// A value outside the allowed ones is an error that names the knob (never silently ignored).
TEST(BackendOptions, BadKnobValueIsAnError) {
    CleanEnv env;
    for (const char* knob : {"JLLM_CUDA_GRAPH", "JLLM_CUDA_PROFILE", "JLLM_CUDA_SYNC_CHECK", "JLLM_CUDA_WARMUP",
                             "JLLM_CUDA_ATTN_KERNEL", "JLLM_CUDA_ATTN_WARPS", "JLLM_CUDA_ATTN_SPLITS",
                             "JLLM_CUDA_GEMM", "JLLM_CUDA_GEMM_S8_MIN", "JLLM_CUDA_TILES", "JLLM_CUDA_GEMV"}) {
        SCOPED_TRACE(knob);
        ASSERT_EQ(::setenv(knob, "3x", 1), 0);
        try {
            (void)backend_options_from_env();
            ADD_FAILURE() << "accepted '3x'";
        } catch (const JllmError& e) {
            EXPECT_NE(std::string(e.what()).find(knob), std::string::npos) << e.what();
        }
        ::unsetenv(knob);
    }
    ::setenv("JLLM_CUDA_ATTN_SPLITS", "0", 1);
    EXPECT_THROW(backend_options_from_env(), JllmError);
    ::setenv("JLLM_CUDA_ATTN_SPLITS", "257", 1);
    EXPECT_THROW(backend_options_from_env(), JllmError);
    ::unsetenv("JLLM_CUDA_ATTN_SPLITS");
    ::setenv("JLLM_CUDA_GEMM_S8_MIN", "4", 1);  // a GEMV batch
    EXPECT_THROW(backend_options_from_env(), JllmError);
}
