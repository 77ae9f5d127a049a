// tests/unit/chat/chat_golden_test.cpp — the built-in chat renderers against prompts rendered by
// the models' real Jinja templates (tests/data/chat/*.json, written by
// scripts/golden/gen_chat_goldens.py). Inputs come from the same JSON, so both sides render the
// same conversations; the output must be byte-identical.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <ostream>
#include <string>
#include <vector>

#include "engine/chat_template.h"
#include "test_paths.h"

namespace {

using nlohmann::ordered_json;

const char* const GOLDEN_FILES[] = {"qwen3", "llama3", "smollm2", "qwen2.5"};

struct GoldenCase {
    std::string file;
    std::string name;
    ordered_json doc_case;
};

// gtest prints a failing parameter with this instead of a byte dump.
void PrintTo(const GoldenCase& c, std::ostream* os) { *os << c.file << "/" << c.name; }

ordered_json load_golden(const std::string& file) {
    const std::string path = jllm::test::data_dir() + "/chat/" + file + ".json";
    const std::string text = jllm::test::read_file(path);
    if (text.empty()) return ordered_json();
    return ordered_json::parse(text);
}

std::vector<GoldenCase> all_cases() {
    std::vector<GoldenCase> cases;
    for (const char* file : GOLDEN_FILES) {
        const ordered_json doc = load_golden(file);
        if (!doc.is_object()) continue;
        for (const auto& c : doc["cases"]) cases.push_back({file, c["name"].get<std::string>(), c});
    }
    return cases;
}

class ChatGolden : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(ChatGolden, MatchesJinjaRendering) {
    const GoldenCase& gc = GetParam();
    const ordered_json doc = load_golden(gc.file);
    const std::string tmpl = doc["template"].get<std::string>();
    const ordered_json& c = gc.doc_case;

    // The kind comes from detection on the real template text, as the engine would pick it.
    const jllm::ChatTemplateKind kind =
        jllm::parse_chat_template_name("auto", tmpl, doc["arch"].get<std::string>());
    ASSERT_STREQ(jllm::chat_template_kind_name(kind), doc["kind"].get<std::string>().c_str());

    const std::vector<jllm::ChatMessage> msgs = jllm::chat_messages_from_json(c["messages"].dump());
    jllm::ChatRenderOptions opt;
    opt.add_generation_prompt = c["add_generation_prompt"].get<bool>();
    opt.enable_thinking = c.value("enable_thinking", true);
    opt.tools_json = c["tools"].is_null() ? "" : c["tools"].dump();
    opt.date_string = c["date_string"].get<std::string>();
    opt.bos_token = c["bos_token"].get<std::string>();

    const std::string got = jllm::render_chat(kind, msgs, opt, tmpl);
    std::string expected = c["expected"].get<std::string>();
    EXPECT_EQ(got, expected);
}

std::string case_name(const ::testing::TestParamInfo<GoldenCase>& info) {
    std::string n = info.param.file + "_" + info.param.name;
    for (char& ch : n) {
        if (ch == '.') ch = '_';  // gtest names take letters, digits and '_'
    }
    return n;
}

INSTANTIATE_TEST_SUITE_P(Templates, ChatGolden, ::testing::ValuesIn(all_cases()), case_name);

TEST(ChatGoldenFiles, PresentAndComplete) {
    size_t total = 0;
    for (const char* file : GOLDEN_FILES) {
        const ordered_json doc = load_golden(file);
        ASSERT_TRUE(doc.is_object()) << "missing golden tests/data/chat/" << file << ".json";
        ASSERT_TRUE(doc["cases"].is_array());
        EXPECT_GE(doc["cases"].size(), 6u) << file;
        total += doc["cases"].size();
    }
    EXPECT_EQ(total, all_cases().size());
}

TEST(ChatGoldenFiles, SmolLM2DefaultSystemPromptFromTemplate) {
    const ordered_json doc = load_golden("smollm2");
    ASSERT_TRUE(doc.is_object());
    EXPECT_EQ(jllm::chatml_default_system_prompt(doc["template"].get<std::string>()),
              "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
    // Templates whose system turn is built from the conversation carry no default.
    EXPECT_EQ(jllm::chatml_default_system_prompt(load_golden("qwen3")["template"].get<std::string>()), "");
    EXPECT_EQ(jllm::chatml_default_system_prompt(load_golden("llama3")["template"].get<std::string>()), "");
}

}  // namespace
