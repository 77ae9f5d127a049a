// tests/unit/synth/test_synth_cut.cpp — `--from REAL.gguf --layers K` on SmolLM2-135M: the cut
// keeps the embeddings, norms and vocabulary byte for byte, every metadata entry but
// block_count, drops the blocks >= K, and still runs in the Engine.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "gguf/gguf.h"
#include "synth/model_cut.h"
#include "synth/quant_recipe.h"
#include "synth_test_util.h"
#include "test_paths.h"

namespace jllm {
namespace {

bool require_models() {
    const char* e = std::getenv("JLLM_REQUIRE_MODELS");
    return e && *e && std::string(e) != "0";
}

TEST(SynthCut, SmolLM2FirstThreeLayers) {
    const std::string src = test::smollm2_path();
    if (!test::file_exists(src)) {
        if (require_models()) FAIL() << src << " is missing (scripts/fetch_model.sh) and JLLM_REQUIRE_MODELS is set";
        GTEST_SKIP() << src << " not present (scripts/fetch_model.sh)";
    }
    const std::string out = test::synth_temp_path("smollm2-cut3");
    const CutSummary s = cut_model_layers(src, 3, out);
    EXPECT_EQ(s.n_layer_out, 3);
    EXPECT_GT(s.n_layer_in, 3);
    {
        auto a = GgufFile::open(src);
        auto b = GgufFile::open(out);
        const std::string arch(*a->get_string("general.architecture"));
        EXPECT_EQ(*b->get_uint(arch + ".block_count"), 3u);
        // Every other metadata entry is copied unchanged (values compared as printed, in full).
        ASSERT_EQ(a->kvs().size(), b->kvs().size());
        for (const GgufKV& kv : a->kvs()) {
            const GgufKV* o = b->find(kv.key);
            ASSERT_NE(o, nullptr) << kv.key;
            EXPECT_EQ(o->value.type, kv.value.type) << kv.key;
            if (kv.key == arch + ".block_count") continue;
            EXPECT_EQ(o->value.to_string(1u << 30), kv.value.to_string(1u << 30)) << kv.key;
        }
        // Tensors: those outside blocks >= 3, same type, shape and bytes.
        size_t kept = 0;
        for (const GgufTensorInfo& t : a->tensors()) {
            const GgufTensorInfo* o = b->find_tensor(t.name);
            if (tensor_layer_index(t.name) >= 3) {
                EXPECT_EQ(o, nullptr) << t.name;
                continue;
            }
            ASSERT_NE(o, nullptr) << t.name;
            kept++;
            EXPECT_EQ(o->type, t.type);
            EXPECT_EQ(o->shape_string(), t.shape_string());
            ASSERT_EQ(o->nbytes, t.nbytes);
            EXPECT_EQ(std::memcmp(o->data, t.data, t.nbytes), 0) << t.name;
        }
        EXPECT_EQ(b->tensors().size(), kept);
        EXPECT_LT(b->file_size(), a->file_size());
    }
    int64_t n_vocab = 0;
    const std::vector<int32_t> tokens = {1, 504, 2, 330};
    const std::vector<float> logits = test::synth_eval(out, tokens, &n_vocab);
    ASSERT_EQ(logits.size(), tokens.size() * static_cast<size_t>(n_vocab));
    for (float v : logits) ASSERT_TRUE(std::isfinite(v));
    EXPECT_THROW(cut_model_layers(src, 0, out + ".bad"), JllmError);
    EXPECT_THROW(cut_model_layers(src, s.n_layer_in + 1, out + ".bad"), JllmError);
    std::remove(out.c_str());
}

}  // namespace
}  // namespace jllm
