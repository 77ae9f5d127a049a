// bench/grammar/bench_grammar.cpp — jllm-bench-grammar: what a grammar's token mask costs per
// generated token. Random walks through the grammar (each step: the mask, then a random allowed
// token, text preferred over ending) on a real vocabulary; prints p50 / p99 / max of the mask
// time, trie walks and cache hits. One thread, as the engine computes masks.
//   jllm-bench-grammar [--vocab qwen3|llama3] [--grammar json|tools|FILE.gbnf] [--walks N] [--steps N]
// json: the json_object grammar (response_format json_object); tools: the tool-call grammar of
// tool_choice required over Home Assistant's intent tools (Hermes format).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/tool_calls.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/token_mask.h"
#include "tok_test_util.h"

using namespace jllm;

namespace {

// Home Assistant's intent tools (shapes of its LLM API): the tool-call grammar of tool_choice
// required over them.
const char* const HA_TOOLS = R"([
 {"type": "function", "function": {"name": "HassTurnOn", "parameters": {"type": "object", "properties": {
   "name": {"type": "string"}, "area": {"type": "string"},
   "domain": {"type": "array", "items": {"type": "string", "enum": ["light", "switch", "fan", "cover"]}}}}}},
 {"type": "function", "function": {"name": "HassTurnOff", "parameters": {"type": "object", "properties": {
   "name": {"type": "string"}, "area": {"type": "string"}}}}},
 {"type": "function", "function": {"name": "HassLightSet", "parameters": {"type": "object", "properties": {
   "name": {"type": "string"}, "brightness": {"type": "integer", "minimum": 0, "maximum": 100},
   "color": {"type": "string", "enum": ["red", "green", "blue", "white"]}}, "required": ["brightness"]}}},
 {"type": "function", "function": {"name": "HassClimateSetTemperature", "parameters": {"type": "object",
   "properties": {"area": {"type": "string"}, "temperature": {"type": "number", "minimum": 5, "maximum": 35}},
   "required": ["temperature"]}}},
 {"type": "function", "function": {"name": "GetLiveContext"}}
])";

std::string grammar_text(const std::string& which) {
    if (which == "json") return json_object_gbnf();
    if (which == "tools") {
        ToolRequest t;
        t.tools_json = HA_TOOLS;
        t.choice = ToolChoice::Required;
        return tool_constraint(ToolFormat::Hermes, t).text;
    }
    std::ifstream in(which);
    if (!in) throw JllmError("cannot read " + which);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"jllm-bench-grammar: token-mask cost per generated token"};
    std::string vocab = "qwen3", grammar_file = "json";
    int walks = 20, steps = 200;
    uint32_t seed = 1;
    app.add_option("--vocab", vocab, "reference vocabulary")->check(CLI::IsMember({"qwen3", "llama3"}))
        ->capture_default_str();
    app.add_option("--grammar", grammar_file, "json, tools or a GBNF file")->capture_default_str();
    app.add_option("--walks", walks, "random walks")->capture_default_str();
    app.add_option("--steps", steps, "tokens per walk at most")->capture_default_str();
    app.add_option("--seed", seed, "random seed")->capture_default_str();
    CLI11_PARSE(app, argc, argv);
    try {
        const std::string gbnf = grammar_text(grammar_file);
        const Tokenizer& tok = test::hf_tokenizer(vocab);
        const auto t0 = std::chrono::steady_clock::now();
        auto trie = std::make_shared<const VocabTrie>(tok);
        const double build_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        std::mt19937 rng(seed);
        std::vector<double> us;
        int64_t walks_done = 0, hits = 0;
        for (int w = 0; w < walks; ++w) {
            GrammarMatcher m(parse_gbnf(gbnf), trie);
            for (int i = 0; i < steps; ++i) {
                const auto a = std::chrono::steady_clock::now();
                const uint32_t* mask = m.mask();
                us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a).count());
                std::vector<int32_t> text;
                for (size_t k = 0; k < trie->words(); ++k) {
                    for (uint32_t bits = mask[k]; bits != 0; bits &= bits - 1) {
                        const int32_t t = static_cast<int32_t>(k * 32 + static_cast<size_t>(__builtin_ctz(bits)));
                        if (!tok.is_eog(t)) text.push_back(t);
                    }
                }
                if (text.empty()) break;
                (void)m.accept(text[std::uniform_int_distribution<size_t>(0, text.size() - 1)(rng)]);
            }
            walks_done += m.walks();
            hits += m.cache_hits();
        }
        std::sort(us.begin(), us.end());
        auto q = [&](double f) { return us[std::min(us.size() - 1, static_cast<size_t>(f * static_cast<double>(us.size())))]; };
        std::printf("vocabulary %s: %d tokens, trie %zu nodes (%.1f MiB), built in %.0f ms\n", vocab.c_str(),
                    trie->n_vocab(), trie->node_count(), static_cast<double>(trie->bytes()) / 1048576.0, build_ms);
        std::printf("grammar %s\n", grammar_file.c_str());
        std::printf("%zu masks: p50 %.1f us, p99 %.1f us, max %.1f us; trie walks %lld, cache hits %lld\n", us.size(),
                    q(0.50), q(0.99), us.back(), static_cast<long long>(walks_done), static_cast<long long>(hits));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "jllm-bench-grammar: %s\n", e.what());
        return 1;
    }
    return 0;
}
