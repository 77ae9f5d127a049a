// backend/cuda/chunk_dequant.cuh — the per-type dequantization of one 32-element chunk of a
// weight row (ChunkDequant<T>) and the switch from the run-time type to these templates
// (dispatch_type). A "chunk" is the unit every matrix kernel works in: elements [32c, 32c + 32)
// of a row; it is one block of the 32-element formats and one eighth of a k-quant super-block.
// The formulas are those of quant/quant_ref.cpp (the CPU twins), term for term, so dequantized
// values match bit for bit (see the exactness note there). Host-callable too, so
// dequant_chunk_host (tests/support/cuda_host_decoders.cu) checks them without a GPU.
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_common.cuh"
#include "quant/quant_blocks.h"
#include "quant/quant_ref.h"
#include "quant/quant_types.h"

namespace jllm {
namespace cuda {

// Type tags: one template parameter per weight type (the switch in dispatch_type maps the
// run-time GgmlType to these).
template <GgmlType T>
struct ChunkDequant;

// y[l] = element 32c + l of the row starting at `row`.
template <>
struct ChunkDequant<GgmlType::F32> {
    static __host__ __device__ __forceinline__ void run(const uint8_t* row, int64_t c, float* y) {
        const float4* p = reinterpret_cast<const float4*>(row) + c * 8;
        JLLM_UNROLL
        for (int i = 0; i < 8; ++i) {
            const float4 v = p[i];
            y[4 * i] = v.x;
            y[4 * i + 1] = v.y;
            y[4 * i + 2] = v.z;
            y[4 * i + 3] = v.w;
        }
    }
};

// F16 and BF16: 32 two-byte values per chunk, read as four 16-byte loads.
template <bool IS_BF16>
struct ChunkDequant16 {
    static __host__ __device__ __forceinline__ float to_float(uint16_t h) {
        return IS_BF16 ? bf16_to_f32(h) : fp16_to_f32(h);
    }
    static __host__ __device__ __forceinline__ void run(const uint8_t* row, int64_t c, float* y) {
        const uint8_t* p = row + c * 64;
        JLLM_UNROLL
        for (int i = 0; i < 4; ++i) {
            const uint4 v = ld16_any(p + 16 * i);
            const uint32_t w[4] = {v.x, v.y, v.z, v.w};
            JLLM_UNROLL
            for (int j = 0; j < 4; ++j) {
                y[8 * i + 2 * j] = to_float(static_cast<uint16_t>(w[j] & 0xFFFFu));
                y[8 * i + 2 * j + 1] = to_float(static_cast<uint16_t>(w[j] >> 16));
            }
        }
    }
};

template <>
struct ChunkDequant<GgmlType::F16> : ChunkDequant16<false> {};

template <>
struct ChunkDequant<GgmlType::BF16> : ChunkDequant16<true> {};

template <>
struct ChunkDequant<GgmlType::Q4_0> {
    static __host__ __device__ __forceinline__ void run(const uint8_t* row, int64_t c, float* y) {
        const BlockQ4_0* b = reinterpret_cast<const BlockQ4_0*>(row) + c;
        const float d = ldh(b->d);
        // 18-byte blocks: qs (offset 2) is 2-byte aligned.
        const uint16_t* qs = reinterpret_cast<const uint16_t*>(b->qs);
        JLLM_UNROLL
        for (int i = 0; i < 8; ++i) {
            const uint32_t w = qs[i];
            JLLM_UNROLL
            for (int k = 0; k < 2; ++k) {
                const int q = (w >> (8 * k)) & 0xFF;
                y[2 * i + k] = d * static_cast<float>((q & 0xF) - 8);
                y[2 * i + k + 16] = d * static_cast<float>((q >> 4) - 8);
            }
        }
    }
};

template <>
struct ChunkDequant<GgmlType::Q4_1> {
    static __host__ __device__ __forceinline__ void run(const uint8_t* row, int64_t c, float* y) {
        const BlockQ4_1* b = reinterpret_cast<const BlockQ4_1*>(row) + c;
        const float d = ldh(b->d), m = ldh(b->m);
        // 20-byte blocks: qs at offset 4 is 4-byte aligned.
        const uint32_t* qs = reinterpret_cast<const uint32_t*>(b->qs);
        JLLM_UNROLL
        for (int i = 0; i < 4; ++i) {
            const uint32_t w = qs[i];
            JLLM_UNROLL
            for (int j = 0; j < 4; ++j) {
                const int q = (w >> (8 * j)) & 0xFF;
                y[4 * i + j] = d * static_cast<float>(q & 0xF) + m;
                y[4 * i + j + 16] = d * static_cast<float>(q >> 4) + m;
            }
        }
    }
};

template <>
struct ChunkDequant<GgmlType::Q5_0> {
    static __host__ __device__ __forceinline__ void run(const uint8_t* row, int64_t c, float* y) {
        const BlockQ5_0* b = reinterpret_cast<const BlockQ5_0*>(row) + c;
        const float d = ldh(b->d);
        // 22-byte blocks: qh (offset 2) and qs (offset 6) are 2-byte aligned.
        const uint16_t* qh16 = reinterpret_cast<const uint16_t*>(b->qh);
        const uint32_t qh = static_cast<uint32_t>(qh16[0]) | (static_cast<uint32_t>(qh16[1]) << 16);
        const uint16_t* qs = reinterpret_cast<const uint16_t*>(b->qs);
        JLLM_UNROLL
        for (int i = 0; i < 8; ++i) {
            const uint32_t w = qs[i];
            JLLM_UNROLL
            for (int k = 0; k < 2; ++k) {
                const int j = 2 * i + k;
                const int q = (w >> (8 * k)) & 0xFF;
                const int q0 = (q & 0xF) | (((qh >> j) & 1) << 4);
                const int q1 = (q >> 4) | (((qh >> (j + 16)) & 1) << 4);
                y[j] = d * static_cast<float>(q0 - 16);
                y[j + 16] = d * static_cast<float>(q1 - 16);
            }
        }
    }
};

template <>
struct ChunkDequant<GgmlType::Q5_1> {
    static __host__ __device__ __forceinline__ void run(const uint8_t* row, int64_t c, float* y) {
        const BlockQ5_1* b = reinterpret_cast<const BlockQ5_1*>(row) + c;
        const float d = ldh(b->d), m = ldh(b->m);
        const uint32_t qh = *reinterpret_cast<const uint32_t*>(b->qh);  // 24-byte blocks: aligned
        const uint32_t* qs = reinterpret_cast<const uint32_t*>(b->qs);
        JLLM_UNROLL
        for (int i = 0; i < 4; ++i) {
            const uint32_t w = qs[i];
            JLLM_UNROLL
            for (int jj = 0; jj < 4; ++jj) {
                const int j = 4 * i + jj;
                const int q = (w >> (8 * jj)) & 0xFF;
                const int q0 = (q & 0xF) | (((qh >> j) & 1) << 4);
                const int q1 = (q >> 4) | (((qh >> (j + 16)) & 1) << 4);
                y[j] = d * static_cast<float>(q0) + m;
                y[j + 16] = d * static_cast<float>(q1) + m;
            }
        }
    }
};

template <>
struct ChunkDequant<GgmlType::Q8_0> {
    static __host__ __device__ __forceinline__ void run(const uint8_t* row, int64_t c, float* y) {
        const BlockQ8_0* b = reinterpret_cast<const BlockQ8_0*>(row) + c;
        const float d = ldh(b->d);
        // 34-byte blocks: qs is 2-byte aligned.
        const uint16_t* qs = reinterpret_cast<const uint16_t*>(b->qs);
        JLLM_UNROLL
        for (int i = 0; i < 16; ++i) {
            const uint16_t w = qs[i];
            y[2 * i] = d * static_cast<float>(static_cast<int8_t>(w & 0xFF));
            y[2 * i + 1] = d * static_cast<float>(static_cast<int8_t>(w >> 8));
        }
    }
};

// k-quants: chunk c is sub-range j = c % 8 (elements 32j..32j+31) of super-block c / 8.
template <>
struct ChunkDequant<GgmlType::Q2_K> {
    static __host__ __device__ __forceinline__ void run(const uint8_t* row, int64_t c, float* y) {
        const BlockQ2_K* b = reinterpret_cast<const BlockQ2_K*>(row) + c / 8;
        const int j = static_cast<int>(c % 8);
        const float d = ldh(b->d), dmin = ldh(b->dmin);
        // 84-byte blocks: qs (offset 16) is 4-byte aligned.
        const uint32_t* qs = reinterpret_cast<const uint32_t*>(b->qs + (j / 4) * 32);
        const int shift = 2 * (j % 4);
        JLLM_UNROLL
        for (int h = 0; h < 2; ++h) {
            const int s = b->scales[2 * j + h];
            const float dl = d * static_cast<float>(s & 0xF);
            const float ml = dmin * static_cast<float>(s >> 4);
            JLLM_UNROLL
            for (int i = 0; i < 4; ++i) {
                const uint32_t w = qs[4 * h + i];
                JLLM_UNROLL
                for (int k = 0; k < 4; ++k) {
                    const int q = (w >> (8 * k + shift)) & 3;
                    y[16 * h + 4 * i + k] = dl * static_cast<float>(q) - ml;
                }
            }
        }
    }
};

__host__ __device__ __forceinline__ int q3k_scale_dev(const uint8_t* sc, int j) {
    const int lo = (j < 8) ? (sc[j] & 0xF) : (sc[j - 8] >> 4);
    const int hi = (sc[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (lo | (hi << 4)) - 32;
}

template <>
struct ChunkDequant<GgmlType::Q3_K> {
    static __host__ __device__ __forceinline__ void run(const uint8_t* row, int64_t c, float* y) {
        const BlockQ3_K* b = reinterpret_cast<const BlockQ3_K*>(row) + c / 8;
        const int j = static_cast<int>(c % 8);
        const float d = ldh(b->d);
        // 110-byte blocks: hmask (offset 0) and qs (offset 32) are 2-byte aligned.
        const uint16_t* qs = reinterpret_cast<const uint16_t*>(b->qs + (j / 4) * 32);
        const uint16_t* hm = reinterpret_cast<const uint16_t*>(b->hmask);
        const int shift = 2 * (j % 4);
        JLLM_UNROLL
        for (int h = 0; h < 2; ++h) {
            const float dl = d * static_cast<float>(q3k_scale_dev(b->scales, 2 * j + h));
            JLLM_UNROLL
            for (int i = 0; i < 8; ++i) {
                const uint32_t w = qs[8 * h + i], m = hm[8 * h + i];
                JLLM_UNROLL
                for (int k = 0; k < 2; ++k) {
                    const int lo = (w >> (8 * k + shift)) & 3;
                    const int hi = (m >> (8 * k + j)) & 1;
                    y[16 * h + 2 * i + k] = dl * static_cast<float>(lo - (hi ? 0 : 4));
                }
            }
        }
    }
};

// Chunk j (0..7) of a Q4_K block from its parts: hdr its first 16 bytes (d, dmin, scales), qs0
// and qs1 the chunk's two 16-byte pieces of qs (16-byte aligned; the file's layout or the tiles).
__host__ __device__ __forceinline__ void q4k_chunk_parts(const uint8_t* hdr, const uint8_t* qs0, const uint8_t* qs1,
                                                         int j, float* y) {
    const BlockQ4_K* b = reinterpret_cast<const BlockQ4_K*>(hdr);  // the header's fields only
    uint8_t sc, mn;
    get_scale_min_k4(j, b->scales, &sc, &mn);
    const float dl = ldh(b->d) * static_cast<float>(sc);
    const float ml = ldh(b->dmin) * static_cast<float>(mn);
    const int shift = 4 * (j % 2);
    const uint4 v0 = ld16_any(qs0), v1 = ld16_any(qs1);
    JLLM_UNROLL
    for (int l = 0; l < 16; ++l) {
        y[l] = dl * static_cast<float>((byte_of(v0, l) >> shift) & 0xF) - ml;
        y[l + 16] = dl * static_cast<float>((byte_of(v1, l) >> shift) & 0xF) - ml;
    }
}

template <>
struct ChunkDequant<GgmlType::Q4_K> {
    static __host__ __device__ __forceinline__ void run(const uint8_t* row, int64_t c, float* y) {
        const BlockQ4_K* b = reinterpret_cast<const BlockQ4_K*>(row) + c / 8;
        const int j = static_cast<int>(c % 8);
        // 144-byte blocks, qs at offset 16: the chunk's 32 bytes are two aligned 16-byte loads
        // when the row is 16-byte aligned (GGUF data is 32-byte aligned, rows are whole blocks).
        const uint8_t* qs = b->qs + (j / 2) * 32;
        q4k_chunk_parts(reinterpret_cast<const uint8_t*>(b), qs, qs + 16, j, y);
    }
};

template <>
struct ChunkDequant<GgmlType::Q5_K> {
    static __host__ __device__ __forceinline__ void run(const uint8_t* row, int64_t c, float* y) {
        const BlockQ5_K* b = reinterpret_cast<const BlockQ5_K*>(row) + c / 8;
        const int j = static_cast<int>(c % 8);
        uint8_t sc, mn;
        get_scale_min_k4(j, b->scales, &sc, &mn);
        const float dl = ldh(b->d) * static_cast<float>(sc);
        const float ml = ldh(b->dmin) * static_cast<float>(mn);
        // 176-byte blocks: qh at 16 and qs at 48 are 16-byte aligned.
        const uint8_t* qs = b->qs + (j / 2) * 32;
        const int shift = 4 * (j % 2);
        const uint4 v0 = ld16_any(qs), v1 = ld16_any(qs + 16);
        const uint4 h0 = ld16_any(b->qh), h1 = ld16_any(b->qh + 16);
        JLLM_UNROLL
        for (int l = 0; l < 16; ++l) {
            const int q0 = ((byte_of(v0, l) >> shift) & 0xF) | (((byte_of(h0, l) >> j) & 1) << 4);
            const int q1 = ((byte_of(v1, l) >> shift) & 0xF) | (((byte_of(h1, l) >> j) & 1) << 4);
            y[l] = dl * static_cast<float>(q0) - ml;
            y[l + 16] = dl * static_cast<float>(q1) - ml;
        }
    }
};

// Chunk j (0..7) of a Q6_K block from its parts: ql0/ql1 the chunk's two 16-byte ql pieces
// (elements 0..15 and 16..31 in their low or high nibbles), qh0/qh1 its qh pieces, sc the
// block's 16 scales, d its scale. ALIGNED: the pieces are 16-byte aligned (the tiles), else
// 2-byte aligned (the file's 210-byte blocks).
template <bool ALIGNED>
__host__ __device__ __forceinline__ void q6k_chunk_parts(const uint8_t* ql0, const uint8_t* ql1, const uint8_t* qh0,
                                                         const uint8_t* qh1, const int8_t* sc, float d, int j,
                                                         float* y) {
    // element e = 32j + l: low nibble from ql[(e/128)*64 + e%64] at 4*((e%128)/64), high crumb
    // from qh[(e/128)*32 + e%32] at 2*((e%128)/32).
    const int lshift = 4 * ((j % 4) / 2), hshift = 2 * (j % 4);
    JLLM_UNROLL
    for (int h = 0; h < 2; ++h) {
        const uint8_t* ql = h == 0 ? ql0 : ql1;
        const uint8_t* qh = h == 0 ? qh0 : qh1;
        const float dl = d * static_cast<float>(sc[2 * j + h]);
        uint32_t wl[8], wh[8];  // two bytes each
        if constexpr (ALIGNED) {
            const uint4 l = ld16_any(ql), m = ld16_any(qh);
            const uint32_t lw[4] = {l.x, l.y, l.z, l.w}, mw[4] = {m.x, m.y, m.z, m.w};
            JLLM_UNROLL
            for (int k = 0; k < 8; ++k) {
                wl[k] = lw[k / 2] >> (16 * (k % 2));
                wh[k] = mw[k / 2] >> (16 * (k % 2));
            }
        } else {
            JLLM_UNROLL
            for (int k = 0; k < 8; ++k) {
                wl[k] = reinterpret_cast<const uint16_t*>(ql)[k];
                wh[k] = reinterpret_cast<const uint16_t*>(qh)[k];
            }
        }
        JLLM_UNROLL
        for (int k = 0; k < 8; ++k) {
            JLLM_UNROLL
            for (int e = 0; e < 2; ++e) {
                const int lo = (wl[k] >> (8 * e + lshift)) & 0xF;
                const int hi = (wh[k] >> (8 * e + hshift)) & 3;
                y[16 * h + 2 * k + e] = dl * static_cast<float>((lo | (hi << 4)) - 32);
            }
        }
    }
}

template <>
struct ChunkDequant<GgmlType::Q6_K> {
    static __host__ __device__ __forceinline__ void run(const uint8_t* row, int64_t c, float* y) {
        const BlockQ6_K* b = reinterpret_cast<const BlockQ6_K*>(row) + c / 8;
        const int j = static_cast<int>(c % 8);
        const uint8_t* ql = b->ql + (j / 4) * 64 + (j % 2) * 32;
        const uint8_t* qh = b->qh + (j / 4) * 32;
        q6k_chunk_parts<false>(ql, ql + 16, qh, qh + 16, b->scales, ldh(b->d), j, y);
    }
};

// Calls f(std::integral_constant-like tag) for the run-time type; returns false if unsupported.
template <GgmlType T>
struct TypeTag {
    static constexpr GgmlType value = T;
};

template <typename F>
bool dispatch_type(GgmlType t, F&& f) {
    switch (t) {
        case GgmlType::F32: f(TypeTag<GgmlType::F32>{}); return true;
        case GgmlType::F16: f(TypeTag<GgmlType::F16>{}); return true;
        case GgmlType::BF16: f(TypeTag<GgmlType::BF16>{}); return true;
        case GgmlType::Q4_0: f(TypeTag<GgmlType::Q4_0>{}); return true;
        case GgmlType::Q4_1: f(TypeTag<GgmlType::Q4_1>{}); return true;
        case GgmlType::Q5_0: f(TypeTag<GgmlType::Q5_0>{}); return true;
        case GgmlType::Q5_1: f(TypeTag<GgmlType::Q5_1>{}); return true;
        case GgmlType::Q8_0: f(TypeTag<GgmlType::Q8_0>{}); return true;
        case GgmlType::Q2_K: f(TypeTag<GgmlType::Q2_K>{}); return true;
        case GgmlType::Q3_K: f(TypeTag<GgmlType::Q3_K>{}); return true;
        case GgmlType::Q4_K: f(TypeTag<GgmlType::Q4_K>{}); return true;
        case GgmlType::Q5_K: f(TypeTag<GgmlType::Q5_K>{}); return true;
        case GgmlType::Q6_K: f(TypeTag<GgmlType::Q6_K>{}); return true;
        default: return false;
    }
}

}  // namespace cuda
}  // namespace jllm
