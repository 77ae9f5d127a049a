// server/metrics.cpp — accumulation and Prometheus text rendering.
#include "server/metrics.h"

#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <sstream>

namespace jllm::server {

void Metrics::count_request(const std::string& endpoint, int status) {
    std::lock_guard<std::mutex> lk(mu_);
    requests_[{endpoint, status}]++;
}

void Metrics::count_generation(const GenerateStats& st, const char* finish) {
    std::lock_guard<std::mutex> lk(mu_);
    finishes_[finish]++;
    prompt_tokens_ += static_cast<uint64_t>(st.prompt_tokens);
    cached_tokens_ += static_cast<uint64_t>(st.reused_tokens);
    completion_tokens_ += static_cast<uint64_t>(st.completion_tokens);
    reasoning_tokens_ += static_cast<uint64_t>(st.reasoning_tokens);
    prefilled_tokens_ += static_cast<uint64_t>(st.prompt_tokens - st.reused_tokens);
    prefill_s_ += st.prefill_ms / 1000.0;
    if (st.completion_tokens > 1) {
        decoded_tokens_ += static_cast<uint64_t>(st.completion_tokens - 1);
        decode_s_ += st.decode_ms / 1000.0;
    }
    if (st.completion_tokens > 0) {
        ttft_s_ += st.ttft_ms / 1000.0;
        ttft_count_++;
    }
    ngram_drafted_ += static_cast<uint64_t>(st.ngram_drafted);
    ngram_accepted_ += static_cast<uint64_t>(st.ngram_accepted);
    model_drafted_ += static_cast<uint64_t>(st.model_drafted);
    model_accepted_ += static_cast<uint64_t>(st.model_accepted);
    decode_forwards_ += static_cast<uint64_t>(st.decode_forwards);
    if (st.prefill_tps > 0) last_prefill_tps_ = st.prefill_tps;
    if (st.decode_tps > 0) last_decode_tps_ = st.decode_tps;
}

namespace {

void family(std::ostringstream& o, const char* name, const char* type, const char* help) {
    o << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
}

template <typename T>
void sample(std::ostringstream& o, const char* name, T value) {
    o << name << ' ' << value << '\n';
}

// One metric with a single sample: its # HELP / # TYPE lines, then `name value`.
template <typename T>
void metric(std::ostringstream& o, const char* name, const char* type, const char* help, T value) {
    family(o, name, type, help);
    sample(o, name, value);
}

}  // namespace

std::string Metrics::render(const GaugeSnapshot& g) const {
    std::ostringstream o;
    o.precision(10);
    std::lock_guard<std::mutex> lk(mu_);
    family(o, "jllm_requests_total", "counter", "HTTP requests answered, by endpoint and status code.");
    for (const auto& [key, n] : requests_) {
        o << "jllm_requests_total{endpoint=\"" << key.first << "\",status=\"" << key.second << "\"} " << n << '\n';
    }
    family(o, "jllm_generations_total", "counter", "Generations run, by finish reason (cancelled: client gone).");
    for (const auto& [k, n] : finishes_) o << "jllm_generations_total{finish=\"" << k << "\"} " << n << '\n';
    metric(o, "jllm_client_disconnects_total", "counter", "Requests whose client went away before the answer.", disconnects_.load());
    metric(o, "jllm_request_timeouts_total", "counter", "Requests stopped by --timeout.", timeouts_.load());
    metric(o, "jllm_prompt_tokens_total", "counter", "Prompt tokens of all generations.", prompt_tokens_);
    metric(o, "jllm_cached_tokens_total", "counter", "Prompt tokens reused (resident prefix or session snapshot; not prefilled).", cached_tokens_);
    metric(o, "jllm_completion_tokens_total", "counter", "Generated tokens.", completion_tokens_);
    metric(o, "jllm_reasoning_tokens_total", "counter", "Generated tokens in the reasoning channel.", reasoning_tokens_);
    family(o, "jllm_draft_tokens_total", "counter", "Speculative decoding: tokens drafted, by drafter.");
    o << "jllm_draft_tokens_total{drafter=\"ngram\"} " << ngram_drafted_ << '\n';
    o << "jllm_draft_tokens_total{drafter=\"model\"} " << model_drafted_ << '\n';
    family(o, "jllm_draft_accepted_tokens_total", "counter", "Speculative decoding: drafted tokens the model accepted, by drafter.");
    o << "jllm_draft_accepted_tokens_total{drafter=\"ngram\"} " << ngram_accepted_ << '\n';
    o << "jllm_draft_accepted_tokens_total{drafter=\"model\"} " << model_accepted_ << '\n';
    metric(o, "jllm_decode_forwards_total", "counter", "Forward passes of the decode (one per verified draft or plain step).", decode_forwards_);
    metric(o, "jllm_prefill_seconds_total", "counter", "Time spent in prefill.", prefill_s_);
    metric(o, "jllm_decode_seconds_total", "counter", "Time spent decoding after the first token.", decode_s_);
    metric(o, "jllm_prefill_tokens_per_second", "gauge", "Prefill rate over all generations.", prefill_s_ > 0 ? prefilled_tokens_ / prefill_s_ : 0.0);
    metric(o, "jllm_decode_tokens_per_second", "gauge", "Decode rate over all generations.", decode_s_ > 0 ? decoded_tokens_ / decode_s_ : 0.0);
    metric(o, "jllm_last_prefill_tokens_per_second", "gauge", "Prefill rate of the last generation.", last_prefill_tps_);
    metric(o, "jllm_last_decode_tokens_per_second", "gauge", "Decode rate of the last generation.", last_decode_tps_);
    family(o, "jllm_time_to_first_token_seconds", "summary", "Request start (in the engine) to first token.");
    sample(o, "jllm_time_to_first_token_seconds_sum", ttft_s_);
    sample(o, "jllm_time_to_first_token_seconds_count", ttft_count_);
    metric(o, "jllm_queue_depth", "gauge", "Requests waiting for the engine (not counting the one generating).", g.queue_waiting);
    metric(o, "jllm_queue_capacity", "gauge", "--max-queue.", g.queue_capacity);
    metric(o, "jllm_generating", "gauge", "1 while a generation runs.", g.generating ? 1 : 0);
    metric(o, "jllm_ready", "gauge", "1 once the model is loaded.", g.ready ? 1 : 0);
    metric(o, "jllm_context_size_tokens", "gauge", "Context length (n_ctx).", g.n_ctx);
    metric(o, "jllm_kv_used_tokens", "gauge", "Tokens resident in the KV cache after the last generation.", g.kv_used_tokens);
    metric(o, "jllm_model_weight_bytes", "gauge", "Bytes of model weights.", g.weight_bytes);
    metric(o, "jllm_kv_cache_bytes", "gauge", "Bytes of the KV cache pool.", g.kv_bytes);
    metric(o, "jllm_process_resident_bytes", "gauge", "Resident set size of the server process.", g.rss_bytes);
#if defined(__GLIBC__) && __GLIBC_PREREQ(2, 33)
    // What the allocator has handed out (a leak grows this) beside what it keeps free inside its
    // arenas (fragmentation grows that): RSS alone cannot tell the two apart.
    const struct mallinfo2 mi = mallinfo2();
    metric(o, "jllm_heap_in_use_bytes", "gauge", "Heap bytes allocated and not freed (glibc: uordblks + hblkhd).",
           static_cast<uint64_t>(mi.uordblks + mi.hblkhd));
    metric(o, "jllm_heap_free_bytes", "gauge", "Free bytes the allocator keeps in its arenas (glibc: fordblks).",
           static_cast<uint64_t>(mi.fordblks));
#endif
    const SessionCacheStats& s = g.sessions;
    family(o, "jllm_session_cache_requests_total", "counter",
           "Generations by where their reused prompt tokens came from (none: nothing reused).");
    o << "jllm_session_cache_requests_total{source=\"resident\"} " << s.hits_resident << '\n';
    o << "jllm_session_cache_requests_total{source=\"ram\"} " << s.hits_ram << '\n';
    o << "jllm_session_cache_requests_total{source=\"disk\"} " << s.hits_disk << '\n';
    o << "jllm_session_cache_requests_total{source=\"none\"} " << s.misses << '\n';
    metric(o, "jllm_session_restored_bytes_total", "counter", "KV bytes copied into the cache from session snapshots.", s.bytes_restored);
    metric(o, "jllm_session_snapshots_total", "counter", "Session snapshots taken from the KV cache.", s.snapshots);
    metric(o, "jllm_session_snapshot_bytes_total", "counter", "KV bytes of the session snapshots taken.", s.bytes_snapshotted);
    metric(o, "jllm_session_ram_entries", "gauge", "Session snapshots in host RAM.", s.ram_entries);
    metric(o, "jllm_session_ram_bytes", "gauge", "Bytes of the session snapshots in host RAM.", s.ram_bytes);
    metric(o, "jllm_session_ram_budget_bytes", "gauge", "--cache-ram.", s.ram_budget);
    metric(o, "jllm_session_ram_evictions_total", "counter", "Session snapshots evicted from RAM (least recently used).", s.ram_evictions);
    if (s.disk_enabled) {
        metric(o, "jllm_session_disk_entries", "gauge", "Session files in --kv-dir.", s.disk_entries);
        metric(o, "jllm_session_disk_bytes", "gauge", "Bytes of the session files in --kv-dir.", s.disk_bytes);
        metric(o, "jllm_session_disk_budget_bytes", "gauge", "--kv-dir-max.", s.disk_budget);
        metric(o, "jllm_session_disk_written_total", "counter", "Session files written.", s.disk_written);
        metric(o, "jllm_session_disk_written_bytes_total", "counter", "Bytes of session files written.", s.disk_bytes_written);
        metric(o, "jllm_session_disk_loaded_total", "counter", "Session files read back.", s.disk_loaded);
        metric(o, "jllm_session_disk_loaded_bytes_total", "counter", "KV bytes of session files read back.", s.disk_bytes_loaded);
        metric(o, "jllm_session_disk_evictions_total", "counter", "Session files removed for --kv-dir-max.", s.disk_evictions);
        metric(o, "jllm_session_disk_rejected_total", "counter", "Corrupt or unreadable session files skipped.", s.disk_rejected);
        metric(o, "jllm_session_disk_write_errors_total", "counter", "Session files that could not be written.", s.disk_write_errors);
    }
    return o.str();
}

int64_t process_rss_bytes() {
    FILE* f = std::fopen("/proc/self/statm", "r");
    if (!f) return 0;
    long long size = 0, resident = 0;
    const int n = std::fscanf(f, "%lld %lld", &size, &resident);
    std::fclose(f);
    if (n != 2) return 0;
    return static_cast<int64_t>(resident) * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
}

}  // namespace jllm::server
