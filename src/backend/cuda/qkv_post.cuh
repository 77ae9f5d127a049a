// backend/cuda/qkv_post.cuh — the Q/K/V post of one head by one warp (bias, the per-head RMSNorm
// of Qwen3, RoPE) and the store of a K or V head into the cache, shared by kernel_qkv_post
// (qkv_post.cu) and the decode attention that folds it in (attention_decode.cu): one definition,
// the same bits.
#pragma once

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"

namespace jllm {
namespace cuda {

constexpr int QKV_MAX_HEAD_DIM = 256;

#ifdef __CUDACC__
// Head h of one kind (0 Q, 1 K, 2 V) of token t: its values (post-processed in place by
// kernel_qkv_post), its bias and its RMSNorm weights (null: none; V has no norm). hd: p.head_dim
// (a caller that knows it at compile time passes the constant).
struct QkvHeadSrc {
    float* vec;
    const float* bias;
    const float* nw;
};
__device__ __forceinline__ QkvHeadSrc qkv_head_src(const QkvPostParams& p, int kind, int h, int t, int hd) {
    const int64_t dim = static_cast<int64_t>(kind == 0 ? p.n_head : p.n_head_kv) * hd;
    float* base = kind == 0 ? p.q : (kind == 1 ? p.k : p.v);
    const float* bias = kind == 0 ? p.bq : (kind == 1 ? p.bk : p.bv);
    return {base + t * dim + static_cast<int64_t>(h) * hd, bias ? bias + h * hd : nullptr,
            kind == 0 ? p.q_norm : (kind == 1 ? p.k_norm : nullptr)};
}

// buf[0..hd) <- H buf (hd a power of two): backend/kv_quant.h hadamard_rotate's butterfly stages,
// pair pi of a stage being the host's (pi / len)-th group at offset pi % len, then the one
// multiply by scale: the host's bits. Ends with the warp synchronized.
__device__ __forceinline__ void hadamard_head(float* buf, int hd, float scale, int lane) {
    for (int len = 1; len < hd; len <<= 1) {
        for (int pi = lane; pi < hd / 2; pi += WARP) {
            const int j = ((pi & ~(len - 1)) << 1) | (pi & (len - 1));
            const float a = buf[j], b = buf[j + len];
            buf[j] = __fadd_rn(a, b);
            buf[j + len] = __fsub_rn(a, b);
        }
        __syncwarp();
    }
    for (int i = lane; i < hd; i += WARP) buf[i] = __fmul_rn(buf[i], scale);
    __syncwarp();
}

// The same transform with the head in registers, E values per lane at lane + e * WARP (hd ==
// E * WARP): the stages of len < WARP pair lane with lane ^ len (one shuffle; the lower of the two
// takes a + b, the upper a - b, as the host's x[j], x[j + len]), those of len >= WARP pair the
// lane's own values e and e + len / WARP. Floating-point addition is commutative, so the bits are
// hadamard_head's; no shared-memory round trip per stage on the decode attention's latency chain.
template <int E>
__device__ __forceinline__ void hadamard_head_regs(float* buf, float scale, int lane) {
    float x[E];
#pragma unroll
    for (int e = 0; e < E; ++e) x[e] = buf[lane + e * WARP];
#pragma unroll
    for (int len = 1; len < WARP; len <<= 1) {
        const bool upper = (lane & len) != 0;
#pragma unroll
        for (int e = 0; e < E; ++e) {
            const float o = __shfl_xor_sync(0xffffffffu, x[e], len);
            x[e] = upper ? __fsub_rn(o, x[e]) : __fadd_rn(x[e], o);
        }
    }
#pragma unroll
    for (int s = 1; s < E; s <<= 1) {
#pragma unroll
        for (int e = 0; e < E; ++e) {
            if ((e & s) == 0) {
                const float a = x[e], b = x[e + s];
                x[e] = __fadd_rn(a, b);
                x[e + s] = __fsub_rn(a, b);
            }
        }
    }
#pragma unroll
    for (int e = 0; e < E; ++e) buf[lane + e * WARP] = __fmul_rn(x[e], scale);
    __syncwarp();
}

// One head of `hd` values at `vec` (+ bias; normalized with nw when not null; rotated at `pos`
// when rope, then Walsh-Hadamard rotated when rope and p.k_rot_scale > 0) into buf[0..hd)
// (shared memory). Every global read is issued before any is used
// (one round trip). The warp's lanes all call it; it ends with the warp synchronized. E: values
// per lane, at least hd / 32 (the callers pick it from head_dim: less code and no idle reads;
// the result is the same for any E, the lanes' values past hd being left out of every sum).
template <int E>
__device__ __forceinline__ void qkv_post_head(const QkvPostParams& p, const float* vec, const float* bias,
                                              const float* nw, bool rope, int pos, int lane, float* buf) {
    const int hd = p.head_dim, half = p.n_rot / 2;
    // The reads without branches (a read per value inside `if (i < hd)` made the compiler wait
    // for each value's sum before the next read: one round trip per value): indices clamped into
    // range, an absent bias, norm or frequency table read from `vec` instead, then selected away.
    const float* bsrc = bias ? bias : vec;
    const float* nsrc = nw ? nw : vec;
    const float* fsrc = p.inv_freq ? p.inv_freq : vec;
    float xr[E], br[E], nr[E], fl[E / 2];
#pragma unroll
    for (int e = 0; e < E; ++e) {
        const int i = min(lane + e * WARP, hd - 1);
        xr[e] = vec[i];
        br[e] = bsrc[i];
        nr[e] = nsrc[i];
    }
#pragma unroll
    for (int e = 0; e < E / 2; ++e) fl[e] = fsrc[min(lane + e * WARP, max(half - 1, 0))];
    float xv[E], nv[E], fr[E / 2];
#pragma unroll
    for (int e = 0; e < E; ++e) {
        const bool in = lane + e * WARP < hd;
        xv[e] = in ? xr[e] + (bias ? br[e] : 0.0f) : 0.0f;
        nv[e] = in && nw ? nr[e] : 0.0f;
    }
#pragma unroll
    for (int e = 0; e < E / 2; ++e) fr[e] = rope && lane + e * WARP < half ? fl[e] : 0.0f;
    if (nw) {
        float ss = 0.0f;
#pragma unroll
        for (int e = 0; e < E; ++e) {
            if (lane + e * WARP < hd) ss += xv[e] * xv[e];
        }
        ss = warp_sum(ss);
        const float scale = 1.0f / sqrtf(ss / static_cast<float>(hd) + p.eps);
#pragma unroll
        for (int e = 0; e < E; ++e) xv[e] = xv[e] * scale * nv[e];
    }
#pragma unroll
    for (int e = 0; e < E; ++e) {
        if (lane + e * WARP < hd) buf[lane + e * WARP] = xv[e];
    }
    __syncwarp();
    if (rope) {
#pragma unroll
        for (int e = 0; e < E / 2; ++e) {
            const int i = lane + e * WARP;
            if (i >= half) break;
            const float theta = static_cast<float>(pos) * fr[e];
            float sn, cs;
            sincosf(theta, &sn, &cs);
            const int a = p.neox ? i : 2 * i;
            const int b = p.neox ? i + half : 2 * i + 1;
            const float x0 = buf[a], x1 = buf[b];
            buf[a] = x0 * cs - x1 * sn;
            buf[b] = x0 * sn + x1 * cs;
        }
        __syncwarp();
        if (p.k_rot_scale > 0.0f) {
            if (hd == E * WARP) hadamard_head_regs<E>(buf, p.k_rot_scale, lane);
            else hadamard_head(buf, hd, p.k_rot_scale, lane);
        }
    }
}

// KV head h (kind 1: K, 2: V) from buf[0..hd) into the cache at position pos: INT8 with its fp16
// scale (d = amax / 127 rounded to fp16, q = round-half-even(x / d) clamped to +-127) or fp16.
__device__ __forceinline__ void kv_store_head(const QkvPostParams& p, int kind, int h, int pos, int lane,
                                              const float* buf) {
    const int hd = p.head_dim;
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
#endif

}  // namespace cuda
}  // namespace jllm
