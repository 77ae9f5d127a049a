// core/fp16.h — the project's IEEE half and bfloat16 storage types and exact conversions,
// usable from host C++ and CUDA device code alike (no CUDA header: plain bit manipulation on the
// host, the conversion instructions through inline PTX on the device).
// f32 -> f16 rounds to nearest even (as numpy and the hardware do); f16 -> f32 is exact.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define JLLM_HD __host__ __device__ __forceinline__
#else
#define JLLM_HD inline
#endif

namespace jllm {

struct Half {
    uint16_t bits;
};
static_assert(sizeof(Half) == 2, "Half must be 2 bytes");

struct BFloat16 {
    uint16_t bits;
};
static_assert(sizeof(BFloat16) == 2, "BFloat16 must be 2 bytes");

JLLM_HD uint32_t f32_bits(float f) {
    uint32_t u;
#if defined(__CUDA_ARCH__)
    u = __float_as_uint(f);
#else
    std::memcpy(&u, &f, 4);
#endif
    return u;
}

JLLM_HD float bits_f32(uint32_t u) {
    float f;
#if defined(__CUDA_ARCH__)
    f = __uint_as_float(u);
#else
    std::memcpy(&f, &u, 4);
#endif
    return f;
}

JLLM_HD float fp16_to_f32(uint16_t h) {
#if defined(__CUDA_ARCH__)
    // The hardware conversion (exact, one instruction); the bit manipulation below is the host's.
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
#else
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1Fu;
    uint32_t mant = h & 0x3FFu;
    if (exp == 0) {
        if (mant == 0) return bits_f32(sign);
        // subnormal: normalise
        exp = 127 - 15 + 1;
        while ((mant & 0x400u) == 0) {
            mant <<= 1;
            exp--;
        }
        mant &= 0x3FFu;
        return bits_f32(sign | (exp << 23) | (mant << 13));
    }
    if (exp == 31) return bits_f32(sign | 0x7F800000u | (mant << 13));
    return bits_f32(sign | ((exp + 127 - 15) << 23) | (mant << 13));
#endif
}

JLLM_HD uint16_t f32_to_fp16(float f) {
#if defined(__CUDA_ARCH__)
    // Round to nearest even in hardware: the same bits as below for every non-NaN input.
    uint16_t h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
#else
    const uint32_t x = f32_bits(f);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t absx = x & 0x7FFFFFFFu;
    if (absx >= 0x7F800000u) {  // inf or nan
        return static_cast<uint16_t>(sign | 0x7C00u | (absx > 0x7F800000u ? 0x200u : 0u));
    }
    if (absx >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds to inf
    if (absx < 0x38800000u) {  // result is subnormal or zero
        if (absx < 0x33000000u) return static_cast<uint16_t>(sign);  // < 2^-25 rounds to 0
        const uint32_t e = absx >> 23;
        const uint32_t m = (absx & 0x7FFFFFu) | 0x800000u;
        const uint32_t shift = 126 - e;  // 14 + (113 - e)
        uint32_t r = m >> shift;
        const uint32_t rem = m & ((1u << shift) - 1u);
        const uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1u))) r++;
        return static_cast<uint16_t>(sign | r);
    }
    uint32_t r = ((absx >> 13) - (112u << 10));
    const uint32_t rem = absx & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) r++;
    return static_cast<uint16_t>(sign | r);
#endif
}

JLLM_HD float bf16_to_f32(uint16_t b) { return bits_f32(static_cast<uint32_t>(b) << 16); }

JLLM_HD uint16_t f32_to_bf16(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet nan
    u += 0x7FFFu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
}

JLLM_HD float to_f32(Half h) { return fp16_to_f32(h.bits); }
JLLM_HD Half to_half(float f) { return Half{f32_to_fp16(f)}; }

}  // namespace jllm
