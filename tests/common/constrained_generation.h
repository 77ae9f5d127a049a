// tests/common/constrained_generation.h — constrained generation through the Engine on a
// synthetic tiny Qwen3 (random weights, the real Qwen3 vocabulary and chat template), for the CPU
// backend's tests and the CUDA backend's GPU test set alike: what comes out is valid because the
// grammar made it so (the weights know nothing). Checks, for several seeds at temperature 1:
// tool_choice required / named give calls of the offered functions whose arguments parse and fit
// the schema, streamed call pieces reassemble to the result's calls, a JSON Schema output parses
// and fits, thinking-on requests are constrained only after the reasoning block, and an assistant
// prefix is continued under the grammar.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "jllm_engine.h"
#include "synth/synth_model.h"
#include "test_paths.h"

namespace jllm::test {

// The tiny Qwen3 written once per program as JLLM_BINARY_DIR/name (weights from `seed`).
inline std::string constrained_model_path(const std::string& name, uint64_t seed = 7) {
    const std::string path = std::string(JLLM_BINARY_DIR) + "/" + name;
    static std::map<std::string, bool> written;
    if (!written[path]) {
        SynthOptions opt;
        opt.preset = "tiny-qwen3";
        opt.recipe = QuantRecipe::Q8_0;
        opt.seed = seed;
        opt.tokenizer_dir = shared_dir() + "/testdata/tokenizers";
        write_synth_model(opt, path, 2);
        written[path] = true;
    }
    return path;
}

// Parameters whose every instance is short (enums, bounded integers, booleans), so a random
// model's constrained output always ends well within max_tokens.
inline const char* constrained_tools_json() {
    return R"([
 {"type": "function", "function": {"name": "light_set", "description": "Set a light",
  "parameters": {"type": "object", "properties": {
    "entity_id": {"type": "string", "enum": ["light.kitchen", "light.hall", "light.porch"]},
    "brightness": {"type": "integer", "minimum": 0, "maximum": 255},
    "on": {"type": "boolean"}},
   "required": ["entity_id", "on"], "additionalProperties": false}}},
 {"type": "function", "function": {"name": "scene_activate", "description": "Activate a scene",
  "parameters": {"type": "object", "properties": {
    "scene": {"type": "string", "enum": ["morning", "movie", "away"]}},
   "required": ["scene"], "additionalProperties": false}}}
])";
}

// Whether `args` fits the parameters of `name` in constrained_tools_json(); why not in `why`.
inline bool constrained_args_fit(const std::string& name, const std::string& args, std::string& why) {
    nlohmann::json a;
    try {
        a = nlohmann::json::parse(args);
    } catch (const std::exception& e) {
        why = std::string("does not parse: ") + e.what();
        return false;
    }
    if (!a.is_object()) return why = "not an object", false;
    if (name == "light_set") {
        static const std::vector<std::string> ids = {"light.kitchen", "light.hall", "light.porch"};
        for (auto it = a.begin(); it != a.end(); ++it) {
            if (it.key() != "entity_id" && it.key() != "brightness" && it.key() != "on") return why = "extra key " + it.key(), false;
        }
        if (!a.contains("entity_id") || !a["entity_id"].is_string() ||
            std::find(ids.begin(), ids.end(), a["entity_id"].get<std::string>()) == ids.end()) {
            return why = "entity_id", false;
        }
        if (!a.contains("on") || !a["on"].is_boolean()) return why = "on", false;
        if (a.contains("brightness") && (!a["brightness"].is_number_integer() || a["brightness"].get<int>() < 0 ||
                                         a["brightness"].get<int>() > 255)) {
            return why = "brightness", false;
        }
        return true;
    }
    if (name == "scene_activate") {
        if (a.size() != 1 || !a.contains("scene") || !a["scene"].is_string()) return why = "scene", false;
        const std::string s = a["scene"].get<std::string>();
        if (s != "morning" && s != "movie" && s != "away") return why = "scene value", false;
        return true;
    }
    why = "unknown function " + name;
    return false;
}

struct ConstrainedRun {
    GenerateResult result;
    std::vector<ToolCall> streamed;  // the ToolCall pieces reassembled per index
    std::string content;             // the content pieces
};

inline ConstrainedRun constrained_generate(Engine& e, const GenerateRequest& req) {
    ConstrainedRun run;
    run.result = e.generate(req, [&](const Piece& p) {
        if (p.channel == Channel::Content) run.content += p.text;
        if (p.channel != Channel::ToolCall) return true;
        if (!p.tool_id.empty()) {
            EXPECT_EQ(p.tool_index, static_cast<int>(run.streamed.size()));
            run.streamed.push_back(ToolCall{p.tool_id, p.tool_name, ""});
        }
        EXPECT_GE(p.tool_index, 0);
        EXPECT_LT(p.tool_index, static_cast<int>(run.streamed.size()));
        if (p.tool_index >= 0 && p.tool_index < static_cast<int>(run.streamed.size())) {
            run.streamed[static_cast<size_t>(p.tool_index)].arguments += p.text;
        }
        return true;
    });
    return run;
}

inline GenerateRequest constrained_request(Engine& e, bool thinking, uint64_t seed) {
    ChatRenderOptions ro;
    ro.tools_json = constrained_tools_json();
    ro.enable_thinking = thinking;
    GenerateRequest req;
    req.prompt = e.render_chat({ChatMessage{"user", "Turn on the kitchen light", "", {}, "", ""}}, ro);
    req.parse_special = true;
    req.max_tokens = 120;
    req.sampling.temperature = 1.0f;
    req.sampling.seed = seed;
    req.tools.tools_json = constrained_tools_json();
    return req;
}

// tool_choice required, one call: the run, its single call checked against the schema.
inline ConstrainedRun one_required_call(Engine& e, bool thinking, uint64_t seed, const std::string& prefix,
                                        std::vector<std::pair<int32_t, float>> bias = {}) {
    GenerateRequest req = constrained_request(e, thinking, seed);
    req.split_thinking = thinking;
    req.thinking_may_open = thinking;
    req.tools.choice = ToolChoice::Required;
    req.tools.parallel = false;
    req.sampling.logit_bias = std::move(bias);
    req.assistant_prefix = prefix;
    req.prompt += prefix;
    ConstrainedRun run = constrained_generate(e, req);
    EXPECT_EQ(run.result.finish, FinishReason::ToolCalls) << run.result.error;
    EXPECT_EQ(run.result.tool_calls.size(), 1u);
    if (run.result.tool_calls.size() == 1) {
        std::string why;
        EXPECT_TRUE(constrained_args_fit(run.result.tool_calls[0].name, run.result.tool_calls[0].arguments, why))
            << run.result.tool_calls[0].arguments << ": " << why;
    }
    return run;
}

inline void check_constrained_generation(DeviceKind device) {
    Engine e;
    EngineConfig cfg;
    cfg.model_path = constrained_model_path("constrained_tiny_qwen3.gguf");
    cfg.device = device;
    cfg.n_ctx = 1024;
    cfg.n_threads = 2;
    const Status st = e.load(cfg);
    ASSERT_TRUE(st.ok) << st.message;

    for (const ToolChoice choice : {ToolChoice::Required, ToolChoice::Named}) {
        for (uint64_t seed = 1; seed <= 4; ++seed) {
            SCOPED_TRACE(testing::Message() << "choice " << static_cast<int>(choice) << " seed " << seed);
            GenerateRequest req = constrained_request(e, false, seed);
            req.tools.choice = choice;
            req.tools.name = "scene_activate";
            req.tools.parallel = false;
            const ConstrainedRun run = constrained_generate(e, req);
            ASSERT_EQ(run.result.finish, FinishReason::ToolCalls)
                << run.result.error << run.result.text << "|" << (run.streamed.empty() ? "" : run.streamed[0].arguments);
            ASSERT_EQ(run.result.tool_calls.size(), 1u);
            const ToolCall& c = run.result.tool_calls[0];
            if (choice == ToolChoice::Named) {
                EXPECT_EQ(c.name, "scene_activate");
            }
            std::string why;
            EXPECT_TRUE(constrained_args_fit(c.name, c.arguments, why)) << c.name << " " << c.arguments << ": " << why;
            ASSERT_EQ(run.streamed.size(), 1u);
            EXPECT_EQ(run.streamed[0].id, c.id);
            EXPECT_EQ(run.streamed[0].name, c.name);
            EXPECT_EQ(run.streamed[0].arguments, c.arguments);
            EXPECT_TRUE(run.result.text.empty()) << run.result.text;  // no call text in the content
            EXPECT_TRUE(run.content.empty()) << run.content;
        }
    }

    // Thinking on (Qwen3 opens the block itself): the reasoning block is free, the call comes
    // after it. <think> and </think> are biased up so a random model opens the block at once and
    // soon closes it; the bias cannot reach past the mask once the grammar applies.
    const std::vector<int32_t> open = e.tokenize("<think>", true), close = e.tokenize("</think>", true);
    ASSERT_EQ(open.size(), 1u);
    ASSERT_EQ(close.size(), 1u);
    for (uint64_t seed = 1; seed <= 3; ++seed) {
        SCOPED_TRACE(testing::Message() << "thinking, seed " << seed);
        const ConstrainedRun run = one_required_call(e, true, seed, "", {{open[0], 30.0f}, {close[0], 30.0f}});
        EXPECT_GT(run.result.stats.reasoning_tokens, 0);
    }
    // The same with the reasoning given as the assistant prefix.
    one_required_call(e, true, 5, "<think>\nThe kitchen light: light_set.\n</think>\n\n");

    // A prefix that opened the call: the rest completes it under the named function's schema.
    {
        const ConstrainedRun run = one_required_call(
            e, false, 9, "<tool_call>\n{\"name\": \"light_set\", \"arguments\": {\"entity_id\": \"light.porch\"");
        ASSERT_EQ(run.result.tool_calls.size(), 1u);
        const ToolCall& c = run.result.tool_calls[0];
        EXPECT_EQ(c.name, "light_set");
        EXPECT_EQ(c.arguments.rfind("{\"entity_id\": \"light.porch\"", 0), 0u) << c.arguments;
        ASSERT_EQ(run.streamed.size(), 1u);  // the prefix's part of the call is streamed too
        EXPECT_EQ(run.streamed[0].arguments, c.arguments);
    }

    // A JSON Schema document.
    for (uint64_t seed = 1; seed <= 4; ++seed) {
        GenerateRequest req;
        req.prompt = "A light as JSON:";
        req.max_tokens = 120;
        req.sampling.temperature = 1.0f;
        req.sampling.seed = seed;
        req.constraint.kind = OutputConstraint::Kind::JsonSchema;
        req.constraint.text = nlohmann::json::parse(constrained_tools_json())[0]["function"]["parameters"].dump();
        const GenerateResult r = e.generate(req, nullptr);
        ASSERT_EQ(r.finish, FinishReason::Stop) << r.error;
        std::string why;
        EXPECT_TRUE(constrained_args_fit("light_set", r.text, why)) << r.text << ": " << why;
    }

    // A constraint the model's tools cannot have: refused, the engine keeps working.
    {
        GenerateRequest req = constrained_request(e, false, 1);
        req.tools.choice = ToolChoice::Named;
        req.tools.name = "unlock_door";
        const GenerateResult r = e.generate(req, nullptr);
        EXPECT_EQ(r.finish, FinishReason::Error);
        EXPECT_NE(r.error.find("unlock_door"), std::string::npos) << r.error;
        ToolRequest t;
        t.tools_json = constrained_tools_json();
        t.choice = ToolChoice::Named;
        t.name = "unlock_door";
        EXPECT_FALSE(e.check_tools(t).ok);
        t.name = "light_set";
        EXPECT_TRUE(e.check_tools(t).ok) << e.check_tools(t).message;
    }
}

}  // namespace jllm::test
