// apps/bench/workload.h — jllm-bench --workload (workload.cpp): speculative decoding measured on
// chat prompts (tests/data/speculative/prompts.json), each --spec mode against `off`.
#pragma once

#include <string>

#include "jllm.h"

namespace jllm::bench {

struct WorkloadOptions {
    EngineConfig config;       // model, threads, device, ...; spec and draft set per mode
    std::string file;          // [{name, kind, messages, tools?}]
    std::string draft;         // the draft model for the modes that use one
    std::string modes = "off,ngram,draft,auto";
    std::string sequences;     // where not empty: each prompt's tokens and `off`'s output, JSON lines
    int tokens = 128;
    int reps = 1;
    float repeat_penalty = 1.0f;
};

// Prints the markdown table; returns 1 when any mode's greedy output differs from `off`'s.
// Throws std::runtime_error on bad input.
int run_workload(const WorkloadOptions& o);

}  // namespace jllm::bench
