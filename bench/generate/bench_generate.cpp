// bench/generate/bench_generate.cpp — jllm-bench-generate: what an output constraint costs a
// generation. For each mode (none, json_object, a JSON Schema, tool calls with tool_choice
// required) it runs the same chat prompts through Engine::generate, greedy or sampled, and
// reports the median decode rate (GenerateStats::decode_tps, tokens after the first per second)
// and its ratio to the unconstrained rate of the same run, with the host time the masks took
// (GenerateStats::mask_ms per token; on CUDA computed while the GPU runs the step). The constrained steps take the same
// path as unconstrained ones (Backend::forward_select with the grammar's mask).
//   jllm-bench-generate -m FILE [--device auto|cpu|cuda] [-n 128] [-r 3] [-t N] [--sampling greedy|topk]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "jllm_engine.h"

using namespace jllm;

namespace {

const char* const TOOLS = R"([
 {"type": "function", "function": {"name": "HassTurnOn", "description": "Turns on a device", "parameters": {
   "type": "object", "properties": {"name": {"type": "string"}, "area": {"type": "string"},
   "domain": {"type": "array", "items": {"type": "string", "enum": ["light", "switch", "fan", "cover"]}}}}}},
 {"type": "function", "function": {"name": "HassLightSet", "description": "Sets a light", "parameters": {
   "type": "object", "properties": {"name": {"type": "string"}, "brightness": {"type": "integer", "minimum": 0,
   "maximum": 100}}, "required": ["brightness"]}}},
 {"type": "function", "function": {"name": "GetLiveContext", "description": "The state of the home"}}
])";

const char* const DEVICES_SCHEMA = R"({"type": "object", "properties": {"devices": {"type": "array", "items": {
  "type": "object", "properties": {"entity_id": {"type": "string"}, "state": {"type": "string", "enum": ["on", "off"]},
  "friendly_name": {"type": "string"}}, "required": ["entity_id", "state", "friendly_name"],
  "additionalProperties": false}}}, "required": ["devices"], "additionalProperties": false})";

const char* const PROMPTS[] = {
    "List the devices of a smart home with their states, as JSON.",
    "Turn on every light in the house, one by one.",
    "Describe the living room: lights, blinds, thermostat, as JSON.",
};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"jllm-bench-generate: decode rate of generations, unconstrained and constrained"};
    std::string model, device = "auto", sampling = "greedy";
    int n_tokens = 128, reps = 3, threads = 0, n_ctx = 2048;
    app.add_option("-m,--model", model, "GGUF file")->required();
    app.add_option("--device", device, "auto, cpu or cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}))
        ->capture_default_str();
    app.add_option("-n,--tokens", n_tokens, "tokens per generation at most")->check(CLI::Range(2, 4096))
        ->capture_default_str();
    app.add_option("-r,--reps", reps, "generations per prompt and mode")->check(CLI::Range(1, 100))->capture_default_str();
    app.add_option("-t,--threads", threads, "CPU threads (0: all cores)")->capture_default_str();
    app.add_option("-c,--ctx", n_ctx, "context size")->capture_default_str();
    app.add_option("--sampling", sampling, "greedy (the argmax) or topk (temperature 0.7, top-k 40)")
        ->check(CLI::IsMember({"greedy", "topk"}))->capture_default_str();
    CLI11_PARSE(app, argc, argv);

    Engine e;
    EngineConfig cfg;
    cfg.model_path = model;
    cfg.device = device == "cpu" ? DeviceKind::Cpu : device == "cuda" ? DeviceKind::Cuda : DeviceKind::Auto;
    cfg.n_threads = threads;
    cfg.n_ctx = n_ctx;
    const Status st = e.load(cfg);
    if (!st.ok) {
        std::fprintf(stderr, "jllm-bench-generate: %s\n", st.message.c_str());
        return 1;
    }
    const ModelInfo mi = e.model_info();
    std::printf("jllm-bench-generate: %s (%s), backend %s, %s, %d tokens, %d reps x %zu prompts, sampling %s\n",
                mi.name.c_str(), mi.arch.c_str(), mi.backend.c_str(), mi.device.c_str(), n_tokens, reps,
                std::size(PROMPTS), sampling.c_str());

    struct Mode {
        const char* name;
        OutputConstraint::Kind kind;
        const char* schema;
        bool tools;
    };
    const Mode modes[] = {{"none", OutputConstraint::Kind::None, "", false},
                          {"json_object", OutputConstraint::Kind::JsonObject, "", false},
                          {"json_schema", OutputConstraint::Kind::JsonSchema, DEVICES_SCHEMA, false},
                          {"tools (required)", OutputConstraint::Kind::None, "", true}};
    const bool can_tools = [&] {
        ToolRequest t;
        t.tools_json = TOOLS;
        t.choice = ToolChoice::Required;
        return e.check_tools(t).ok;
    }();
    // Rounds over every mode in turn, so a drift of the machine's speed reaches all modes alike;
    // the first round warms up (the trie, masks, graphs) and is not counted.
    const size_t n_modes = std::size(modes);
    std::vector<std::vector<double>> tps(n_modes), toks(n_modes), mask_us(n_modes), mask_max(n_modes);
    for (int r = 0; r < reps + 1; ++r) {
        for (size_t mi_ = 0; mi_ < n_modes; ++mi_) {
            const Mode& md = modes[mi_];
            if (md.tools && !can_tools) continue;
            for (const char* p : PROMPTS) {
                ChatRenderOptions ro;
                if (md.tools) ro.tools_json = TOOLS;
                GenerateRequest req;
                req.prompt = e.render_chat({ChatMessage{"user", p, "", {}, "", ""}}, ro);
                req.parse_special = true;
                req.max_tokens = n_tokens;
                req.sampling.repeat_penalty = 1.0f;
                req.sampling.temperature = sampling == "greedy" ? 0.0f : 0.7f;
                req.sampling.top_k = 40;
                req.sampling.top_p = 1.0f;
                req.sampling.seed = static_cast<uint64_t>(r + 1);
                req.constraint.kind = md.kind;
                req.constraint.text = md.schema;
                if (md.tools) {
                    req.tools.tools_json = TOOLS;
                    req.tools.choice = ToolChoice::Required;
                }
                e.clear_cache();  // every generation prefills its prompt: no run helps the next
                const GenerateResult res = e.generate(req, nullptr);
                if (res.finish == FinishReason::Error) {
                    std::fprintf(stderr, "jllm-bench-generate: %s: %s\n", md.name, res.error.c_str());
                    return 1;
                }
                if (r == 0 || res.stats.completion_tokens < 8) continue;  // warm-up, or too short to time
                tps[mi_].push_back(res.stats.decode_tps);
                toks[mi_].push_back(res.stats.completion_tokens);
                mask_us[mi_].push_back(1000.0 * res.stats.mask_ms / res.stats.completion_tokens);
                mask_max[mi_].push_back(res.stats.mask_max_ms);
            }
        }
    }
    const double base = median(tps[0]);
    std::printf("\n| mode | decode tok/s (median) | min .. max | tokens (median) | vs none | mask us/token (median) | "
                "longest mask ms |\n|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < n_modes; ++i) {
        if (modes[i].tools && !can_tools) {
            std::printf("| %s | (the model has no tool-call format) | | | |\n", modes[i].name);
            continue;
        }
        if (tps[i].empty()) {
            std::printf("| %s | (every generation ended within 8 tokens) | | | |\n", modes[i].name);
            continue;
        }
        const double m = median(tps[i]);
        std::printf("| %s | %.1f | %.1f .. %.1f | %.0f | %.0f%% | %.1f | %.2f |\n", modes[i].name, m,
                    *std::min_element(tps[i].begin(), tps[i].end()), *std::max_element(tps[i].begin(), tps[i].end()),
                    median(toks[i]), base > 0 ? 100.0 * m / base : 0.0, median(mask_us[i]),
                    *std::max_element(mask_max[i].begin(), mask_max[i].end()));
    }
    return 0;
}
