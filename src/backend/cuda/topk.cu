// backend/cuda/topk.cu — the k largest values of x, best first: rounds of blocks that each keep
// their slice's k best by radix selection over 32-bit order keys in shared memory, until one
// block holds every candidate and sorts them (cuda_ops.h launch_topk).
#include <cstddef>
#include <cstdint>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"
#include "core/error.h"

namespace jllm {
namespace cuda {

namespace {

constexpr int TOPK_THREADS = 1024;
constexpr int TOPK_BINS = 2048;  // the widest digit: 11 bits

// A value's order as an unsigned key: larger value, larger key. NaN counts as -inf, -0 as +0 (the
// reference compares them equal, so they tie and go by index).
__device__ __forceinline__ float topk_value(float v) { return v != v ? -INFINITY : v; }
__device__ __forceinline__ uint32_t topk_key(float v) {
    v = topk_value(v);
    const uint32_t u = __float_as_uint(v == 0.0f ? 0.0f : v);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// (va, ia) goes before (vb, ib): larger value, then lower id.
__device__ __forceinline__ bool topk_before(float va, int32_t ia, float vb, int32_t ib) {
    return va > vb || (va == vb && ia < ib);
}

// Exclusive prefix sum of v over the block's threads (in thread order). Every thread calls it;
// `warp_sums` holds WARP values.
__device__ uint32_t block_exclusive_scan(uint32_t v, uint32_t* warp_sums) {
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    uint32_t inc = v;
    for (int d = 1; d < WARP; d <<= 1) {
        const uint32_t o = __shfl_up_sync(0xffffffffu, inc, d);
        if (lane >= d) inc += o;
    }
    if (lane == WARP - 1) warp_sums[warp] = inc;
    __syncthreads();
    if (warp == 0) {
        uint32_t w = lane < TOPK_THREADS / WARP ? warp_sums[lane] : 0;
        for (int d = 1; d < WARP; d <<= 1) {
            const uint32_t o = __shfl_up_sync(0xffffffffu, w, d);
            if (lane >= d) w += o;
        }
        warp_sums[lane] = w;  // inclusive over warps
    }
    __syncthreads();
    const uint32_t before = (warp > 0 ? warp_sums[warp - 1] : 0) + inc - v;
    __syncthreads();  // warp_sums is reused by the next call
    return before;
}

// The value of a key (topk_key's inverse; NaN came in as -inf, -0 as +0).
__device__ __forceinline__ float topk_key_value(uint32_t key) {
    return __uint_as_float((key & 0x80000000u) ? (key & 0x7FFFFFFFu) : ~key);
}

constexpr int TOPK_SLICE = 8192;  // values per block, as keys in shared memory
constexpr int TOPK_PER_THREAD = TOPK_SLICE / TOPK_THREADS;  // consecutive keys of a thread
constexpr uint32_t TOPK_KEY_PAD = 0;  // below every value's key (-inf's is 0x007FFFFF)
static_assert(TOPK_PER_THREAD == 8, "a thread's keys are two 16-byte words");

// Block b takes x[b * TOPK_SLICE, ...) (ids from x_ids, or the positions) and writes its k best
// (at most k of the slice's values; the rest (-inf, INT32_MAX)) to out[b * k ...] in slice order,
// or, with `sorted`, best first. The k-th largest key T is found by radix selection over the keys in
// shared memory: three counting passes (bits 31-21, 20-10, 9-0), each over the keys that share the
// digits chosen so far, each choosing the digit that holds the k-th. The block then keeps every
// key above T and, in slice order, the first keys equal to T that make up k. Slice order is index
// order in every round (a block's output keeps it, and blocks are in index order), so ties go to
// the lower index as the reference's do.
__global__ void __launch_bounds__(TOPK_THREADS)
    kernel_topk_select(const float* __restrict__ x, const int32_t* __restrict__ x_ids, int64_t m, int k, bool sorted,
                       float* __restrict__ out_v, int32_t* __restrict__ out_i) {
    __shared__ __align__(16) uint32_t keys[TOPK_SLICE];
    __shared__ uint32_t hist[TOPK_BINS];
    __shared__ uint32_t warp_sums[WARP];
    __shared__ uint32_t chosen[2];  // the digit, and how many keys sharing the prefix lie above it
    __shared__ float cv[TOPK_MAX];
    __shared__ int32_t ci[TOPK_MAX];
    const int tid = threadIdx.x;
    const int64_t first = static_cast<int64_t>(blockIdx.x) * TOPK_SLICE;
    const int len = static_cast<int>(min(static_cast<int64_t>(TOPK_SLICE), m - first));
    const bool vec = (reinterpret_cast<uintptr_t>(x + first) & 15) == 0;
    for (int q = tid; q < TOPK_SLICE / 4; q += TOPK_THREADS) {
        const int i = 4 * q;
        float v[4];
        if (vec && i + 4 <= len) {
            const float4 f = *reinterpret_cast<const float4*>(x + first + i);
            v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
        } else {
            for (int j = 0; j < 4; ++j) v[j] = i + j < len ? x[first + i + j] : 0.0f;
        }
        uint4 w;
        w.x = i < len ? topk_key(v[0]) : TOPK_KEY_PAD;
        w.y = i + 1 < len ? topk_key(v[1]) : TOPK_KEY_PAD;
        w.z = i + 2 < len ? topk_key(v[2]) : TOPK_KEY_PAD;
        w.w = i + 3 < len ? topk_key(v[3]) : TOPK_KEY_PAD;
        *reinterpret_cast<uint4*>(&keys[i]) = w;
    }
    __syncthreads();
    // This thread's keys: [TOPK_PER_THREAD * tid, + TOPK_PER_THREAD).
    uint32_t mine[TOPK_PER_THREAD];
    {
        const uint4 a = *reinterpret_cast<const uint4*>(&keys[TOPK_PER_THREAD * tid]);
        const uint4 b = *reinterpret_cast<const uint4*>(&keys[TOPK_PER_THREAD * tid + 4]);
        mine[0] = a.x, mine[1] = a.y, mine[2] = a.z, mine[3] = a.w;
        mine[4] = b.x, mine[5] = b.y, mine[6] = b.z, mine[7] = b.w;
    }
    const int kb = min(k, len);  // this block's count of real values
    uint32_t prefix = 0, prefix_mask = 0;  // the key bits fixed so far
    uint32_t need = static_cast<uint32_t>(kb);  // of the keys sharing the prefix, how many to take
#pragma unroll 1
    for (int pass = 0; pass < 3; ++pass) {
        for (int d = tid; d < TOPK_BINS; d += TOPK_THREADS) hist[d] = 0;
        __syncthreads();
        const int sh = pass == 0 ? 21 : pass == 1 ? 10 : 0;
        const uint32_t dmask = pass == 2 ? 0x3FFu : 0x7FFu;
#pragma unroll
        for (int j = 0; j < TOPK_PER_THREAD; ++j) {
            if (TOPK_PER_THREAD * tid + j < len && (mine[j] & prefix_mask) == prefix) {
                atomicAdd(&hist[(mine[j] >> sh) & dmask], 1u);
            }
        }
        __syncthreads();
        // Thread t looks at digits TOPK_BINS-1-2t and TOPK_BINS-2-2t: counts from the top down.
        const int d0 = TOPK_BINS - 1 - 2 * tid;
        const uint32_t h0 = hist[d0], h1 = hist[d0 - 1];
        const uint32_t above = block_exclusive_scan(h0 + h1, warp_sums);
        if (above < need && above + h0 >= need) {
            chosen[0] = static_cast<uint32_t>(d0);
            chosen[1] = above;
        } else if (above + h0 < need && above + h0 + h1 >= need) {
            chosen[0] = static_cast<uint32_t>(d0 - 1);
            chosen[1] = above + h0;
        }
        __syncthreads();
        prefix |= chosen[0] << sh;
        prefix_mask |= dmask << sh;
        need -= chosen[1];
        __syncthreads();
    }
    // prefix is now the kb-th largest key T: kb - need keys lie above it, and the first `need` keys
    // equal to T complete the kb. Keep them in slice order.
    const uint32_t T = prefix;
    uint32_t n_eq = 0;
#pragma unroll
    for (int j = 0; j < TOPK_PER_THREAD; ++j) n_eq += (TOPK_PER_THREAD * tid + j < len && mine[j] == T) ? 1u : 0u;
    uint32_t eq_rank = block_exclusive_scan(n_eq, warp_sums);
    uint32_t keep = 0;
    bool take[TOPK_PER_THREAD];
#pragma unroll
    for (int j = 0; j < TOPK_PER_THREAD; ++j) {
        const bool real = TOPK_PER_THREAD * tid + j < len;
        bool t = real && mine[j] > T;
        if (real && mine[j] == T) t = eq_rank++ < need;
        take[j] = t;
        keep += t ? 1u : 0u;
    }
    uint32_t slot = block_exclusive_scan(keep, warp_sums);  // the block keeps kb in all
#pragma unroll
    for (int j = 0; j < TOPK_PER_THREAD; ++j) {
        if (!take[j]) continue;
        const int i = TOPK_PER_THREAD * tid + j;
        const float v = topk_key_value(mine[j]);
        const int32_t id = x_ids ? x_ids[first + i] : static_cast<int32_t>(first + i);
        if (sorted) {
            cv[slot] = v;
            ci[slot] = id;
        } else {
            out_v[static_cast<int64_t>(blockIdx.x) * k + slot] = v;
            out_i[static_cast<int64_t>(blockIdx.x) * k + slot] = id;
        }
        ++slot;
    }
    if (!sorted) {
        for (int r = kb + tid; r < k; r += TOPK_THREADS) {
            out_v[static_cast<int64_t>(blockIdx.x) * k + r] = -INFINITY;
            out_i[static_cast<int64_t>(blockIdx.x) * k + r] = INT32_MAX;
        }
        return;
    }
    // Sort the k by (value descending, index ascending); padding (-inf, INT32_MAX) sorts last.
    int size = 1;
    while (size < k) size <<= 1;
    for (int i = kb + tid; i < size; i += TOPK_THREADS) {
        cv[i] = -INFINITY;
        ci[i] = INT32_MAX;
    }
    __syncthreads();
    for (int k2 = 2; k2 <= size; k2 <<= 1) {
        for (int j = k2 >> 1; j > 0; j >>= 1) {
            const int i = tid;
            const int p = i ^ j;
            if (i < size && p > i) {
                const float a = cv[i], b = cv[p];
                const int32_t ia = ci[i], ib = ci[p];
                // Ascending runs (i & k2 == 0) hold "before" order; the others the reverse.
                if (topk_before(b, ib, a, ia) == ((i & k2) == 0)) {
                    cv[i] = b;
                    cv[p] = a;
                    ci[i] = ib;
                    ci[p] = ia;
                }
            }
            __syncthreads();
        }
    }
    if (tid < k) {
        out_v[tid] = cv[tid];
        out_i[tid] = ci[tid];
    }
}

}  // namespace

size_t topk_work_floats(int64_t n, int k) {
    const int64_t blocks = (n + TOPK_SLICE - 1) / TOPK_SLICE;
    return static_cast<size_t>(4 * blocks * k);  // two rounds' values and ids (int32 in float slots)
}

void launch_topk(const float* x, int64_t n, int k, float* work, float* vals, int32_t* ids, void* stream) {
    JLLM_ASSERT(n >= 1 && k >= 1 && k <= TOPK_MAX && k <= n && n < INT32_MAX);
    static_assert(TOPK_MAX <= TOPK_SLICE / 2, "a round must shrink the candidates");
    static_assert(TOPK_MAX <= TOPK_THREADS, "a thread per candidate in the sort");
    // Rounds: each block keeps the k best of its slice, until one block holds every candidate
    // (two rounds up to 8,192 x 64 values at k 128: 19 blocks, then one, for 151,936).
    const int64_t cap = (n + TOPK_SLICE - 1) / TOPK_SLICE * k;
    float* buf_v[2] = {work, work + 2 * cap};
    const float* src = x;
    const int32_t* src_ids = nullptr;
    int64_t m = n;
    for (int round = 0;; ++round) {
        const int64_t blocks = (m + TOPK_SLICE - 1) / TOPK_SLICE;
        const bool last = blocks == 1;
        float* ov = last ? vals : buf_v[round % 2];
        int32_t* oi = last ? ids : reinterpret_cast<int32_t*>(buf_v[round % 2] + cap);
        kernel_topk_select<<<static_cast<unsigned>(blocks), TOPK_THREADS, 0, as_stream(stream)>>>(src, src_ids, m, k,
                                                                                                    last, ov, oi);
        JLLM_CUDA_LAUNCH_CHECK("kernel_topk_select");
        if (last) break;
        src = ov;
        src_ids = oi;
        m = blocks * k;
    }
}

}  // namespace cuda
}  // namespace jllm
