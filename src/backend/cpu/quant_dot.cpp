// backend/cpu/quant_dot.cpp — the dispatch table of the quantized dot products: for each weight
// type and SIMD level, which activation format, which quantizer and which dot product. Built
// once per level on first use; a level that does not accelerate a type inherits the kernel of
// the level below it (avx512 -> avx2 -> scalar).
#include "backend/cpu/quant_dot.h"

#include <array>
#include <mutex>

#include "backend/cpu/quant_dot_internal.h"
#include "quant/quant_blocks.h"

namespace jllm {

namespace {

using namespace cpu_detail;

constexpr GgmlType kWeightTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0,
                                     GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
                                     GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K,
                                     GgmlType::Q6_K};
constexpr size_t N_TYPE_IDS = 32;  // GGUF type ids used here are < 32
constexpr size_t N_LEVELS = 4;

GgmlType act_type_for(GgmlType w) {
    switch (w) {
        case GgmlType::Q8_0: return GgmlType::Q8_0;
        case GgmlType::Q4_0:
        case GgmlType::Q4_1:
        case GgmlType::Q5_0:
        case GgmlType::Q5_1: return GgmlType::Q8_1;
        case GgmlType::Q2_K:
        case GgmlType::Q3_K:
        case GgmlType::Q4_K:
        case GgmlType::Q5_K:
        case GgmlType::Q6_K: return GgmlType::Q8_K;
        default: return GgmlType::F32;
    }
}

VecDotFn vec_dot_at(SimdLevel level, GgmlType w) {
    VecDotFn f = nullptr;
    switch (level) {
        case SimdLevel::Avx512: f = vec_dot_avx512(w); if (!f) f = vec_dot_avx2(w); break;
        case SimdLevel::Avx2: f = vec_dot_avx2(w); break;
        case SimdLevel::Neon: f = vec_dot_neon(w); break;
        case SimdLevel::Scalar: break;
    }
    return f ? f : vec_dot_scalar(w);
}

QuantizeActFn quantize_at(SimdLevel level, GgmlType act) {
    QuantizeActFn f = nullptr;
    switch (level) {
        case SimdLevel::Avx512: f = quantize_act_avx512(act); if (!f) f = quantize_act_avx2(act); break;
        case SimdLevel::Avx2: f = quantize_act_avx2(act); break;
        case SimdLevel::Neon: f = quantize_act_neon(act); break;
        case SimdLevel::Scalar: break;
    }
    return f ? f : quantize_act_scalar(act);
}

struct Tables {
    std::array<std::array<QuantDotKernel, N_TYPE_IDS>, N_LEVELS> k{};
    std::array<std::array<bool, N_TYPE_IDS>, N_LEVELS> present{};
};

const Tables& tables() {
    static const Tables t = [] {
        Tables t;
        for (size_t lv = 0; lv < N_LEVELS; lv++) {
            const SimdLevel level = static_cast<SimdLevel>(lv);
            if (!simd_level_supported(level)) continue;
            for (GgmlType w : kWeightTypes) {
                QuantDotKernel k;
                k.w_type = w;
                k.act_type = act_type_for(w);
                const TypeTraits& at = type_traits(k.act_type);
                k.act_block = at.block_size;
                k.act_block_bytes = at.type_size;
                k.quantize_act = k.act_type == GgmlType::F32 ? nullptr : quantize_at(level, k.act_type);
                k.vec_dot = vec_dot_at(level, w);
                // The gemm path and the packed dot product belong to their level's vec_dot (bit-identical
                // with it).
                if (level == SimdLevel::Avx512 && vec_dot_avx512(w) != nullptr) {
                    k.gemm = gemm_avx512(w);
                    k.packed = packed_avx512(w);
                }
                t.k[lv][static_cast<size_t>(w)] = k;
                t.present[lv][static_cast<size_t>(w)] = true;
            }
        }
        return t;
    }();
    return t;
}

}  // namespace

const QuantDotKernel* quant_dot_kernel(GgmlType w_type, SimdLevel level) {
    const size_t id = static_cast<size_t>(w_type);
    const size_t lv = static_cast<size_t>(level);
    if (id >= N_TYPE_IDS || lv >= N_LEVELS) return nullptr;
    const Tables& t = tables();
    return t.present[lv][id] ? &t.k[lv][id] : nullptr;
}

size_t act_row_size(GgmlType w_type, int64_t n) {
    return row_size(act_type_for(w_type), n);
}

}  // namespace jllm
