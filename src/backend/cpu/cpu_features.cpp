// backend/cpu/cpu_features.cpp — run-time CPU feature detection and the parsing of JLLM_CPU_SIMD values.
#include "backend/cpu/cpu_features.h"

#include <cstdint>
#include <cstdio>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1UL << 20)  // Linux arm64 hwcap bit of the dot-product instructions
#endif
#endif

namespace jllm {

namespace {

#if defined(__x86_64__) || defined(__i386__)
uint64_t read_xcr0() {
    uint32_t eax = 0, edx = 0;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return (static_cast<uint64_t>(edx) << 32) | eax;
}
#endif

CpuFeatures detect() {
    CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
    const bool osxsave = (c >> 27) & 1;
    const bool avx = (c >> 28) & 1;
    const bool fma = (c >> 12) & 1;
    const bool f16c = (c >> 29) & 1;
    if (!osxsave || !avx) return f;
    const uint64_t xcr0 = read_xcr0();
    const bool os_avx = (xcr0 & 0x6) == 0x6;       // XMM + YMM state
    const bool os_avx512 = (xcr0 & 0xE6) == 0xE6;  // + opmask, ZMM_Hi256, Hi16_ZMM
    if (!os_avx) return f;
    f.fma = fma;
    f.f16c = f16c;
    unsigned max_leaf = __get_cpuid_max(0, nullptr);
    if (max_leaf >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        f.avx2 = (b >> 5) & 1;
        if (os_avx512) {
            f.avx512f = (b >> 16) & 1;
            f.avx512bw = (b >> 30) & 1;
            f.avx512vl = (b >> 31) & 1;
            f.avx512vnni = (c >> 11) & 1;
        }
        __cpuid_count(7, 1, a, b, c, d);
        f.avxvnni = (a >> 4) & 1;
    }
#elif defined(__aarch64__)
    f.neon = true;
#if defined(__linux__) && defined(HWCAP_ASIMDDP)
    f.dotprod = (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#endif
#endif
    return f;
}

SimdLevel best_supported() {
    if (simd_level_supported(SimdLevel::Neon)) return SimdLevel::Neon;
    if (simd_level_supported(SimdLevel::Avx512)) return SimdLevel::Avx512;
    if (simd_level_supported(SimdLevel::Avx2)) return SimdLevel::Avx2;
    return SimdLevel::Scalar;
}

}  // namespace

SimdLevel simd_level_from_env(const char* env) {
    const SimdLevel best = best_supported();
    if (env == nullptr || *env == '\0') return best;
    SimdLevel want;
    if (std::strcmp(env, "scalar") == 0) {
        want = SimdLevel::Scalar;
    } else if (std::strcmp(env, "avx2") == 0) {
        want = SimdLevel::Avx2;
    } else if (std::strcmp(env, "avx512") == 0) {
        want = SimdLevel::Avx512;
    } else if (std::strcmp(env, "neon") == 0) {
        want = SimdLevel::Neon;
    } else {
        std::fprintf(stderr, "warning: JLLM_CPU_SIMD=%s unknown (scalar|avx2|avx512|neon); using %s\n",
                     env, simd_level_name(best));
        return best;
    }
    if (simd_level_supported(want)) return want;
    // Fall back to the best level below the requested one (x86 tiers are ordered).
    SimdLevel got = SimdLevel::Scalar;
    if (want == SimdLevel::Avx512 && simd_level_supported(SimdLevel::Avx2)) got = SimdLevel::Avx2;
    std::fprintf(stderr, "warning: JLLM_CPU_SIMD=%s not supported by this CPU; using %s\n", env,
                 simd_level_name(got));
    return got;
}

const char* simd_level_name(SimdLevel level) {
    switch (level) {
        case SimdLevel::Scalar: return "scalar";
        case SimdLevel::Avx2: return "avx2";
        case SimdLevel::Avx512: return "avx512";
        case SimdLevel::Neon: return "neon";
    }
    return "unknown";
}

const CpuFeatures& cpu_features() {
    static const CpuFeatures f = detect();
    return f;
}

bool simd_level_supported(SimdLevel level) {
    const CpuFeatures& f = cpu_features();
    switch (level) {
        case SimdLevel::Scalar: return true;
#if defined(__x86_64__)
        case SimdLevel::Avx2: return f.avx2 && f.fma && f.f16c;
        case SimdLevel::Avx512:
            return f.avx2 && f.fma && f.f16c && f.avx512f && f.avx512bw && f.avx512vl && f.avx512vnni;
#endif
#if defined(__aarch64__)
        case SimdLevel::Neon: return f.neon;
#endif
        default: return false;
    }
}

SimdLevel simd_level_best() { return best_supported(); }

}  // namespace jllm
