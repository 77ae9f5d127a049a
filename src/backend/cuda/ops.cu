// backend/cuda/ops.cu — the small kernels of the forward pass: RMSNorm, the fused
// bias + Q/K-norm + RoPE + KV-store step, greedy argmax; plus the CUDA error checks and the
// device-memory helpers of cuda_ops.h.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/qkv_post.cuh"
#include "core/error.h"

namespace jllm {
namespace cuda {

// ---------------------------------------------------------------- errors and memory

void throw_cuda_error(cudaError_t e, const char* call, const char* file, int line) {
    throw JllmError(strfmt("cuda: %s failed at %s:%d: %s (%s)", call, file, line, cudaGetErrorName(e),
                           cudaGetErrorString(e)));
}

bool sync_check_enabled() {
    static const bool on = [] {
        const char* v = std::getenv("JLLM_CUDA_SYNC_CHECK");
        return v != nullptr && std::strcmp(v, "0") != 0 && v[0] != '\0';
    }();
    return on;
}

void check_launch(const char* what, const char* file, int line) {
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess && sync_check_enabled()) e = cudaDeviceSynchronize();
    if (e != cudaSuccess) throw_cuda_error(e, what, file, line);
}

int device_count() {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();  // clear the sticky-free error so later calls start clean
        return 0;
    }
    return n;
}

int device_sm_count() {
    int dev = 0;
    JLLM_CUDA_CHECK(cudaGetDevice(&dev));
    static std::mutex mu;
    static std::map<int, int> cache;
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache.find(dev); it != cache.end()) return it->second;
    int sms = 0;
    JLLM_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    return cache[dev] = sms;
}

size_t thread_stack_limit() {
    size_t bytes = 0;
    JLLM_CUDA_CHECK(cudaDeviceGetLimit(&bytes, cudaLimitStackSize));
    return bytes;
}

int64_t device_used_bytes() {
    size_t free_b = 0, total_b = 0;
    JLLM_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    return static_cast<int64_t>(total_b) - static_cast<int64_t>(free_b);
}

size_t fit_thread_stack() {
    constexpr size_t DRIVER_DEFAULT = 1024;
    if (thread_stack_limit() == DRIVER_DEFAULT) {
        JLLM_CUDA_CHECK(cudaDeviceSetLimit(cudaLimitStackSize, THREAD_STACK_BYTES));
    }
    return thread_stack_limit();
}

int resident_blocks(const void* kernel, int threads, size_t smem) {
    int dev = 0;
    JLLM_CUDA_CHECK(cudaGetDevice(&dev));
    static std::mutex mu;
    static std::map<std::tuple<const void*, int, size_t, int>, int> cache;
    std::lock_guard<std::mutex> lock(mu);
    const auto key = std::make_tuple(kernel, threads, smem, dev);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
    int per_sm = 0;
    JLLM_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem));
    return cache[key] = per_sm * device_sm_count();
}

void* dev_alloc(size_t bytes) {
    void* p = nullptr;
    JLLM_CUDA_CHECK(cudaMalloc(&p, bytes == 0 ? 1 : bytes));
    return p;
}
void dev_free(void* p) noexcept {
    // Called from destructors: a failure here is reported by the next checked call.
    if (p) (void)cudaFree(p);
}
void dev_memset(void* p, int byte, size_t bytes) { JLLM_CUDA_CHECK(cudaMemset(p, byte, bytes)); }
void upload(void* dst, const void* src, size_t bytes) {
    JLLM_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}
void download(void* dst, const void* src, size_t bytes) {
    JLLM_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}
void synchronize() { JLLM_CUDA_CHECK(cudaDeviceSynchronize()); }

// ---------------------------------------------------------------- RMSNorm

namespace {

constexpr int NORM_THREADS = 256;

// x, y: [n_rows][n]; w: [n]. One block per row.
__global__ void __launch_bounds__(NORM_THREADS)
    kernel_rmsnorm(const float* x, const float* __restrict__ w, float* y, __half* yh, int64_t n, float eps) {
    __shared__ float red[WARP];
    const float* xr = x + blockIdx.x * n;
    float* yr = y + blockIdx.x * n;
    float ss = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) ss += xr[i] * xr[i];
    ss = block_reduce<false>(ss, red);
    const float scale = 1.0f / sqrtf(ss / static_cast<float>(n) + eps);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const float v = xr[i] * scale * w[i];
        yr[i] = v;
        if (yh != nullptr) yh[blockIdx.x * n + i] = half_sat(v);
    }
}

// The same normalization, then each warp quantizes one 32-value block into xq (act_q8 layout of
// n_rows x n); y (fp32) is written too when not null. Grid (ceil(n / 32 / NORM_Q8_WARPS),
// n_rows): every block sums the squares of its whole row (one round of 16-byte loads; the row is
// a few KB and cached) and quantizes its own blocks, so one token's norm spreads over several SMs
// instead of walking the row in one block.
constexpr int NORM_Q8_WARPS = 8;
constexpr int NORM_Q8_REG = 4;  // float4 loads per thread held in registers (rows up to 4,096 values)
__global__ void __launch_bounds__(NORM_Q8_WARPS * WARP)
    kernel_rmsnorm_q8(const float* x, const float* __restrict__ w, float* y, int8_t* __restrict__ q,
                      float4* __restrict__ s, int64_t n, float eps) {
    __shared__ float red[WARP];
    const int64_t row = blockIdx.y;
    const float* xr = x + row * n;
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    const int64_t nb = n / 32;
    const int64_t b = static_cast<int64_t>(blockIdx.x) * NORM_Q8_WARPS + warp;
    // This warp's block, loaded before the reduction so both loads are in flight together.
    const bool mine = b < nb;
    const float xv = mine ? xr[b * 32 + lane] : 0.0f;
    const float wv = mine ? w[b * 32 + lane] : 0.0f;
    // The row's first NORM_Q8_REG x 1,024 values in registers, every load issued before any is
    // summed (a loop of two or three rounds per thread waited for each load in turn: one round
    // trip each); a longer row's rest by the loop. The same sums in the same order.
    const float4* x4 = reinterpret_cast<const float4*>(xr);
    const int64_t n4 = n / 4;
    constexpr int STRIDE = NORM_Q8_WARPS * WARP;
    float4 vr[NORM_Q8_REG];
#pragma unroll
    for (int k = 0; k < NORM_Q8_REG; ++k) {
        const int64_t i = threadIdx.x + static_cast<int64_t>(k) * STRIDE;
        vr[k] = i < n4 ? x4[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < NORM_Q8_REG; ++k) {
        const float4 v = vr[k];
        if (threadIdx.x + static_cast<int64_t>(k) * STRIDE < n4) ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
    for (int64_t i = threadIdx.x + static_cast<int64_t>(NORM_Q8_REG) * STRIDE; i < n4; i += STRIDE) {
        const float4 v = x4[i];
        ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
    ss = block_reduce<false>(ss, red);
    if (!mine) return;
    const float scale = 1.0f / sqrtf(ss / static_cast<float>(n) + eps);
    const float v = xv * scale * wv;
    if (y) y[row * n + b * 32 + lane] = v;
    quantize_block_warp(v, lane, q + row * n + b * 32, s + row * nb + b);
}

}  // namespace

void launch_rmsnorm_q8(const float* x, const float* w, float* y, void* xq, int n_rows, int64_t n, float eps,
                       void* stream) {
    JLLM_ASSERT(n_rows >= 1 && n >= 32 && n % 32 == 0);
    int8_t* q = static_cast<int8_t*>(xq);
    float4* sc = reinterpret_cast<float4*>(static_cast<uint8_t*>(xq) + act_q8_scales_at(n_rows, n));
    const dim3 grid(static_cast<unsigned>((n / 32 + NORM_Q8_WARPS - 1) / NORM_Q8_WARPS), static_cast<unsigned>(n_rows));
    kernel_rmsnorm_q8<<<grid, NORM_Q8_WARPS * WARP, 0, as_stream(stream)>>>(x, w, y, q, sc, n, eps);
    JLLM_CUDA_LAUNCH_CHECK("kernel_rmsnorm_q8");
}

void launch_rmsnorm(const float* x, const float* w, float* y, uint16_t* yh, int n_rows, int64_t n, float eps,
                    void* stream) {
    JLLM_ASSERT(n_rows >= 1 && n >= 1);
    kernel_rmsnorm<<<n_rows, NORM_THREADS, 0, as_stream(stream)>>>(x, w, y, reinterpret_cast<__half*>(yh), n, eps);
    JLLM_CUDA_LAUNCH_CHECK("kernel_rmsnorm");
}

// ---------------------------------------------------------------- SwiGLU

namespace {

// g, u, y: [n]
__global__ void kernel_swiglu(const float* g, const float* __restrict__ u, float* y, int64_t n) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) y[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

}  // namespace

void launch_swiglu(const float* g, const float* u, float* y, int64_t n, void* stream) {
    JLLM_ASSERT(n >= 1);
    kernel_swiglu<<<static_cast<unsigned>((n + 255) / 256), 256, 0, as_stream(stream)>>>(g, u, y, n);
    JLLM_CUDA_LAUNCH_CHECK("kernel_swiglu");
}

// ---------------------------------------------------------------- bias, Q/K-norm, RoPE, KV store

namespace {

// One warp per (token, head); heads [0, n_head) are Q, then n_head_kv K heads, then n_head_kv
// V heads. The head vector sits in shared memory because RoPE pairs cross lanes. E: values per
// lane (head_dim / 32 rounded up to 2, 4 or 8: no reads or arithmetic for lanes past the head).
template <int E>
__global__ void __launch_bounds__(WARP) kernel_qkv_post(QkvPostParams p) {
    __shared__ float buf[QKV_MAX_HEAD_DIM];
    const int t = blockIdx.x;
    const int hh = blockIdx.y;
    const int lane = threadIdx.x;
    const int hd = p.head_dim;
    int kind;  // 0 q, 1 k, 2 v
    int h;
    if (hh < p.n_head) {
        kind = 0;
        h = hh;
    } else if (hh < p.n_head + p.n_head_kv) {
        kind = 1;
        h = hh - p.n_head;
    } else {
        kind = 2;
        h = hh - p.n_head - p.n_head_kv;
    }
    const QkvHeadSrc src = qkv_head_src(p, kind, h, t, hd);
    const int pos = (p.pos_dev ? *p.pos_dev : p.pos0) + t;
    qkv_post_head<E>(p, src.vec, src.bias, src.nw, kind != 2, pos, lane, buf);
    for (int i = lane; i < hd; i += WARP) src.vec[i] = buf[i];
    if (kind != 0) kv_store_head(p, kind, h, pos, lane, buf);
}

}  // namespace

void launch_qkv_post(const QkvPostParams& p, void* stream) {
    JLLM_ASSERT(p.n_tok >= 1 && p.head_dim >= 2 && p.head_dim <= QKV_MAX_HEAD_DIM && p.head_dim % 2 == 0);
    JLLM_ASSERT(p.n_rot >= 0 && p.n_rot <= p.head_dim && p.n_rot % 2 == 0);
    JLLM_ASSERT(p.n_head_kv >= 1 && p.n_head % p.n_head_kv == 0);
    const dim3 grid(static_cast<unsigned>(p.n_tok), static_cast<unsigned>(p.n_head + 2 * p.n_head_kv));
    if (p.head_dim <= 2 * WARP) kernel_qkv_post<2><<<grid, WARP, 0, as_stream(stream)>>>(p);
    else if (p.head_dim <= 4 * WARP) kernel_qkv_post<4><<<grid, WARP, 0, as_stream(stream)>>>(p);
    else kernel_qkv_post<QKV_MAX_HEAD_DIM / WARP><<<grid, WARP, 0, as_stream(stream)>>>(p);
    JLLM_CUDA_LAUNCH_CHECK("kernel_qkv_post");
}

// ---------------------------------------------------------------- argmax

namespace {

constexpr int ARGMAX_THREADS = 256;

__device__ __forceinline__ bool better(float v, int64_t i, float bv, int64_t bi) {
    return v > bv || (v == bv && i < bi);
}

// Block-wide best (value, index) of `v` over the block; ties to the lower index, NaN never wins.
__device__ void block_best(float& bv, int64_t& bi, float* sv, int64_t* si) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
        const int64_t oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (better(ov, oi, bv, bi)) {
            bv = ov;
            bi = oi;
        }
    }
    const int lane = threadIdx.x % WARP, wid = threadIdx.x / WARP;
    if (lane == 0) {
        sv[wid] = bv;
        si[wid] = bi;
    }
    __syncthreads();
    if (wid == 0) {
        const int nw = blockDim.x / WARP;
        bv = lane < nw ? sv[lane] : -INFINITY;
        bi = lane < nw ? si[lane] : INT64_MAX;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
            const int64_t oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (better(ov, oi, bv, bi)) {
                bv = ov;
                bi = oi;
            }
        }
        if (lane == 0) {
            sv[0] = bv;
            si[0] = bi;
        }
    }
    __syncthreads();
    bv = sv[0];
    bi = si[0];
    __syncthreads();
}

// Order-preserving 64-bit key of (value, index): larger value first, then the lower index; NaN
// below everything (never wins while any number is present).
__device__ __forceinline__ unsigned long long best_key(float v, int64_t i) {
    const uint32_t u = __float_as_uint(v);
    const uint32_t ord = v != v ? 0u : ((u & 0x80000000u) ? ~u : (u | 0x80000000u));
    return (static_cast<unsigned long long>(ord) << 32) | (0xFFFFFFFFull - static_cast<unsigned long long>(i));
}

// x: [n]; out: [1]; work: {best key, blocks done}, zero on entry and left zero. Each block
// takes ARGMAX_PER_BLOCK values (all its loads in flight at once), reduces them, and folds its
// best into work[0] with atomicMax; the last block to finish writes the index and resets work.
constexpr int ARGMAX_PER_THREAD = 16;
constexpr int ARGMAX_PER_BLOCK = ARGMAX_THREADS * ARGMAX_PER_THREAD;
__global__ void __launch_bounds__(ARGMAX_THREADS)
    kernel_argmax(const float* __restrict__ x, int64_t n, unsigned long long* work, int32_t* out) {
    __shared__ float sv[ARGMAX_THREADS / WARP];
    __shared__ int64_t si[ARGMAX_THREADS / WARP];
    const int64_t first = static_cast<int64_t>(blockIdx.x) * ARGMAX_PER_BLOCK + threadIdx.x;
    float v[ARGMAX_PER_THREAD];
#pragma unroll
    for (int j = 0; j < ARGMAX_PER_THREAD; ++j) {
        const int64_t i = first + static_cast<int64_t>(j) * ARGMAX_THREADS;
        v[j] = i < n ? x[i] : -INFINITY;
    }
    float bv = -INFINITY;
    int64_t bi = INT64_MAX;
#pragma unroll
    for (int j = 0; j < ARGMAX_PER_THREAD; ++j) {
        const int64_t i = first + static_cast<int64_t>(j) * ARGMAX_THREADS;
        if (i < n && better(v[j], i, bv, bi)) {
            bv = v[j];
            bi = i;
        }
    }
    block_best(bv, bi, sv, si);
    if (threadIdx.x != 0) return;
    if (bi != INT64_MAX) atomicMax(&work[0], best_key(bv, bi));
    __threadfence();
    const unsigned long long done = atomicAdd(&work[1], 1ull);
    if (done == gridDim.x - 1) {
        const unsigned long long key = atomicExch(&work[0], 0ull);
        atomicExch(&work[1], 0ull);
        *out = key == 0 ? 0 : static_cast<int32_t>(0xFFFFFFFFull - (key & 0xFFFFFFFFull));  // 0: all NaN
    }
}

}  // namespace

size_t argmax_work_bytes() { return 2 * sizeof(unsigned long long); }

void launch_argmax(const float* x, int64_t n, void* work, int32_t* out, void* stream) {
    JLLM_ASSERT(n >= 1 && n < 0xFFFFFFFFll);
    const unsigned blocks = static_cast<unsigned>((n + ARGMAX_PER_BLOCK - 1) / ARGMAX_PER_BLOCK);
    kernel_argmax<<<blocks, ARGMAX_THREADS, 0, as_stream(stream)>>>(x, n, static_cast<unsigned long long*>(work), out);
    JLLM_CUDA_LAUNCH_CHECK("kernel_argmax");
}

// ---------------------------------------------------------------- top-k

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
