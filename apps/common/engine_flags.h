// apps/common/engine_flags.h — the engine's flags, defined once for every program that loads a
// model (jetson-llm, jetson-llm-server, jllm-bench, jllm-perplexity): names, help texts, defaults, ranges and the
// string -> enum parsing (DESIGN.md "One flag table"). Each program picks the groups it takes and
// adds its own flags beside them. Built from include/ alone, like the programs.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "jllm.h"

namespace jllm::flags {

// The groups of engine flags a program takes.
enum Group : unsigned {
    MODEL = 1u << 0,     // -m/--model
    CONTEXT = 1u << 1,   // -c/--ctx-size
    // -t/--threads, --kv-type (--int8-kv, --fp16-kv), --device, --weights, --mem-margin, --max-memory
    RUNTIME = 1u << 2,
    CHAT = 1u << 3,      // --chat-template
    // -n/--n-predict, --temp, --top-k, --top-p, --min-p, --repeat-penalty, --repeat-last-n, --seed
    SAMPLING = 1u << 4,
    SESSIONS = 1u << 5,  // --cache-ram, --kv-dir, --kv-dir-max, --cache-reuse
    SPEC = 1u << 6,      // --spec, --draft (--model-draft), --draft-max (--draft-n)
    ALL = MODEL | CONTEXT | RUNTIME | CHAT | SAMPLING | SESSIONS | SPEC,
};

// What the flags set. Fill the defaults a program differs in before add_engine_flags (help
// texts show them).
struct EngineFlags {
    EngineConfig config;
    SamplingParams sampling;
    int n_predict = 256;  // tokens to generate (-1: until the context is full)
};

// Adds the flags of `groups` to `app`, writing into `f`. sampling_defaults: the sampling flags
// are defaults for requests that leave a field out (the server), which their help texts say.
void add_engine_flags(CLI::App& app, EngineFlags& f, unsigned groups, bool sampling_defaults = false);

// What a parse left over, named for the error line: "unknown option --x" (any word starting with
// '-') or "unexpected argument y".
std::string leftover_message(const std::vector<std::string>& remaining);

}  // namespace jllm::flags
