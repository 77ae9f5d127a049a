// backend/kv_quant.h — the INT8 KV cache's quantizer, one definition for the CPU backend's KV
// store and the canonical blob's K re-rotation (kv_blob.cpp; --cache-reuse): symmetric int8 with
// one fp16 scale per (position, kv head).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/fp16.h"

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

}  // namespace jllm
