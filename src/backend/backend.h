// backend/backend.h — the one Backend interface (DESIGN.md "Contracts"): forward a batch of
// tokens into a KV cache the backend owns, or run one decode step that ends in a token selection
// on the backend's device. CPU and CUDA implement it; backend/backend_registry.h makes one at run
// time. Nothing here includes a CUDA header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jllm_types.h"

namespace jllm {

struct ModelConfig;
struct ModelWeights;

enum class LogitsMode { Last, All, None };

// Bytes a vector does not zero when it grows: a snapshot's buffer is written over at once, and
// zeroing 100 MB first costs as much as the copy.
template <typename T>
struct UninitAllocator : std::allocator<T> {
    template <typename U>
    struct rebind {
        using other = UninitAllocator<U>;
    };
    UninitAllocator() = default;
    template <typename U>
    UninitAllocator(const UninitAllocator<U>&) noexcept {}
    template <typename U>
    void construct(U* p) noexcept {
        ::new (static_cast<void*>(p)) U;
    }
    template <typename U, typename... Args>
    void construct(U* p, Args&&... args) {
        ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
    }
};
using KvBytes = std::vector<uint8_t, UninitAllocator<uint8_t>>;

// Canonical (exchange) KV layout for snapshots and persistence: per layer, K then V, each
// [n_pos][n_head_kv][head_dim]; INT8 adds one FP16 scale per (pos, kv head) after each of K and V.
struct KvBlob {
    KvType type = KvType::Int8;
    int n_pos = 0;
    KvBytes bytes;
};

// Positions [first, first + n_pos) of a canonical blob of n_total positions at `bytes` (the
// whole blob, `size` bytes): what write_kv copies in, without slicing the blob first.
struct KvView {
    KvType type = KvType::Int8;
    const uint8_t* bytes = nullptr;
    size_t size = 0;
    int n_total = 0;
    int first = 0, n_pos = 0;
};
KvView kv_view(const KvBlob& b);                    // every position
KvView kv_view(const KvBlob& b, int from, int to);  // [from, to)

// The canonical layout's parts: a K (or V) row of every KV head at one position, its scales
// (INT8; none for FP16), and one layer's bytes for n_pos positions.
struct KvRowBytes {
    size_t row = 0;        // n_head_kv * head_dim * (1 or 2)
    size_t scale_row = 0;  // n_head_kv * 2 (INT8), 0 (FP16)
    size_t layer(int n_pos) const { return 2 * static_cast<size_t>(n_pos) * (row + scale_row); }
};
KvRowBytes kv_row_bytes(const ModelConfig& c, KvType t);
// write_kv's checks of a blob for positions [pos0, pos0 + in.n_pos) of a cache of n_ctx positions
// and n_layer layers of type t: throws JllmError naming what does not match.
void check_kv_blob(const KvView& in, const ModelConfig& c, KvType t, int pos0, int n_ctx);
inline void check_kv_blob(const KvBlob& in, const ModelConfig& c, KvType t, int pos0, int n_ctx);
// Where part `part` (0 K, 1 K scales, 2 V, 3 V scales) of layer `l` of the view's first position
// is in its bytes.
const uint8_t* kv_view_part(const KvView& in, const KvRowBytes& rb, int64_t l, int part);
// Sizes a blob's bytes for n positions; a large one asks for huge pages first (first-touch page
// faults of 4 KiB pages cost ~0.8 ms per 1 MB where they are slow).
void kv_blob_resize(KvBlob& b, size_t bytes);
// Positions [from, to) of a canonical blob, as a blob of their own.
KvBlob kv_blob_slice(const KvBlob& in, const ModelConfig& c, int from, int to);
// Moves a blob's K by `delta` positions: each K head vector (stored after RoPE) rotated by the
// angles of `delta` (inv_freq: backend/cpu/rope.h rope_inv_freq), INT8 heads dequantized,
// rotated and quantized again with a new scale. V does not depend on the position.
void kv_blob_shift(KvBlob& blob, const ModelConfig& c, const float* inv_freq, int delta);

inline void check_kv_blob(const KvBlob& in, const ModelConfig& c, KvType t, int pos0, int n_ctx) {
    check_kv_blob(kv_view(in), c, t, pos0, n_ctx);
}

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
    // What the backend's runtime costs beyond its pools, an estimate the memory plan budgets
    // before anything is allocated (CUDA: driver, module images, streams; the CPU: none).
    int64_t context_estimate = 0;
};

// Debug hook: when set, the forward pass reports named per-layer activations ("l3.attn",
// [n_tokens][width]) so a CPU/GPU divergence can be pinned to one layer.
using ActivationTap = void (*)(void* ctx, const char* name, const float* data, int64_t n_tokens, int64_t width);

// What a decode step selects instead of returning its logits: the k largest logits, best first,
// ties to the lower id (k = 1: the argmax). The sampler draws from them on the host where that
// is exact for its parameters (engine/sampler.h, Sampler::candidates_suffice).
struct TokenSelection {
    int k = 1;  // 1 .. SELECT_MAX_K
    // Tokens that may be chosen: bit (t % 32) of word t / 32 set for token t, [ceil(n_vocab / 32)]
    // words; the others count as -inf. Null: every token.
    const uint32_t* allowed = nullptr;
    // Or the mask computed while the step runs: called once, after the step's forward pass has
    // been started and before its selection, its result used as `allowed` (the engine advances
    // its grammar on the host while a device computes the logits). Null result: every token.
    const uint32_t* (*mask_fn)(void* ctx) = nullptr;
    void* mask_ctx = nullptr;
    const uint32_t* mask_now() const { return mask_fn ? mask_fn(mask_ctx) : allowed; }
};
constexpr int SELECT_MAX_K = 128;

class Backend {
public:
    virtual ~Backend() = default;
    virtual const char* name() const = 0;           // "cpu" / "cuda": for reports, never for dispatch
    virtual std::string device_description() const = 0;

    // Binds weights (read in place or copied per `placement`). Called once.
    virtual void bind_weights(const ModelWeights& weights, WeightPlacement placement) = 0;
    // Allocates the KV cache and scratch for `n_ctx` positions and batches up to `n_batch`.
    virtual void allocate(int n_ctx, int n_batch, KvType kv_type) = 0;
    static int64_t kv_bytes_for(const ModelConfig& c, int n_ctx, KvType t);

    // Runs `n_tokens` tokens at positions pos0.. (pos0 + n_tokens <= n_ctx; n_tokens <= n_batch),
    // writing their K/V. Logits: Last -> [n_vocab] of the last token, All -> [n_tokens, n_vocab].
    virtual void forward(const int32_t* tokens, int n_tokens, int pos0, LogitsMode mode, float* logits) = 0;
    // The most tokens a forward(.., All, ..) takes whose every logits row is, bit for bit, the row
    // the same tokens give run one at a time. Speculative decoding verifies at most this many, so
    // its greedy output is the plain decode's token for token. Known once the weights are bound.
    virtual int exact_rows() const = 0;

    // One decode step (`token` at `pos`, as forward(&token, 1, pos, Last, ..)) that ends in
    // `sel` on the backend: ids[0..k) and their raw logits vals[0..k), best first. Only the k
    // candidates leave the device. Returns false, having run nothing, where this backend cannot
    // serve `sel`; the caller then runs forward() and samples the logits itself.
    virtual bool forward_select(int32_t token, int pos, const TokenSelection& sel, int32_t* ids, float* vals) = 0;
    // forward(tokens, n_tokens, pos0, ..) ending in `sel` on its last token, as forward_select
    // does for one. Returns false, having run nothing, where this backend cannot serve it (by
    // default: more than one token); the caller then runs forward(.., Last, ..) itself.
    // Either selection may compute the logits only of the 32-token blocks of `sel`'s mask that
    // hold an allowed token (the CPU does): the others count as -inf whatever they are.
    virtual bool forward_select_last(const int32_t* tokens, int n_tokens, int pos0, const TokenSelection& sel,
                                     int32_t* ids, float* vals) {
        return n_tokens == 1 && forward_select(tokens[0], pos0, sel, ids, vals);
    }

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
    // Copies the view's positions in at pos0.. (check_kv_blob's checks; throws JllmError).
    virtual void write_kv_view(int pos0, const KvView& in) = 0;
    void write_kv(int pos0, const KvBlob& in) { write_kv_view(pos0, kv_view(in)); }

    virtual BackendMemory memory() const = 0;

    // The activation tap (null turns it off). A backend whose activations live on a device copies
    // each one to the host and synchronizes, so it is slow.
    virtual void set_tap(ActivationTap tap, void* ctx) = 0;
};

}  // namespace jllm
