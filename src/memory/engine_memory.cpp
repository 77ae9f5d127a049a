// memory/engine_memory.cpp — see engine_memory.h.
#include "memory/engine_memory.h"

#include <algorithm>

#include "backend/backend.h"
#include "backend/cpu/cpu_pool_plan.h"
#include "model/model_config.h"
#include "model/model_weights.h"

namespace jllm {

namespace {

// The scratch pool a model's backend allocates for n positions (batches up to 512).
int64_t scratch_pool(const ModelConfig& mc, const ModelWeights& w, int n, int n_threads, int64_t mm512) {
    const int nb = std::min(n, 512);
    return cpu_scratch_pool_bytes(mc, n, nb, n_threads, nb == 512 ? mm512 : cpu_matmul_scratch_bytes(w, nb));
}

}  // namespace

int plan_context(MemoryBudget& budget, const EngineConfig& cfg, const ModelConfig& mc, const ModelWeights& w,
                 Backend& backend, int n_threads, const DraftPlan& draft) {
    budget.sample_system();
    const BackendMemory bm = backend.memory();
    DeviceMemoryInfo dev;
    dev.unified = bm.unified;
    dev.total = bm.device_total;
    dev.free = bm.device_free;
    budget.set_device(dev);
    const bool mapped = bm.weights_bytes == 0;
    budget.set_model(static_cast<int64_t>(w.total_bytes), mapped);
    // Logits: a step's, and speculative decoding's verification rows.
    const int64_t rows = 1 + (cfg.spec != SpecMode::Off ? cfg.draft_max + 1 : 0);
    budget.set_runtime_pending(rows * mc.n_vocab * static_cast<int64_t>(sizeof(float)) + bm.context_estimate);
    if (cfg.cache_ram_mb > 0) budget.set_sessions(cfg.cache_ram_mb * MIB);

    const int64_t model_ctx = std::max<int64_t>(1, mc.n_ctx_train);
    const int limit = cfg.n_ctx > 0 ? static_cast<int>(std::min<int64_t>(model_ctx, 1 << 24))
                                    : static_cast<int>(std::min<int64_t>(model_ctx, 4096));
    const int64_t mm = cpu_matmul_scratch_bytes(w, 512);
    auto kv = [&](int n) { return cpu_kv_pool_bytes(mc, n, cfg.kv_type); };
    auto scratch = [&](int n) { return scratch_pool(mc, w, n, n_threads, mm); };
    if (draft.mc && draft.w) {
        const ModelConfig& dmc = *draft.mc;
        const ModelWeights& dw = *draft.w;
        const int64_t dmm = cpu_matmul_scratch_bytes(dw, 512);
        const KvType t = cfg.kv_type;
        const int64_t held = draft.backend ? draft.backend->memory().weights_bytes : 0;
        budget.set_draft(held > 0 ? held : static_cast<int64_t>(dw.total_bytes), [&dmc, &dw, dmm, t, n_threads](int n) {
            return cpu_kv_pool_bytes(dmc, n, t) + scratch_pool(dmc, dw, n, n_threads, dmm);
        });
    }
    return budget.choose_context(cfg.n_ctx, limit, kv, scratch);
}

MemoryReport finish_memory_plan(MemoryBudget& budget, const EngineConfig& cfg, const Backend& backend, int n_ctx,
                                OomGuard& guard, const Backend* draft) {
    const BackendMemory bm = backend.memory();
    if (draft) {
        const BackendMemory dm = draft->memory();
        budget.set_draft_pools(std::max(budget.planned_draft_pools(), dm.kv_bytes + dm.scratch_bytes));
    }
    const MemoryReport planned = budget.report();
    const int64_t scratch = std::max(bm.scratch_bytes, planned.scratch);
    const int64_t kv = std::max(bm.kv_bytes, planned.kv);
    budget.set_pools(n_ctx, kv, scratch);
    if (cfg.cache_ram_mb < 0) {
        const int64_t half = budget.headroom_after_pools() / 2;
        budget.set_sessions(half >= SESSION_CACHE_AUTO_MIN ? std::min(half, SESSION_CACHE_AUTO_MAX) : 0);
    }
    budget.check_fits();
    const int64_t threshold = cfg.oom_threshold_mb > 0 ? cfg.oom_threshold_mb * MIB
                                                       : std::max<int64_t>(cfg.mem_margin_mb, 0) * MIB / 2;
    guard.configure(cfg.sysfs_root, threshold);
    guard.calibrate();
    MemoryReport r = budget.report();
    r.oom_threshold = guard.threshold();
    r.oom_check_interval_ms = guard.interval_ms();
    r.oom_read_us = guard.read_us();
    return r;
}

}  // namespace jllm
