// tests/cuda/model/test_cuda_sessions.cpp — sessions on the CUDA backend: a KV snapshot through a
// session file into a second GPU backend continues with bit-identical logits (INT8 and FP16), and
// the Engine's interleaved sessions (tests/common/session_checks.h) prefill only their new tokens
// with the same greedy text as a cache-less engine.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "persistence/kv_file.h"
#include "session_checks.h"
#include "tiny_qwen3.h"

namespace jllm {
namespace {

TEST(CudaSessions, SnapshotThroughAFileContinuesBitIdentical) {
    if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device";
    const test::TinyQwen3 m = test::tiny_qwen3("cuda_sessions_tiny_qwen3_q8_0.gguf", 7);
    const std::string dir = test::fresh_dir("cuda_roundtrip");
    ASSERT_EQ(std::system(("mkdir -p '" + dir + "'").c_str()), 0);
    for (KvType kv : {KvType::Int8, KvType::Fp16}) {
        auto a = create_cuda_backend(m.c);
        auto b = create_cuda_backend(m.c);
        for (auto* be : {a.get(), b.get()}) {
            be->bind_weights(m.w, WeightPlacement::Copy);
            be->allocate(128, 64, kv);
        }
        test::expect_file_round_trip(*a, *b, m, kv, test::random_tokens(4, 40),
                                     dir + (kv == KvType::Int8 ? "/int8.jkv" : "/fp16.jkv"), 6);
    }
}

TEST(CudaSessions, InterleavedSessionsPrefillOnlyTheirNewTokens) {
    if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device";
    test::check_interleaved_sessions(DeviceKind::Cuda);
}

}  // namespace
}  // namespace jllm
