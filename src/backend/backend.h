// backend/backend.h — the one Backend interface (DESIGN.md "Contracts"): forward a batch of
// tokens into a KV cache the backend owns. CPU and CUDA implement it; the engine picks one at run
// time. Nothing here includes a CUDA header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "jllm_engine.h"

namespace jllm {

struct ModelConfig;
struct ModelWeights;

enum class LogitsMode { Last, All, None };

// Canonical (exchange) KV layout for snapshots and persistence: per layer, K then V, each
// [n_pos][n_head_kv][head_dim]; INT8 adds one FP16 scale per (pos, kv head) after each of K and V.
struct KvBlob {
    KvType type = KvType::Int8;
    int n_pos = 0;
    std::vector<uint8_t> bytes;
};

struct BackendMemory {
    bool unified = true;            // device memory is host memory (CPU, Jetson)
    int64_t device_total = -1;      // bytes, -1 unknown
    int64_t device_free = -1;
    int64_t weights_bytes = 0;      // bytes this backend holds for weights (0 if read in place)
    int64_t kv_bytes = 0;
    int64_t scratch_bytes = 0;
    // Device bytes this backend has taken since its context existed (CUDA: free memory measured
    // after context creation minus free memory now; the context itself excluded). -1 unknown.
    int64_t device_used = -1;
};

class Backend {
public:
    virtual ~Backend() = default;
    virtual const char* name() const = 0;           // "cpu" / "cuda"
    virtual std::string device_description() const = 0;

    // Binds weights (read in place or copied per `placement`). Called once.
    virtual void bind_weights(const ModelWeights& weights, WeightPlacement placement) = 0;
    // Allocates the KV cache and scratch for `n_ctx` positions and batches up to `n_batch`.
    virtual void allocate(int n_ctx, int n_batch, KvType kv_type) = 0;
    static int64_t kv_bytes_for(const ModelConfig& c, int n_ctx, KvType t);

    // Runs `n_tokens` tokens at positions pos0.. (pos0 + n_tokens <= n_ctx; n_tokens <= n_batch),
    // writing their K/V. Logits: Last -> [n_vocab] of the last token, All -> [n_tokens, n_vocab].
    virtual void forward(const int32_t* tokens, int n_tokens, int pos0, LogitsMode mode, float* logits) = 0;
    // A hint: the caller will pass [p, p + bytes) (or part of it) as forward()'s `logits` and keeps
    // it valid while this backend lives. A backend whose logits cross from a device may pin it
    // for faster copies (CUDA: page-locked, ~4x faster than a pageable copy of 600 KB); the CPU
    // backend ignores it. Pinning may fail on some platforms; the copies then stay pageable.
    virtual void pin_host_buffer(void* p, size_t bytes) {
        (void)p;
        (void)bytes;
    }

    // Called once after allocate(): a backend may run what a first request runs once (module
    // loads, graph captures) as throwaway forwards at the first positions, whose K/V it leaves
    // invalid (the caller holds no positions yet), so the first request does not pay for them.
    // top_k: the sampling's default (a backend that samples on its device prepares that path).
    virtual void warm_up(int top_k) { (void)top_k; }

    // Positions >= n_pos are no longer valid.
    virtual void truncate_kv(int n_pos) = 0;
    virtual void read_kv(int pos0, int n_pos, KvBlob& out) const = 0;
    virtual void write_kv(int pos0, const KvBlob& in) = 0;

    virtual BackendMemory memory() const = 0;
};

std::unique_ptr<Backend> create_cpu_backend(const ModelConfig& config, int n_threads);

}  // namespace jllm
