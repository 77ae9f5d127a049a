// memory/engine_memory.h — the engine's memory plan in one call, so the engine's load() stays a
// few lines: budget the weights and runtime, choose or refuse n_ctx before anything is
// allocated, then record what the backend really allocated and set up the OOM guard.
#pragma once

#include <string>

#include "jllm_engine.h"
#include "memory/memory_budget.h"
#include "memory/oom_guard.h"

namespace jllm {

struct ModelConfig;
struct ModelWeights;
class Backend;

// Session snapshots in host RAM (cfg.cache_ram_mb): an explicit size is reserved before n_ctx is
// chosen (so a context that does not fit beside it is refused with both numbers); the default
// (-1) takes half of what is left after the pools, at most 1 GiB, none below 64 MiB.
constexpr int64_t SESSION_CACHE_AUTO_MAX = 1024 * MIB;
constexpr int64_t SESSION_CACHE_AUTO_MIN = 64 * MIB;

// Chooses n_ctx for `cfg.n_ctx` (0 = largest that fits, capped at min(model, 4096); explicit
// values up to the model's context). Throws JllmError with the numbers when it does not fit.
// A draft model (speculative decoding), when given: its weights and its pools are counted beside
// the model's for every context tried.
struct DraftPlan {
    const ModelConfig* mc = nullptr;
    const ModelWeights* w = nullptr;
    const Backend* backend = nullptr;
};
int plan_context(MemoryBudget& budget, const EngineConfig& cfg, const ModelConfig& mc, const ModelWeights& w,
                 Backend& backend, int n_threads, const DraftPlan& draft = {});

// After allocate(): records the backend's pool sizes, sizes the default session cache, checks the
// cap, configures and calibrates the guard. Returns the load-time report (with the guard's threshold, interval and read cost).
MemoryReport finish_memory_plan(MemoryBudget& budget, const EngineConfig& cfg, const Backend& backend, int n_ctx,
                                OomGuard& guard, const Backend* draft = nullptr);

}  // namespace jllm
