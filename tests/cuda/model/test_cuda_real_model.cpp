// tests/cuda/model/test_cuda_real_model.cpp — GPU vs CPU engine on a real model given by
// JLLM_GPU_MODEL (e.g. SmolLM2 cut to its first layers with `jllm-synth --from`): teacher-forced
// logits over a public-domain text (relative RMS <= 2%, top-1 agreement under the margin rule),
// and the same greedy continuation. Skips without a GPU or without the variable.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "jllm_engine.h"
#include "test_paths.h"

#if JLLM_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

using namespace jllm;

#if JLLM_CUDA
namespace {
std::string gpu_model() {
    const char* p = std::getenv("JLLM_GPU_MODEL");
    return p ? std::string(p) : std::string();
}
}  // namespace
#endif

TEST(CudaRealModel, TeacherForcedAndGreedyMatchCpu) {
#if !JLLM_CUDA
    GTEST_SKIP() << "built without the CUDA backend";
#else
    if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device";
    const std::string model = gpu_model();
    if (model.empty()) GTEST_SKIP() << "JLLM_GPU_MODEL not set";
    const std::string text = test::read_file(test::data_dir() + "/text/public_domain.txt");
    for (KvType kv : {KvType::Fp16, KvType::Int8}) {
        Engine cpu, gpu;
        EngineConfig cfg;
        cfg.model_path = model;
        cfg.n_ctx = 1024;
        cfg.kv_type = kv;
        cfg.device = DeviceKind::Cpu;
        Status st = cpu.load(cfg);
        ASSERT_TRUE(st.ok) << st.message;
        cfg.device = DeviceKind::Cuda;
        st = gpu.load(cfg);
        ASSERT_TRUE(st.ok) << st.message;
        std::vector<int32_t> ids = cpu.tokenize(text, false, false);
        ids.resize(600);
        std::vector<float> lc, lg;
        ASSERT_TRUE(cpu.eval_all_logits(ids, lc).ok);
        ASSERT_TRUE(gpu.eval_all_logits(ids, lg).ok);
        const size_t V = static_cast<size_t>(cpu.model_info().n_vocab);
        double se = 0, sr = 0;
        size_t checked = 0, agree = 0;
        for (size_t i = 0; i < ids.size(); ++i) {
            const float* c = lc.data() + i * V;
            const float* g = lg.data() + i * V;
            double mean = 0;
            size_t a1 = 0, a2 = 1, ag = 0;
            for (size_t v = 0; v < V; ++v) {
                se += (static_cast<double>(g[v]) - c[v]) * (static_cast<double>(g[v]) - c[v]);
                sr += static_cast<double>(c[v]) * c[v];
                mean += c[v];
                if (g[v] > g[ag]) ag = v;
            }
            mean /= V;
            double var = 0;
            for (size_t v = 0; v < V; ++v) var += (c[v] - mean) * (c[v] - mean);
            const double sd = std::sqrt(var / V);
            if (c[a2] > c[a1]) std::swap(a1, a2);
            for (size_t v = 2; v < V; ++v) {
                if (c[v] > c[a1]) { a2 = a1; a1 = v; } else if (c[v] > c[a2]) { a2 = v; }
            }
            if (c[a1] - c[a2] > 0.1 * sd) {
                checked++;
                agree += ag == a1;
            }
        }
        const double rel = std::sqrt(se / sr);
        std::printf("[gpu-real] %s KV: relative RMS %.4f%%, top-1 agreement %zu/%zu over %zu positions\n",
                    kv == KvType::Int8 ? "INT8" : "FP16", rel * 100, agree, checked, ids.size());
        EXPECT_LE(rel, 0.02);
        EXPECT_GE(static_cast<double>(agree), 0.99 * checked);

        GenerateRequest req;
        req.prompt = "The capital of France is";
        req.sampling.temperature = 0.0f;
        req.max_tokens = 24;
        const GenerateResult rc = cpu.generate(req, nullptr);
        const GenerateResult rg = gpu.generate(req, nullptr);
        std::printf("[gpu-real] greedy cpu: %s\n[gpu-real] greedy gpu: %s\n[gpu-real] gpu decode %.1f tok/s\n",
                    rc.text.c_str(), rg.text.c_str(), rg.stats.decode_tps);
        EXPECT_EQ(rg.finish, rc.finish);
    }
#endif
}
