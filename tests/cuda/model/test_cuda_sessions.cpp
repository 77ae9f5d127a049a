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
    const size_t V = static_cast<size_t>(m.c.n_vocab);
    const std::string dir = test::fresh_dir("cuda_roundtrip");
    ASSERT_EQ(std::system(("mkdir -p '" + dir + "'").c_str()), 0);
    for (KvType kv : {KvType::Int8, KvType::Fp16}) {
        const KvShape shape = kv_shape(*m.f, m.c, kv);
        auto a = create_cuda_backend(m.c);
        auto b = create_cuda_backend(m.c);
        for (auto* be : {a.get(), b.get()}) {
            be->bind_weights(m.w, WeightPlacement::Copy);
            be->allocate(128, 64, kv);
        }
        const std::vector<int32_t> prompt = test::random_tokens(4, 40);
        std::vector<float> la(V), lb(V);
        a->forward(prompt.data(), static_cast<int>(prompt.size()), 0, LogitsMode::Last, la.data());
        KvSnapshot s;
        s.key = "s:gpu";
        s.tokens = prompt;
        a->read_kv(0, static_cast<int>(prompt.size()), s.kv);
        const std::string path = dir + (kv == KvType::Int8 ? "/int8.jkv" : "/fp16.jkv");
        std::string why;
        ASSERT_EQ(write_kv_file(path, s, shape, why), KvFileError::None) << why;
        KvSnapshot back;
        ASSERT_EQ(read_kv_file(path, shape, back, why), KvFileError::None) << why;
        b->write_kv(0, back.kv);
        for (int pos = static_cast<int>(prompt.size()); pos < static_cast<int>(prompt.size()) + 6; ++pos) {
            const int32_t t = 500 + pos;
            a->forward(&t, 1, pos, LogitsMode::Last, la.data());
            b->forward(&t, 1, pos, LogitsMode::Last, lb.data());
            EXPECT_EQ(la, lb) << (kv == KvType::Int8 ? "int8" : "fp16") << " pos " << pos;
        }
    }
}

TEST(CudaSessions, InterleavedSessionsPrefillOnlyTheirNewTokens) {
    if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device";
    test::check_interleaved_sessions(DeviceKind::Cuda);
}

}  // namespace
}  // namespace jllm
