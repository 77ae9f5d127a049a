// backend/kv_quant.h — the INT8 KV cache's quantizer and its key rotation, one definition for the
// CPU backend's KV store, the canonical blob's K re-rotation (kv_blob.cpp; --cache-reuse) and the
// CUDA backend's scale: symmetric int8 with one fp16 scale per (position, kv head); keys (and the
// queries that read them) Walsh-Hadamard rotated where the head allows it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/fp16.h"
#include "jllm_types.h"

namespace jllm {

// q = round(x / d), d = amax / 127 rounded to fp16.
inline void quantize_kv_int8(const float* x, int64_t n, int8_t* q, Half* scale) {
    float amax = 0.0f;
    for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
    const Half d16 = to_half(amax / 127.0f);
    const float d = to_f32(d16);
    const float id = d > 0.0f ? 1.0f / d : 0.0f;
    // Round half to even as nearbyint does (|x * id| <= 127 < 2^22): adding and removing 1.5 * 2^23
    // leaves the nearest integer; inline arithmetic the compiler vectorises, where std::nearbyint
    // is an out-of-line call per element.
    constexpr float kRound = 12582912.0f;
    for (int64_t i = 0; i < n; ++i) {
        const float v = (x[i] * id + kRound) - kRound;
        q[i] = static_cast<int8_t>(std::max(-127.0f, std::min(127.0f, v)));
    }
    *scale = d16;
}

// INT8 keys are stored rotated by the normalized Walsh-Hadamard transform H (after RoPE), and
// every query that reads them is rotated the same way: H is orthogonal and symmetric, so
// (H q) . (H k) = q . k, while a key's few large channels (Qwen2's K bias puts ~10x the typical
// magnitude in a handful of them) are spread over the whole head, which one amax scale per head
// then quantizes with far less error (docs/fidelity.md). FP16 caches are stored as computed.
// Heads of a power-of-two size up to 256 (every model we run); others are stored unrotated.
inline bool kv_k_rotated(KvType t, int64_t head_dim) {
    return t == KvType::Int8 && head_dim >= 2 && head_dim <= 256 && (head_dim & (head_dim - 1)) == 0;
}

// 1 / sqrt(n) for n = 2^m, from constants (bit for bit the same on every compiler and on the
// device, which receives it as a parameter): 2^-(m/2), times 1/sqrt(2) for odd m.
inline float kv_rotation_scale(int64_t n) {
    int m = 0;
    while ((int64_t{1} << m) < n) ++m;
    const float p = std::ldexp(1.0f, -(m / 2));
    return m % 2 ? p * 0.70710678118654752440f : p;
}

// x <- H x in place, n a power of two: log2(n) butterfly stages (a, b) -> (a + b, a - b) over
// pairs `len` apart, then one multiply by kv_rotation_scale(n). The CUDA store (qkv_post.cuh)
// runs the same stages and the same final multiply: the same bits. Applied twice it returns x
// to within rounding (H H = I).
inline void hadamard_rotate(float* x, int64_t n) {
    for (int64_t len = 1; len < n; len <<= 1) {
        for (int64_t i = 0; i < n; i += 2 * len) {
            for (int64_t j = i; j < i + len; ++j) {
                const float a = x[j], b = x[j + len];
                x[j] = a + b;
                x[j + len] = a - b;
            }
        }
    }
    const float s = kv_rotation_scale(n);
    for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

}  // namespace jllm
