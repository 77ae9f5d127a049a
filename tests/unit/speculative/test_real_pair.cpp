// tests/unit/speculative/test_real_pair.cpp — speculative decoding on the real pair (CPU):
// Qwen2.5-Coder-1.5B-Instruct Q4_K_M as the model, Qwen2.5-Coder-0.5B-Instruct as its draft
// (scripts/fetch_model.sh qwen2.5-1.5b qwen2.5-0.5b). Greedy output, with the default repeat
// penalty, is token for token the same with --spec off, ngram and draft over the ten prompts of
// tests/data/speculative/prompts.json (tool calls, home-assistant status, chat, code), 128 tokens
// each; both drafters had drafts accepted and rejected.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "jllm_engine.h"
#include "test_paths.h"

namespace jllm {
namespace {

std::unique_ptr<Engine> load_pair(SpecMode spec, const std::string& draft) {
    EngineConfig c;
    c.model_path = test::models_dir() + "/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf";
    c.device = DeviceKind::Cpu;
    c.n_ctx = 1024;
    c.n_threads = 2;
    c.cache_ram_mb = 0;
    c.spec = spec;
    c.draft_model_path = draft;
    c.draft_max = 4;
    auto e = std::make_unique<Engine>();
    const Status s = e->load(c);
    EXPECT_TRUE(s.ok) << s.message;
    return s.ok ? std::move(e) : nullptr;
}

TEST(RealPair, GreedyOutputIdenticalWithEveryDrafter) {
    const std::string target = test::models_dir() + "/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf";
    const std::string draft = test::models_dir() + "/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";
    if (!test::file_exists(target) || !test::file_exists(draft)) {
        if (std::getenv("JLLM_REQUIRE_MODELS")) FAIL() << "models missing: " << target << ", " << draft;
        GTEST_SKIP() << "scripts/fetch_model.sh qwen2.5-1.5b qwen2.5-0.5b";
    }
    auto off = load_pair(SpecMode::Off, "");
    auto ngram = load_pair(SpecMode::Ngram, "");
    auto model = load_pair(SpecMode::Draft, draft);
    ASSERT_TRUE(off && ngram && model);
    const nlohmann::json prompts =
        nlohmann::json::parse(test::read_file(test::data_dir() + "/speculative/prompts.json"));
    ASSERT_GE(prompts.size(), 10u);
    GenerateStats ng, md;
    for (const auto& p : prompts) {
        ChatRenderOptions ro;
        if (p.contains("tools")) ro.tools_json = p["tools"].dump();
        const std::string text = off->render_chat(chat_messages_from_json(p["messages"].dump()), ro);
        std::vector<int32_t> reference;
        std::string reference_text;
        for (Engine* e : {off.get(), ngram.get(), model.get()}) {
            GenerateRequest r;
            r.prompt = text;
            r.parse_special = true;
            r.sampling.temperature = 0;  // the default repeat penalty stays on
            r.max_tokens = 128;
            const GenerateResult res = e->generate(r, nullptr);
            ASSERT_NE(res.finish, FinishReason::Error) << res.error;
            if (e == off.get()) {
                reference = e->resident_tokens();
                reference_text = res.text;
                continue;
            }
            EXPECT_EQ(e->resident_tokens(), reference) << p["name"];
            EXPECT_EQ(res.text, reference_text) << p["name"];
            GenerateStats& sum = e == ngram.get() ? ng : md;
            sum.ngram_drafted += res.stats.ngram_drafted;
            sum.ngram_accepted += res.stats.ngram_accepted;
            sum.model_drafted += res.stats.model_drafted;
            sum.model_accepted += res.stats.model_accepted;
        }
    }
    std::printf("[real pair] prompt lookup: %d of %d drafted tokens accepted; draft model: %d of %d\n",
                ng.ngram_accepted, ng.ngram_drafted, md.model_accepted, md.model_drafted);
    EXPECT_GT(ng.ngram_accepted, 0);
    EXPECT_LT(ng.ngram_accepted, ng.ngram_drafted);
    EXPECT_GT(md.model_accepted, 0);
    EXPECT_LT(md.model_accepted, md.model_drafted);
    EXPECT_EQ(ng.model_drafted, 0);
    EXPECT_EQ(md.ngram_drafted, 0);
}

}  // namespace
}  // namespace jllm
