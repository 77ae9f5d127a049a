// server/metrics.cpp — accumulation and Prometheus text rendering.
#include "server/metrics.h"

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
    family(o, "jllm_client_disconnects_total", "counter", "Requests whose client went away before the answer.");
    sample(o, "jllm_client_disconnects_total", disconnects_.load());
    family(o, "jllm_request_timeouts_total", "counter", "Requests stopped by --timeout.");
    sample(o, "jllm_request_timeouts_total", timeouts_.load());
    family(o, "jllm_prompt_tokens_total", "counter", "Prompt tokens of all generations.");
    sample(o, "jllm_prompt_tokens_total", prompt_tokens_);
    family(o, "jllm_cached_tokens_total", "counter", "Prompt tokens reused from the resident prefix (not prefilled).");
    sample(o, "jllm_cached_tokens_total", cached_tokens_);
    family(o, "jllm_completion_tokens_total", "counter", "Generated tokens.");
    sample(o, "jllm_completion_tokens_total", completion_tokens_);
    family(o, "jllm_reasoning_tokens_total", "counter", "Generated tokens in the reasoning channel.");
    sample(o, "jllm_reasoning_tokens_total", reasoning_tokens_);
    family(o, "jllm_prefill_seconds_total", "counter", "Time spent in prefill.");
    sample(o, "jllm_prefill_seconds_total", prefill_s_);
    family(o, "jllm_decode_seconds_total", "counter", "Time spent decoding after the first token.");
    sample(o, "jllm_decode_seconds_total", decode_s_);
    family(o, "jllm_prefill_tokens_per_second", "gauge", "Prefill rate over all generations.");
    sample(o, "jllm_prefill_tokens_per_second", prefill_s_ > 0 ? prefilled_tokens_ / prefill_s_ : 0.0);
    family(o, "jllm_decode_tokens_per_second", "gauge", "Decode rate over all generations.");
    sample(o, "jllm_decode_tokens_per_second", decode_s_ > 0 ? decoded_tokens_ / decode_s_ : 0.0);
    family(o, "jllm_last_prefill_tokens_per_second", "gauge", "Prefill rate of the last generation.");
    sample(o, "jllm_last_prefill_tokens_per_second", last_prefill_tps_);
    family(o, "jllm_last_decode_tokens_per_second", "gauge", "Decode rate of the last generation.");
    sample(o, "jllm_last_decode_tokens_per_second", last_decode_tps_);
    family(o, "jllm_time_to_first_token_seconds", "summary", "Request start (in the engine) to first token.");
    sample(o, "jllm_time_to_first_token_seconds_sum", ttft_s_);
    sample(o, "jllm_time_to_first_token_seconds_count", ttft_count_);
    family(o, "jllm_queue_depth", "gauge", "Requests waiting for the engine (not counting the one generating).");
    sample(o, "jllm_queue_depth", g.queue_waiting);
    family(o, "jllm_queue_capacity", "gauge", "--max-queue.");
    sample(o, "jllm_queue_capacity", g.queue_capacity);
    family(o, "jllm_generating", "gauge", "1 while a generation runs.");
    sample(o, "jllm_generating", g.generating ? 1 : 0);
    family(o, "jllm_ready", "gauge", "1 once the model is loaded.");
    sample(o, "jllm_ready", g.ready ? 1 : 0);
    family(o, "jllm_context_size_tokens", "gauge", "Context length (n_ctx).");
    sample(o, "jllm_context_size_tokens", g.n_ctx);
    family(o, "jllm_kv_used_tokens", "gauge", "Tokens resident in the KV cache after the last generation.");
    sample(o, "jllm_kv_used_tokens", g.kv_used_tokens);
    family(o, "jllm_model_weight_bytes", "gauge", "Bytes of model weights.");
    sample(o, "jllm_model_weight_bytes", g.weight_bytes);
    family(o, "jllm_kv_cache_bytes", "gauge", "Bytes of the KV cache pool.");
    sample(o, "jllm_kv_cache_bytes", g.kv_bytes);
    family(o, "jllm_process_resident_bytes", "gauge", "Resident set size of the server process.");
    sample(o, "jllm_process_resident_bytes", g.rss_bytes);
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
