// memory/memory_budget.cpp — MemoryBudget: every byte accounted before the first allocation.
//
// What the OS has comes from /proc/meminfo MemAvailable (on a unified-memory Jetson it is
// authoritative: the GPU draws from the same DRAM). What this process already holds (RssAnon)
// is part of MemTotal - MemAvailable; it is moved from "OS and others" to our runtime row so
// nothing is counted twice. Weights count in full whether mapped or copied: a mapped GGUF's
// pages may sit in the page cache (and so inside MemAvailable) today, but once the model runs
// they are ours and evicting them would mean re-reading the file every token. Copied weights are
// already allocated when the system is sampled (the engine samples after bind_weights): they are
// out of MemAvailable on a unified board and out of the device's free memory on a discrete one,
// so they are moved out of "OS and others" like RssAnon and not taken from what is left again.
#include <algorithm>
#include <cinttypes>
#include <climits>

#include "memory/memory_budget.h"

#include "core/error.h"

namespace jllm {

namespace {

constexpr int CTX_STEP = 256;  // auto contexts are multiples of this (below the limit)

std::string mb(int64_t b) { return strfmt("%.1f", static_cast<double>(b) / static_cast<double>(MIB)); }

}  // namespace

MemoryBudget::MemoryBudget(BudgetConfig cfg) : cfg_(std::move(cfg)) {}

void MemoryBudget::sample_system() {
    const MemInfo mi = read_meminfo(cfg_.root);
    const ProcessMemory pm = read_process_memory(cfg_.root);
    set_system(mi, pm.rss_anon > 0 ? pm.rss_anon : 0);
}

void MemoryBudget::set_system(const MemInfo& mi, int64_t process_resident) {
    mi_ = mi;
    process_resident_ = std::max<int64_t>(0, process_resident);
}

void MemoryBudget::set_device(const DeviceMemoryInfo& d) { dev_ = d; }

void MemoryBudget::set_model(int64_t bytes, bool mapped) {
    model_ = bytes;
    model_mapped_ = mapped;
}

int64_t MemoryBudget::pool_headroom() const {
    int64_t room = INT64_MAX;
    if (mi_.valid()) {
        // Host DRAM: pending runtime, mapped weights (still inside MemAvailable, as page cache;
        // copied ones are on a discrete device, or already out of MemAvailable on a unified
        // board), the margin.
        const int64_t host_left =
            mi_.available - runtime_pending_ - (model_mapped_ ? weights() : 0) - cfg_.margin - sessions_;
        if (dev_.unified) {
            room = std::min(room, host_left);
        } else if (host_left < 0) {
            room = -1;  // the host side alone does not fit
        }
    }
    if (!dev_.unified && dev_.free >= 0) {
        // Discrete device: the pools live there, with copied weights.
        room = std::min(room, dev_.free - cfg_.margin);  // copied weights are out of free already
    }
    if (cfg_.cap > 0) room = std::min(room, cfg_.cap - runtime() - weights() - sessions_);
    return room;
}

int MemoryBudget::choose_context(int requested, int limit, const std::function<int64_t(int)>& kv_bytes,
                                 const std::function<int64_t(int)>& scratch_bytes) {
    JLLM_ASSERT(limit >= 1);
    n_ctx_limit_ = limit;
    kv_per_pos_ = kv_bytes(1);
    auto pools = [&](int n) { return kv_bytes(n) + scratch_bytes(n) + draft_pools(n); };
    auto largest_fitting = [&]() -> int {
        if (fits(pools(limit))) return limit;
        for (int n = (limit - 1) / CTX_STEP * CTX_STEP; n >= CTX_STEP; n -= CTX_STEP) {
            if (fits(pools(n))) return n;
        }
        return 0;
    };
    const int64_t room = pool_headroom();
    auto where = [&]() {
        std::string s;
        if (cfg_.cap > 0 && room == cfg_.cap - runtime() - weights() - sessions_) {
            s = strfmt("the --max-memory cap of %s MB leaves %s MB after the model (%s MB) and runtime (%s MB)",
                       mb(cfg_.cap).c_str(), mb(std::max<int64_t>(room, 0)).c_str(), mb(weights()).c_str(),
                       mb(runtime()).c_str());
        } else if (!dev_.unified && dev_.free >= 0 && room == dev_.free - cfg_.margin) {
            s = strfmt("the device has %s MB free after the weights; after the %s MB margin %s MB are left",
                       mb(dev_.free).c_str(), mb(cfg_.margin).c_str(), mb(std::max<int64_t>(room, 0)).c_str());
        } else if (model_mapped_) {
            s = strfmt("MemAvailable is %s MB; after the model (%s MB), runtime (%s MB) and the %s MB margin "
                       "%s MB are left",
                       mb(mi_.available).c_str(), mb(weights()).c_str(), mb(runtime_pending_).c_str(),
                       mb(cfg_.margin).c_str(), mb(std::max<int64_t>(room, 0)).c_str());
        } else {
            s = strfmt("MemAvailable is %s MB with the model's %s MB copied; after runtime (%s MB) and the %s MB "
                       "margin %s MB are left",
                       mb(mi_.available).c_str(), mb(weights()).c_str(), mb(runtime_pending_).c_str(),
                       mb(cfg_.margin).c_str(), mb(std::max<int64_t>(room, 0)).c_str());
        }
        if (sessions_ > 0) s += strfmt(" (the --cache-ram session cache holds %s MB of it)", mb(sessions_).c_str());
        if (draft_weights_ > 0) s += strfmt(" (the model's weights include the draft model's %s MB)", mb(draft_weights_).c_str());
        return s;
    };

    int n = 0;
    if (requested > 0) {
        if (requested > limit) {
            throw JllmError(strfmt("context %d exceeds the limit %d (the model's context, capped at 4096)", requested,
                                   limit));
        }
        if (!fits(pools(requested))) {
            const int best = largest_fitting();
            throw JllmError(strfmt(
                "context %d does not fit: it needs %s MB (KV %s MB + scratch %s MB%s) but %s. Hint: %s; or an "
                "INT8 KV cache, a smaller --mem-margin, a larger --max-memory, or stop another service",
                requested, mb(pools(requested)).c_str(), mb(kv_bytes(requested)).c_str(),
                mb(scratch_bytes(requested)).c_str(),
                draft_pools_fn_ ? strfmt(" + the draft model's KV and scratch %s MB", mb(draft_pools(requested)).c_str()).c_str() : "",
                where().c_str(),
                best > 0 ? strfmt("-c %d (or -c 0) fits", best).c_str() : "no context of 256 or more fits"));
        }
        n = requested;
    } else {
        n = largest_fitting();
        if (n == 0) {
            const int smallest = std::min(limit, CTX_STEP);
            throw JllmError(strfmt("not even a %d-token context fits: it needs %s MB but %s. Hint: a smaller model "
                                   "or quantization, a smaller --mem-margin, a larger --max-memory, or stop another "
                                   "service",
                                   smallest, mb(pools(smallest)).c_str(), where().c_str()));
        }
    }
    set_pools(n, kv_bytes(n), scratch_bytes(n));
    draft_pools_ = draft_pools(n);
    return n;
}

void MemoryBudget::set_pools(int n_ctx, int64_t kv, int64_t scratch) {
    n_ctx_ = n_ctx;
    kv_ = kv;
    scratch_ = scratch;
}

void MemoryBudget::check_fits() const {
    if (!fits(kv_ + scratch_ + draft_pools_)) {
        throw JllmError(strfmt("the allocated pools (KV %s MB + scratch %s MB + draft model %s MB) exceed the budget "
                               "(%s MB left)",
                               mb(kv_).c_str(), mb(scratch_).c_str(), mb(draft_pools_).c_str(),
                               mb(std::max<int64_t>(pool_headroom(), 0)).c_str()));
    }
}

MemoryReport MemoryBudget::report() const {
    MemoryReport r;
    r.known = mi_.valid();
    r.unified = dev_.unified;
    r.runtime = runtime();
    r.model = model_;
    r.model_mapped = model_mapped_;
    r.kv = kv_;
    r.scratch = scratch_;
    r.sessions = sessions_;
    r.draft = draft_weights_ + draft_pools_;
    r.margin = cfg_.margin;
    r.cap = cfg_.cap;
    r.cma_total = mi_.cma_total;
    r.cma_free = mi_.cma_free;
    r.available_at_load = mi_.available;
    r.device_total = dev_.total;
    r.device_free = dev_.free;
    r.n_ctx = n_ctx_;
    r.n_ctx_limit = n_ctx_limit_;
    // Average over the chosen context (per-position bytes of a 1-position pool include alignment).
    r.kv_bytes_per_pos = n_ctx_ > 0 ? kv_ / n_ctx_ : kv_per_pos_;
    if (r.known) {
        r.total = mi_.total;
        // Copied weights on a unified board are ours, already out of MemAvailable.
        const int64_t held = dev_.unified && !model_mapped_ ? weights() : 0;
        r.os_and_others = std::max<int64_t>(0, mi_.total - mi_.available - process_resident_ - held);
        r.free = r.total - r.os_and_others - r.ours() - r.margin;
    } else {
        r.total = r.ours() + r.margin;
        r.free = 0;
    }
    return r;
}

std::string MemoryReport::table() const {
    std::string t;
    auto row = [&](const char* name, int64_t b, const std::string& note) {
        t += strfmt("  %-14s %10s MB%s%s\n", name, mb(b).c_str(), note.empty() ? "" : "  ", note.c_str());
    };
    t += strfmt("Memory budget (%s):\n", unified ? "unified DRAM" : "host + device");
    if (known) {
        row("total", total, "MemTotal");
        row("OS and others", os_and_others, strfmt("MemAvailable at load %s MB", mb(available_at_load).c_str()));
        if (cma_total >= 0) {
            t += strfmt("  %-14s %10s MB  inside total; %s MB free\n", "CMA", mb(cma_total).c_str(),
                        mb(std::max<int64_t>(cma_free, 0)).c_str());
        }
    } else {
        t += "  total             unknown  (/proc/meminfo not readable)\n";
    }
    if (!unified && device_total >= 0) {
        t += strfmt("  %-14s %10s MB  %s MB free at load\n", "device", mb(device_total).c_str(), mb(device_free).c_str());
    }
    row("runtime", runtime, "heap at load + logits + backend context");
    row("model", model, model_mapped ? "weights, mapped in place" : "weights, copied");
    row("KV", kv, strfmt("%d positions x %s KB", n_ctx, strfmt("%.1f", kv_bytes_per_pos / 1024.0).c_str()));
    row("scratch", scratch, "activations and temporaries");
    if (sessions > 0) row("sessions", sessions, "session snapshots in RAM at most (--cache-ram)");
    if (draft > 0) row("draft model", draft, "speculative decoding's draft: weights, KV and scratch");
    row("margin", margin, "--mem-margin");
    if (known) row("free", free, "");
    if (cap > 0) row("cap", cap, strfmt("--max-memory; engine holds %s MB", mb(ours()).c_str()));
    if (oom_threshold > 0) {
        t += strfmt("OOM guard: generation stops below %s MB MemAvailable; checked every %.0f ms (one read %.1f us)\n",
                    mb(oom_threshold).c_str(), oom_check_interval_ms, oom_read_us);
    }
    return t;
}

}  // namespace jllm
