// backend/cpu/cpu_features.h — what the CPU we run on can execute, detected once at run time,
// and the SIMD level the CPU kernels use. The library is built without a global -march flag;
// each SIMD kernel file enables its own instruction set and is called only at a level detection
// allows (the CPU backend's CpuOptions::simd, backend/backend_options.h).
#pragma once

namespace jllm {

struct CpuFeatures {
    // x86-64
    bool avx2 = false;
    bool fma = false;
    bool f16c = false;
    bool avx512f = false;
    bool avx512bw = false;
    bool avx512vl = false;
    bool avx512vnni = false;
    bool avxvnni = false;
    // aarch64
    bool neon = false;
    bool dotprod = false;
};

// Instruction-set tiers the kernels are written for, in increasing order on x86.
//  Avx2:   AVX2 + FMA + F16C (maddubs-based int8 dot products).
//  Avx512: AVX-512 F/BW/VL + AVX512-VNNI (vpdpbusd / vpdpwssd).
//  Neon:   aarch64 Advanced SIMD (+ dotprod where present).
enum class SimdLevel { Scalar = 0, Avx2 = 1, Avx512 = 2, Neon = 3 };

const char* simd_level_name(SimdLevel level);

// Detected once (cpuid + xgetbv on x86, getauxval on aarch64).
const CpuFeatures& cpu_features();

// Whether this CPU can run kernels of `level`.
bool simd_level_supported(SimdLevel level);

// The best level this CPU supports.
SimdLevel simd_level_best();

// The level a JLLM_CPU_SIMD value (scalar | avx2 | avx512 | neon) selects on this CPU: nullptr or
// "" gives the best supported; an unknown value, or one this CPU cannot run, the best supported
// level below it, with a warning on stderr.
SimdLevel simd_level_from_env(const char* value);

}  // namespace jllm
