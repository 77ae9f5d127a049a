// backend/cuda/ops.cu — the small kernels of the forward pass: RMSNorm, the fused
// bias + Q/K-norm + RoPE + KV-store step, greedy argmax; plus the CUDA error checks and the
// device-memory helpers of cuda_ops.h.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"
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

__device__ float block_sum(float v, float* red /* [32] */) {
    v = warp_sum(v);
    const int lane = threadIdx.x % WARP, wid = threadIdx.x / WARP;
    if (lane == 0) red[wid] = v;
    __syncthreads();
    const int nw = (blockDim.x + WARP - 1) / WARP;
    v = lane < nw ? red[lane] : 0.0f;
    v = warp_sum(v);
    __syncthreads();
    return v;
}

// x, y: [n_rows][n]; w: [n]. One block per row.
__global__ void __launch_bounds__(NORM_THREADS)
    kernel_rmsnorm(const float* x, const float* __restrict__ w, float* y, int64_t n, float eps) {
    __shared__ float red[WARP];
    const float* xr = x + blockIdx.x * n;
    float* yr = y + blockIdx.x * n;
    float ss = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) ss += xr[i] * xr[i];
    ss = block_sum(ss, red);
    const float scale = 1.0f / sqrtf(ss / static_cast<float>(n) + eps);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) yr[i] = xr[i] * scale * w[i];
}

// The same normalization, then each warp quantizes 32-value blocks into xq (act_q8 layout of
// n_rows x n); y (fp32) is written too when not null.
__global__ void __launch_bounds__(NORM_THREADS)
    kernel_rmsnorm_q8(const float* x, const float* __restrict__ w, float* y, int8_t* __restrict__ q,
                      float4* __restrict__ s, int64_t n, float eps) {
    __shared__ float red[WARP];
    const float* xr = x + blockIdx.x * n;
    float ss = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) ss += xr[i] * xr[i];
    ss = block_sum(ss, red);
    const float scale = 1.0f / sqrtf(ss / static_cast<float>(n) + eps);
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    const int64_t nb = n / 32;
    for (int64_t b = warp; b < nb; b += NORM_THREADS / WARP) {
        const int64_t i = b * 32 + lane;
        const float v = xr[i] * scale * w[i];
        if (y) y[blockIdx.x * n + i] = v;
        quantize_block_warp(v, lane, q + blockIdx.x * n + b * 32, s + blockIdx.x * nb + b);
    }
}

}  // namespace

void launch_rmsnorm_q8(const float* x, const float* w, float* y, void* xq, int n_rows, int64_t n, float eps,
                       void* stream) {
    JLLM_ASSERT(n_rows >= 1 && n >= 32 && n % 32 == 0);
    int8_t* q = static_cast<int8_t*>(xq);
    float4* sc = reinterpret_cast<float4*>(static_cast<uint8_t*>(xq) + act_q8_scales_at(n_rows, n));
    kernel_rmsnorm_q8<<<n_rows, NORM_THREADS, 0, as_stream(stream)>>>(x, w, y, q, sc, n, eps);
    JLLM_CUDA_LAUNCH_CHECK("kernel_rmsnorm_q8");
}

void launch_rmsnorm(const float* x, const float* w, float* y, int n_rows, int64_t n, float eps, void* stream) {
    JLLM_ASSERT(n_rows >= 1 && n >= 1);
    kernel_rmsnorm<<<n_rows, NORM_THREADS, 0, as_stream(stream)>>>(x, w, y, n, eps);
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

constexpr int MAX_HEAD_DIM = 256;

// One warp per (token, head); heads [0, n_head) are Q, then n_head_kv K heads, then n_head_kv
// V heads. The head vector sits in shared memory because RoPE pairs cross lanes.
__global__ void __launch_bounds__(WARP) kernel_qkv_post(QkvPostParams p) {
    __shared__ float buf[MAX_HEAD_DIM];
    const int t = blockIdx.x;
    const int hh = blockIdx.y;
    const int lane = threadIdx.x;
    const int hd = p.head_dim;
    const int q_dim = p.n_head * hd, kv_dim = p.n_head_kv * hd;
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
    float* vec = kind == 0 ? p.q + static_cast<int64_t>(t) * q_dim + h * hd
                           : (kind == 1 ? p.k : p.v) + static_cast<int64_t>(t) * kv_dim + h * hd;
    const float* bias = kind == 0 ? p.bq : kind == 1 ? p.bk : p.bv;
    for (int i = lane; i < hd; i += WARP) buf[i] = vec[i] + (bias ? bias[h * hd + i] : 0.0f);
    __syncwarp();
    const float* nw = kind == 0 ? p.q_norm : kind == 1 ? p.k_norm : nullptr;
    if (nw) {
        float ss = 0.0f;
        for (int i = lane; i < hd; i += WARP) ss += buf[i] * buf[i];
        ss = warp_sum(ss);
        const float scale = 1.0f / sqrtf(ss / static_cast<float>(hd) + p.eps);
        for (int i = lane; i < hd; i += WARP) buf[i] = buf[i] * scale * nw[i];
        __syncwarp();
    }
    const int pos = (p.pos_dev ? *p.pos_dev : p.pos0) + t;
    if (kind != 2) {
        const int half = p.n_rot / 2;
        for (int i = lane; i < half; i += WARP) {
            const float theta = static_cast<float>(pos) * p.inv_freq[i];
            const float cs = cosf(theta), sn = sinf(theta);
            const int a = p.neox ? i : 2 * i;
            const int b = p.neox ? i + half : 2 * i + 1;
            const float x0 = buf[a], x1 = buf[b];
            buf[a] = x0 * cs - x1 * sn;
            buf[b] = x0 * sn + x1 * cs;
        }
        __syncwarp();
    }
    for (int i = lane; i < hd; i += WARP) vec[i] = buf[i];
    if (kind == 0) return;
    const int64_t off = (static_cast<int64_t>(pos) * p.n_head_kv + h) * hd;
    if (p.kv_type == KvType::Int8) {
        float amax = 0.0f;
        for (int i = lane; i < hd; i += WARP) amax = fmaxf(amax, fabsf(buf[i]));
        amax = warp_max(amax);
        const uint16_t d16 = f32_to_fp16(amax / 127.0f);
        const float d = fp16_to_f32(d16);
        const float id = d > 0.0f ? 1.0f / d : 0.0f;
        int8_t* dst = static_cast<int8_t*>(kind == 1 ? p.k_cache : p.v_cache) + off;
        for (int i = lane; i < hd; i += WARP) {
            const float v = rintf(buf[i] * id);  // round half to even, as std::nearbyint
            dst[i] = static_cast<int8_t>(fmaxf(-127.0f, fminf(127.0f, v)));
        }
        if (lane == 0) (kind == 1 ? p.k_scale : p.v_scale)[static_cast<int64_t>(pos) * p.n_head_kv + h] = Half{d16};
    } else {
        Half* dst = static_cast<Half*>(kind == 1 ? p.k_cache : p.v_cache) + off;
        for (int i = lane; i < hd; i += WARP) dst[i] = Half{f32_to_fp16(buf[i])};
    }
}

}  // namespace

void launch_qkv_post(const QkvPostParams& p, void* stream) {
    JLLM_ASSERT(p.n_tok >= 1 && p.head_dim >= 2 && p.head_dim <= MAX_HEAD_DIM && p.head_dim % 2 == 0);
    JLLM_ASSERT(p.n_rot >= 0 && p.n_rot <= p.head_dim && p.n_rot % 2 == 0);
    JLLM_ASSERT(p.n_head_kv >= 1 && p.n_head % p.n_head_kv == 0);
    const dim3 grid(static_cast<unsigned>(p.n_tok), static_cast<unsigned>(p.n_head + 2 * p.n_head_kv));
    kernel_qkv_post<<<grid, WARP, 0, as_stream(stream)>>>(p);
    JLLM_CUDA_LAUNCH_CHECK("kernel_qkv_post");
}

// ---------------------------------------------------------------- argmax

namespace {

constexpr int ARGMAX_THREADS = 1024;

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

// x: [n]; out: [1]. One block; ties go to the lowest index; NaNs never win.
__global__ void __launch_bounds__(ARGMAX_THREADS) kernel_argmax(const float* __restrict__ x, int64_t n, int32_t* out) {
    __shared__ float sv[ARGMAX_THREADS / WARP];
    __shared__ int64_t si[ARGMAX_THREADS / WARP];
    float bv = -INFINITY;
    int64_t bi = n;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const float v = x[i];
        if (better(v, i, bv, bi)) {
            bv = v;
            bi = i;
        }
    }
    block_best(bv, bi, sv, si);
    if (threadIdx.x == 0) *out = bi < n ? static_cast<int32_t>(bi) : 0;
}

}  // namespace

void launch_argmax(const float* x, int64_t n, int32_t* out, void* stream) {
    JLLM_ASSERT(n >= 1);
    kernel_argmax<<<1, ARGMAX_THREADS, 0, as_stream(stream)>>>(x, n, out);
    JLLM_CUDA_LAUNCH_CHECK("kernel_argmax");
}

// ---------------------------------------------------------------- top-k

namespace {

constexpr int TOPK_THREADS = 256;
constexpr int TOPK_SLICE = 4096;  // values per first-pass block (in shared memory)

// Pass 1: block b takes x[b * TOPK_SLICE, ...) into shared memory and extracts its k best by k
// rounds of block argmax (the winner is replaced by -inf). Pass 2 (one block) does the same
// over the blocks' candidates. Output sorted best first.
__global__ void __launch_bounds__(TOPK_THREADS)
    kernel_topk_pass(const float* __restrict__ x, const int32_t* __restrict__ x_ids, int64_t n, int64_t slice, int k,
                     float* __restrict__ out_v, int32_t* __restrict__ out_i) {
    extern __shared__ float vals[];  // [slice]
    __shared__ float sv[TOPK_THREADS / WARP];
    __shared__ int64_t si[TOPK_THREADS / WARP];
    const int64_t first = static_cast<int64_t>(blockIdx.x) * slice;
    const int64_t len = min(slice, n - first);
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
        const float v = x[first + i];
        vals[i] = v == v ? v : -INFINITY;  // NaN never wins
    }
    __syncthreads();
    for (int r = 0; r < k; ++r) {
        float bv = -INFINITY;
        int64_t bi = INT64_MAX;
        for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
            const int64_t id = x_ids ? x_ids[first + i] : first + i;
            if (id >= 0 && better(vals[i], id, bv, bi)) {
                bv = vals[i];
                bi = id;
            }
        }
        block_best(bv, bi, sv, si);
        if (threadIdx.x == 0) {
            out_v[static_cast<int64_t>(blockIdx.x) * k + r] = bv;
            out_i[static_cast<int64_t>(blockIdx.x) * k + r] = bi == INT64_MAX ? -1 : static_cast<int32_t>(bi);
        }
        for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
            const int64_t id = x_ids ? x_ids[first + i] : first + i;
            if (id == bi) vals[i] = NAN;  // taken: NaN never wins again (ids are unique)
        }
        __syncthreads();
    }
}

}  // namespace

size_t topk_work_floats(int64_t n, int k) {
    const int64_t blocks = (n + TOPK_SLICE - 1) / TOPK_SLICE;
    return static_cast<size_t>(2 * blocks * k);  // values and ids (as int32 in float slots)
}

void launch_topk(const float* x, int64_t n, int k, float* work, float* vals, int32_t* ids, void* stream) {
    JLLM_ASSERT(n >= 1 && k >= 1 && k <= TOPK_MAX && k <= n);
    const int64_t blocks = (n + TOPK_SLICE - 1) / TOPK_SLICE;
    float* pv = work;
    int32_t* pi = reinterpret_cast<int32_t*>(work + blocks * k);
    kernel_topk_pass<<<static_cast<unsigned>(blocks), TOPK_THREADS, TOPK_SLICE * sizeof(float), as_stream(stream)>>>(
        x, nullptr, n, TOPK_SLICE, k, pv, pi);
    JLLM_CUDA_LAUNCH_CHECK("kernel_topk_pass");
    const int64_t m = blocks * k;  // <= 38 * 128 values for a 151,936 vocabulary
    JLLM_ASSERT(m * static_cast<int64_t>(sizeof(float)) <= 48 * 1024);
    kernel_topk_pass<<<1, TOPK_THREADS, static_cast<size_t>(m) * sizeof(float), as_stream(stream)>>>(pv, pi, m, m, k,
                                                                                                     vals, ids);
    JLLM_CUDA_LAUNCH_CHECK("kernel_topk_pass");
}

}  // namespace cuda
}  // namespace jllm
