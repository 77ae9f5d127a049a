// backend/cuda/cuda_common.cuh — device helpers shared by the kernels: warp reductions and the
// per-type dequantization of one 32-element chunk of a weight row (host-callable too, so
// dequant_chunk_host can check it bit for bit without a GPU). A "chunk" is the unit every
// matrix kernel works in: elements [32c, 32c + 32) of a row; it is one block of the 32-element
// formats and one eighth of a k-quant super-block. The formulas are those of
// quant/quant_ref.cpp (the CPU twins), term for term, so dequantized values match bit for bit
// (see the exactness note there).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "backend/cuda/cuda_check.h"
#include "quant/quant_blocks.h"
#include "quant/quant_ref.h"
#include "quant/quant_types.h"

// `#pragma unroll` for device code only: the chunk dequantizers are also compiled for the host,
// whose compiler does not know the pragma.
#if defined(__CUDA_ARCH__)
#define JLLM_UNROLL _Pragma("unroll")
#else
#define JLLM_UNROLL
#endif

namespace jllm {
namespace cuda {

constexpr int WARP = 32;

// Sum over the LANES lanes of an aligned lane group (LANES a power of two up to WARP); every lane
// of the group gets it.
template <int LANES>
__device__ __forceinline__ float group_sum(float v) {
    JLLM_UNROLL
    for (int o = LANES / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_sum(float v) { return group_sum<WARP>(v); }

__device__ __forceinline__ float warp_max(float v) {
    JLLM_UNROLL
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Sum (MAX = false) or max (MAX = true) of `v` over the block; red: WARP floats of shared
// memory. Every thread gets the result; the barriers also publish earlier shared-memory writes,
// and red may be reused right after.
template <bool MAX>
__device__ __forceinline__ float block_reduce(float v, float* red) {
    v = MAX ? warp_max(v) : warp_sum(v);
    const int lane = threadIdx.x % WARP, wid = threadIdx.x / WARP;
    if (lane == 0) red[wid] = v;
    __syncthreads();
    const int nw = (blockDim.x + WARP - 1) / WARP;
    v = lane < nw ? red[lane] : (MAX ? -INFINITY : 0.0f);
    v = MAX ? warp_max(v) : warp_sum(v);
    __syncthreads();
    return v;
}

__host__ __device__ __forceinline__ float ldh(const Half& h) { return fp16_to_f32(h.bits); }

// A read-only load of a T at p (aligned for T): through the non-coherent cache on the device.
template <typename T>
__host__ __device__ __forceinline__ T ld_ro(const uint8_t* p) {
#ifdef __CUDA_ARCH__
    return __ldg(reinterpret_cast<const T*>(p));
#else
    return *reinterpret_cast<const T*>(p);
#endif
}

// 16 bytes global -> shared without registers (cp.async, sm_80+): both addresses 16-byte aligned;
// cp_async_wait_all() waits for this thread's copies (a barrier then publishes them).
__device__ __forceinline__ void cp_async16(void* smem_dst, const void* gmem_src) {
    const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(smem_dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(gmem_src));
}
// 8 bytes global -> shared (cp.async through L1): both addresses 8-byte aligned.
__device__ __forceinline__ void cp_async8(void* smem_dst, const void* gmem_src) {
    const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(smem_dst));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(d), "l"(gmem_src));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() {
    cp_async_commit();
    cp_async_wait<0>();
}

// Lets `kernel` launch with `smem` bytes of dynamic shared memory: beyond the default 48 KB a
// kernel must opt in (SM 8.7 and 9.0 allow more per block).
template <typename Kernel>
void allow_dynamic_smem(Kernel kernel, size_t smem) {
    if (smem > 48 * 1024) {
        JLLM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    }
}

// Loads 16 bytes that are known to be 16-byte aligned.
__host__ __device__ __forceinline__ uint4 ld16(const uint8_t* p) { return ld_ro<uint4>(p); }
// The same from global or shared memory (a generic load): ChunkDequant reads weight rows in place
// (the GEMV) and staged in shared memory (the GEMM).
__host__ __device__ __forceinline__ uint4 ld16_any(const uint8_t* p) { return *reinterpret_cast<const uint4*>(p); }

__host__ __device__ __forceinline__ uint8_t byte_of(const uint4& v, int i) {
    const uint32_t w = i < 4 ? v.x : i < 8 ? v.y : i < 12 ? v.z : v.w;
    return static_cast<uint8_t>(w >> (8 * (i & 3)));
}

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

// ---------------------------------------------------------------- 8-bit activations
// Layout (cuda_ops.h act_q8): int8 q [n_tok][cols], then at the next 16-byte boundary one
// float4 (d, d * sum(q[0..15]), d * sum(q[16..31]), 0) per 32-value block.
__host__ __device__ __forceinline__ size_t act_q8_scales_at(int n_tok, int64_t cols) {
    return (static_cast<size_t>(n_tok) * static_cast<size_t>(cols) + 15) & ~static_cast<size_t>(15);
}

#ifdef __CUDACC__
// The warp quantizes one block: lane l holds value l; writes q[0..31] and the block's float4.
__device__ __forceinline__ void quantize_block_warp(float v, int lane, int8_t* q, float4* s) {
    const float amax = warp_max(fabsf(v));
    const float d = amax / 127.0f;
    const float id = d > 0.0f ? 1.0f / d : 0.0f;
    const int qi = static_cast<int>(fmaxf(-127.0f, fminf(127.0f, rintf(v * id))));
    q[lane] = static_cast<int8_t>(qi);
    int sh = qi;  // sums within each half-warp
    JLLM_UNROLL
    for (int o = 8; o > 0; o >>= 1) sh += __shfl_xor_sync(0xffffffffu, sh, o);
    const int s_hi = __shfl_sync(0xffffffffu, sh, 16);
    if (lane == 0) *s = make_float4(d, d * static_cast<float>(sh), d, d * static_cast<float>(s_hi));
}

// One half (16 values) of an act_q8 block on its own scale (cuda_ops.h: quantized by halves):
// lanes 0-15 hold the values (lanes 16-31 pass 0 and store nothing); half h (0: values 0-15 of
// the block, 1: 16-31) writes its scale and sum into s = the block's float4.
__device__ __forceinline__ void quantize_half_warp(float v, int lane, int h, int8_t* q, float4* s) {
    float amax = fabsf(v);
    JLLM_UNROLL
    for (int o = 8; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const float d = amax / 127.0f;
    const float id = d > 0.0f ? 1.0f / d : 0.0f;
    const int qi = static_cast<int>(fmaxf(-127.0f, fminf(127.0f, rintf(v * id))));
    int sh = qi;
    JLLM_UNROLL
    for (int o = 8; o > 0; o >>= 1) sh += __shfl_xor_sync(0xffffffffu, sh, o);
    if (lane < 16) q[lane] = static_cast<int8_t>(qi);
    if (lane == 0) reinterpret_cast<float2*>(s)[h] = make_float2(d, d * static_cast<float>(sh));
}
#endif

// ---------------------------------------------------------------- int8 chunk decoders
// For the dp4a GEMV (activations quantized to 8 bits, q8 blocks of 32): chunk c of a row as 32
// small integers q (packed four per int32, element 4k + i in byte i of q[k]) and, per half
// h (elements 16h..16h+15), a scale a[h] and an offset b[h] with  w = a[h] * q + b[h]  equal to
// ChunkDequant's value. Every quantized type's integers fit int8.

__host__ __device__ __forceinline__ uint32_t ld_u16(const uint8_t* p) { return ld_ro<unsigned short>(p); }
__host__ __device__ __forceinline__ uint32_t ld_u32(const uint8_t* p) { return ld_ro<unsigned int>(p); }
// Four bytes from a 2-byte aligned address.
__host__ __device__ __forceinline__ uint32_t ld_u32_a2(const uint8_t* p) { return ld_u16(p) | (ld_u16(p + 2) << 16); }

// Per-byte v - k for bytes v <= 127 and v + (128 - k) <= 255 (no carry between bytes).
template <int K>
__host__ __device__ __forceinline__ uint32_t bytes_minus(uint32_t v) {
    return (v + static_cast<uint32_t>(128 - K) * 0x01010101u) ^ 0x80808080u;
}

// Bits 0..3 of `nib` to bit 4 of bytes 0..3.
__host__ __device__ __forceinline__ uint32_t spread4_bit4(uint32_t nib) {
    return ((nib & 1u) | ((nib & 2u) << 7) | ((nib & 4u) << 14) | ((nib & 8u) << 21)) << 4;
}

__host__ __device__ __forceinline__ int dp4a_i8(uint32_t a, uint32_t b, int c) {
#ifdef __CUDA_ARCH__
    return __dp4a(static_cast<int>(a), static_cast<int>(b), c);
#else
    for (int i = 0; i < 4; ++i) {
        c += static_cast<int>(static_cast<int8_t>(a >> (8 * i))) * static_cast<int>(static_cast<int8_t>(b >> (8 * i)));
    }
    return c;
#endif
}

// Eight 4-byte words from a 2-byte aligned address: nine aligned loads and a funnel shift when
// the address is not 4-byte aligned. Reads up to 4 bytes past the 32 (callers guarantee they
// are inside the same block).
__host__ __device__ __forceinline__ void ld_words_a2(const uint8_t* p, uint32_t* out) {
    const uintptr_t mis = reinterpret_cast<uintptr_t>(p) & 2u;
    const uint8_t* base = p - mis;
    uint32_t w[9];
    JLLM_UNROLL
    for (int i = 0; i < 9; ++i) w[i] = ld_u32(base + 4 * i);
    const int sh = static_cast<int>(8 * mis);
    JLLM_UNROLL
    for (int k = 0; k < 8; ++k) {
#ifdef __CUDA_ARCH__
        out[k] = __funnelshift_r(w[k], w[k + 1], sh);  // one instruction: (w[k+1]:w[k]) >> sh
#else
        out[k] = static_cast<uint32_t>(((static_cast<uint64_t>(w[k + 1]) << 32) | w[k]) >> sh);
#endif
    }
}

// The scales and mins of sub-blocks 2p and 2p + 1 (p = 0..3) of a Q4_K/Q5_K block, without
// branches: the four 6-bit values of each kind for sub-blocks 0..3 (or 4..7) are assembled in one
// word, one byte each, and the pair is picked by shifts.
__host__ __device__ __forceinline__ void scale_min_k4_pair(uint32_t s0, uint32_t s1, uint32_t s2, int p, float* sc,
                                                           float* mn) {
    const bool lo = p < 2;
    // sub-blocks 0..3: low 6 bits of bytes 0..3 (scales) and 4..7 (mins); 4..7: the nibbles of
    // bytes 8..11 below the top 2 bits of bytes 0..3 (scales) and 4..7 (mins).
    const uint32_t d = lo ? (s0 & 0x3F3F3F3Fu) : ((s2 & 0x0F0F0F0Fu) | ((s0 >> 2) & 0x30303030u));
    const uint32_t m = lo ? (s1 & 0x3F3F3F3Fu) : (((s2 >> 4) & 0x0F0F0F0Fu) | ((s1 >> 2) & 0x30303030u));
    const int sh = 16 * (p & 1);
    sc[0] = static_cast<float>((d >> sh) & 0xFFu);
    sc[1] = static_cast<float>((d >> (sh + 8)) & 0xFFu);
    mn[0] = static_cast<float>((m >> sh) & 0xFFu);
    mn[1] = static_cast<float>((m >> (sh + 8)) & 0xFFu);
}

// get_scale_min_k4 (sub-block j = 0..7) on the 12 scale bytes held in three words.
__host__ __device__ __forceinline__ void scale_min_k4_words(uint32_t s0, uint32_t s1, uint32_t s2, int j, float* sc,
                                                            float* mn) {
    float scs[2], mns[2];
    scale_min_k4_pair(s0, s1, s2, j >> 1, scs, mns);
    *sc = (j & 1) ? scs[1] : scs[0];
    *mn = (j & 1) ? mns[1] : mns[0];
}

template <GgmlType T>
struct ChunkQ8;  // defined for the quantized types only

template <>
struct ChunkQ8<GgmlType::Q4_0> {
    static __host__ __device__ __forceinline__ void run(const uint8_t* row, int64_t c, uint32_t* q, float* a, float* b) {
        const uint8_t* blk = row + c * sizeof(BlockQ4_0);
        a[0] = a[1] = fp16_to_f32(static_cast<uint16_t>(ld_u16(blk)));
        b[0] = b[1] = 0.0f;
        JLLM_UNROLL
        for (int k = 0; k < 4; ++k) {
            const uint32_t w = ld_u32_a2(blk + 2 + 4 * k);
            q[k] = bytes_minus<8>(w & 0x0F0F0F0Fu);
            q[4 + k] = bytes_minus<8>((w >> 4) & 0x0F0F0F0Fu);
        }
    }
};

template <>
struct ChunkQ8<GgmlType::Q4_1> {
    static __host__ __device__ __forceinline__ void run(const uint8_t* row, int64_t c, uint32_t* q, float* a, float* b) {
        const uint8_t* blk = row + c * sizeof(BlockQ4_1);
        const uint32_t dm = ld_u32(blk);
        a[0] = a[1] = fp16_to_f32(static_cast<uint16_t>(dm & 0xFFFFu));
        b[0] = b[1] = fp16_to_f32(static_cast<uint16_t>(dm >> 16));
        JLLM_UNROLL
        for (int k = 0; k < 4; ++k) {
            const uint32_t w = ld_u32(blk + 4 + 4 * k);
            q[k] = w & 0x0F0F0F0Fu;
            q[4 + k] = (w >> 4) & 0x0F0F0F0Fu;
        }
    }
};

template <>
struct ChunkQ8<GgmlType::Q5_0> {
    static __host__ __device__ __forceinline__ void run(const uint8_t* row, int64_t c, uint32_t* q, float* a, float* b) {
        const uint8_t* blk = row + c * sizeof(BlockQ5_0);
        a[0] = a[1] = fp16_to_f32(static_cast<uint16_t>(ld_u16(blk)));
        b[0] = b[1] = 0.0f;
        const uint32_t qh = ld_u32_a2(blk + 2);
        JLLM_UNROLL
        for (int k = 0; k < 4; ++k) {
            const uint32_t w = ld_u32_a2(blk + 6 + 4 * k);
            q[k] = bytes_minus<16>((w & 0x0F0F0F0Fu) | spread4_bit4((qh >> (4 * k)) & 0xFu));
            q[4 + k] = bytes_minus<16>(((w >> 4) & 0x0F0F0F0Fu) | spread4_bit4((qh >> (16 + 4 * k)) & 0xFu));
        }
    }
};

template <>
struct ChunkQ8<GgmlType::Q5_1> {
    static __host__ __device__ __forceinline__ void run(const uint8_t* row, int64_t c, uint32_t* q, float* a, float* b) {
        const uint8_t* blk = row + c * sizeof(BlockQ5_1);
        const uint32_t dm = ld_u32(blk);
        a[0] = a[1] = fp16_to_f32(static_cast<uint16_t>(dm & 0xFFFFu));
        b[0] = b[1] = fp16_to_f32(static_cast<uint16_t>(dm >> 16));
        const uint32_t qh = ld_u32(blk + 4);
        JLLM_UNROLL
        for (int k = 0; k < 4; ++k) {
            const uint32_t w = ld_u32(blk + 8 + 4 * k);
            q[k] = (w & 0x0F0F0F0Fu) | spread4_bit4((qh >> (4 * k)) & 0xFu);
            q[4 + k] = ((w >> 4) & 0x0F0F0F0Fu) | spread4_bit4((qh >> (16 + 4 * k)) & 0xFu);
        }
    }
};

template <>
struct ChunkQ8<GgmlType::Q8_0> {
    static __host__ __device__ __forceinline__ void run(const uint8_t* row, int64_t c, uint32_t* q, float* a, float* b) {
        const uint8_t* blk = row + c * sizeof(BlockQ8_0);
        a[0] = a[1] = fp16_to_f32(static_cast<uint16_t>(ld_u16(blk)));
        b[0] = b[1] = 0.0f;
        JLLM_UNROLL
        for (int k = 0; k < 8; ++k) q[k] = ld_u32_a2(blk + 2 + 4 * k);
    }
};

template <>
struct ChunkQ8<GgmlType::Q2_K> {
    static __host__ __device__ __forceinline__ void run(const uint8_t* row, int64_t c, uint32_t* q, float* a, float* b) {
        const BlockQ2_K* blk = reinterpret_cast<const BlockQ2_K*>(row) + c / 8;
        const int j = static_cast<int>(c % 8);
        const uint32_t dd = ld_u32(reinterpret_cast<const uint8_t*>(&blk->d));
        const float d = fp16_to_f32(static_cast<uint16_t>(dd & 0xFFFFu)), dmin = fp16_to_f32(static_cast<uint16_t>(dd >> 16));
        const uint8_t* qs = blk->qs + (j / 4) * 32;
        const int shift = 2 * (j % 4);
        JLLM_UNROLL
        for (int h = 0; h < 2; ++h) {
            const int s = blk->scales[2 * j + h];
            a[h] = d * static_cast<float>(s & 0xF);
            b[h] = -(dmin * static_cast<float>(s >> 4));
            JLLM_UNROLL
            for (int i = 0; i < 4; ++i) q[4 * h + i] = (ld_u32(qs + 16 * h + 4 * i) >> shift) & 0x03030303u;
        }
    }
};

template <>
struct ChunkQ8<GgmlType::Q3_K> {
    static __host__ __device__ __forceinline__ void run(const uint8_t* row, int64_t c, uint32_t* q, float* a, float* b) {
        const BlockQ3_K* blk = reinterpret_cast<const BlockQ3_K*>(row) + c / 8;
        const int j = static_cast<int>(c % 8);
        const float d = fp16_to_f32(static_cast<uint16_t>(ld_u16(reinterpret_cast<const uint8_t*>(&blk->d))));
        const uint8_t* qs = blk->qs + (j / 4) * 32;
        const int shift = 2 * (j % 4);
        JLLM_UNROLL
        for (int h = 0; h < 2; ++h) {
            a[h] = d * static_cast<float>(q3k_scale_dev(blk->scales, 2 * j + h));
            b[h] = 0.0f;
            JLLM_UNROLL
            for (int i = 0; i < 4; ++i) {
                const uint32_t lo = (ld_u32_a2(qs + 16 * h + 4 * i) >> shift) & 0x03030303u;
                const uint32_t hi = (ld_u32_a2(blk->hmask + 16 * h + 4 * i) >> j) & 0x01010101u;
                q[4 * h + i] = bytes_minus<4>(lo | (hi << 2));
            }
        }
    }
};

template <>
struct ChunkQ8<GgmlType::Q4_K> {
    static __host__ __device__ __forceinline__ void run(const uint8_t* row, int64_t c, uint32_t* q, float* a, float* b) {
        const BlockQ4_K* blk = reinterpret_cast<const BlockQ4_K*>(row) + c / 8;
        const int j = static_cast<int>(c % 8);
        const uint8_t* p = reinterpret_cast<const uint8_t*>(blk);
        const uint4 hdr = ld16(p);  // d, dmin, scales[12]
        float sc, mn;
        scale_min_k4_words(hdr.y, hdr.z, hdr.w, j, &sc, &mn);
        a[0] = a[1] = fp16_to_f32(static_cast<uint16_t>(hdr.x & 0xFFFFu)) * sc;
        b[0] = b[1] = -(fp16_to_f32(static_cast<uint16_t>(hdr.x >> 16)) * mn);
        const uint8_t* qs = blk->qs + (j / 2) * 32;
        const int shift = 4 * (j % 2);
        const uint4 v0 = ld16(qs), v1 = ld16(qs + 16);
        const uint32_t w[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
        JLLM_UNROLL
        for (int k = 0; k < 8; ++k) q[k] = (w[k] >> shift) & 0x0F0F0F0Fu;
    }
};

template <>
struct ChunkQ8<GgmlType::Q5_K> {
    static __host__ __device__ __forceinline__ void run(const uint8_t* row, int64_t c, uint32_t* q, float* a, float* b) {
        const BlockQ5_K* blk = reinterpret_cast<const BlockQ5_K*>(row) + c / 8;
        const int j = static_cast<int>(c % 8);
        const uint8_t* p = reinterpret_cast<const uint8_t*>(blk);
        const uint4 hdr = ld16(p);  // d, dmin, scales[12]
        float sc, mn;
        scale_min_k4_words(hdr.y, hdr.z, hdr.w, j, &sc, &mn);
        a[0] = a[1] = fp16_to_f32(static_cast<uint16_t>(hdr.x & 0xFFFFu)) * sc;
        b[0] = b[1] = -(fp16_to_f32(static_cast<uint16_t>(hdr.x >> 16)) * mn);
        const uint8_t* qs = blk->qs + (j / 2) * 32;
        const int shift = 4 * (j % 2);
        const uint4 v0 = ld16(qs), v1 = ld16(qs + 16);
        const uint4 h0 = ld16(blk->qh), h1 = ld16(blk->qh + 16);
        const uint32_t w[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
        const uint32_t hw[8] = {h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w};
        JLLM_UNROLL
        for (int k = 0; k < 8; ++k) q[k] = ((w[k] >> shift) & 0x0F0F0F0Fu) | (((hw[k] >> j) & 0x01010101u) << 4);
    }
};

template <>
struct ChunkQ8<GgmlType::Q6_K> {
    static __host__ __device__ __forceinline__ void run(const uint8_t* row, int64_t c, uint32_t* q, float* a, float* b) {
        const BlockQ6_K* blk = reinterpret_cast<const BlockQ6_K*>(row) + c / 8;
        const int j = static_cast<int>(c % 8);
        const float d = fp16_to_f32(static_cast<uint16_t>(ld_u16(reinterpret_cast<const uint8_t*>(&blk->d))));
        const uint8_t* ql = blk->ql + (j / 4) * 64 + (j % 2) * 32;
        const int lshift = 4 * ((j % 4) / 2);
        const uint8_t* qh = blk->qh + (j / 4) * 32;
        const int hshift = 2 * (j % 4);
        // The two signed scale bytes in one 2-byte load (the block and the scales start at even offsets).
        const uint32_t sc = ld_u16(reinterpret_cast<const uint8_t*>(blk->scales) + 2 * j);
        a[0] = d * static_cast<float>(static_cast<int8_t>(sc & 0xFFu));
        a[1] = d * static_cast<float>(static_cast<int8_t>(sc >> 8));
        b[0] = b[1] = 0.0f;
        // ql and qh regions end at least 4 bytes before the block's end (scales, d follow).
        uint32_t wl[8], wh[8];
        ld_words_a2(ql, wl);
        ld_words_a2(qh, wh);
        JLLM_UNROLL
        for (int k = 0; k < 8; ++k) {
            const uint32_t lo = (wl[k] >> lshift) & 0x0F0F0F0Fu;
            const uint32_t hi = ((wh[k] >> hshift) & 0x03030303u) << 4;
            q[k] = bytes_minus<32>(lo | hi);
        }
    }
};

// ---------------------------------------------------------------- tiled device layout
// WeightLayout::Tiles (cuda_ops.h) of Q4_K and Q6_K: tiles of 8 rows x 1 block that gather the
// 8 rows' parts by kind, so every part is 16-byte aligned and a warp's loads of one part are
// contiguous; the matrix keeps its size. Tile (g, b) (row group g, block column b) starts at
// (g * nb + b) * BYTES; the rows are a multiple of 8.
//   Q6_K, 1,680 bytes: ql 8 x 128 | qh 8 x 64 | scales 8 x 16 | d 8 x 2
//   Q4_K, 1,152 bytes: header 8 x 16 (d, dmin, scales) | qs 8 x 128
// The GEMM stages whole tiles in shared memory with the 16-byte units of each row's 128-byte
// (64-byte) part permuted, unit x of row i at x ^ (i mod 8) (x ^ (i mod 4)), so the rows of a
// tile, 128 bytes apart, do not all fall on the same banks (SWZ below).
constexpr int TILE_ROWS = 8;

// Where the GEMM stages unit o of a part that starts at unit `first` with `per_row` units per row
// (8 or 4): unit x of row i at x ^ (i mod per_row), as tile_unit<true> reads it.
__host__ __device__ __forceinline__ int staged_part_unit(int o, int first, int per_row) {
    const int u = o - first;
    return first + (u & ~(per_row - 1)) + ((u ^ (u / per_row)) & (per_row - 1));
}

template <GgmlType T>
struct TileFmt;
template <>
struct TileFmt<GgmlType::Q6_K> {
    static constexpr int QL = 0, QH = 8 * 128, SC = 8 * 192, D = 8 * 208, BYTES = 8 * 210;
    // Where the GEMM stages the tile's 16-byte unit o (in units): ql and qh permuted.
    static __host__ __device__ __forceinline__ int staged_unit(int o) {
        return o < 64 ? staged_part_unit(o, 0, 8) : (o < 96 ? staged_part_unit(o, 64, 4) : o);
    }
};
template <>
struct TileFmt<GgmlType::Q4_K> {
    static constexpr int HDR = 0, QS = 8 * 16, BYTES = 8 * 144;
    static __host__ __device__ __forceinline__ int staged_unit(int o) { return o < 8 ? o : staged_part_unit(o, 8, 8); }
};
static_assert(TileFmt<GgmlType::Q6_K>::BYTES % 16 == 0 && TileFmt<GgmlType::Q4_K>::BYTES % 16 == 0, "tile sizes");
constexpr bool has_tiles(GgmlType t) { return t == GgmlType::Q4_K || t == GgmlType::Q6_K; }

// The tile holding chunk c of row r (nb blocks per row).
template <GgmlType T>
__host__ __device__ __forceinline__ const uint8_t* tile_of(const uint8_t* base, int64_t nb, int64_t r, int64_t c) {
    return base + ((r / TILE_ROWS) * nb + c / 8) * TileFmt<T>::BYTES;
}

// 16-byte unit x of row i's part (at `part`, rb bytes per row) of a tile; SWZ: as staged by the GEMM.
template <bool SWZ>
__host__ __device__ __forceinline__ const uint8_t* tile_unit(const uint8_t* tile, int part, int rb, int i, int x) {
    return tile + part + rb * i + 16 * (SWZ ? x ^ (i & (rb / 16 - 1)) : x);
}

// Chunk j (0..7) of row i (0..7) of a tile (global or shared memory, generic loads): the values of
// ChunkDequant<T> on the file's layout.
template <GgmlType T, bool SWZ>
__host__ __device__ __forceinline__ void tile_chunk(const uint8_t* tile, int i, int j, float* y) {
    using F = TileFmt<T>;
    if constexpr (T == GgmlType::Q6_K) {
        const int xl = 4 * (j / 4) + 2 * (j % 2), xh = 2 * (j / 4);
        q6k_chunk_parts<true>(tile_unit<SWZ>(tile, F::QL, 128, i, xl), tile_unit<SWZ>(tile, F::QL, 128, i, xl + 1),
                              tile_unit<SWZ>(tile, F::QH, 64, i, xh), tile_unit<SWZ>(tile, F::QH, 64, i, xh + 1),
                              reinterpret_cast<const int8_t*>(tile + F::SC + 16 * i),
                              ldh(reinterpret_cast<const Half*>(tile + F::D)[i]), j, y);
    } else {
        static_assert(T == GgmlType::Q4_K, "tiles: Q4_K and Q6_K");
        const int x = 2 * (j / 2);
        q4k_chunk_parts(tile + F::HDR + 16 * i, tile_unit<SWZ>(tile, F::QS, 128, i, x),
                        tile_unit<SWZ>(tile, F::QS, 128, i, x + 1), j, y);
    }
}

// Chunk c of row r of a weight matrix in either layout (TILED: tiles, nb blocks per row; else the
// file's rows of row_bytes): the row-wise kernels' (fp32 GEMV, embedding) decoder.
template <GgmlType T, bool TILED>
__host__ __device__ __forceinline__ void chunk_of(const uint8_t* w, size_t row_bytes, int64_t nb, int64_t r, int64_t c,
                                                  float* y) {
    if constexpr (TILED) {
        tile_chunk<T, false>(tile_of<T>(w, nb, r, c), static_cast<int>(r % TILE_ROWS), static_cast<int>(c % 8), y);
    } else {
        ChunkDequant<T>::run(w + r * row_bytes, c, y);
    }
}

// Calls f(tag) for the types with a tiled layout (Q4_K, Q6_K); returns false for the others.
template <typename F>
bool dispatch_tiled_type(GgmlType t, F&& f) {
    if (t == GgmlType::Q4_K) f(TypeTag<GgmlType::Q4_K>{});
    else if (t == GgmlType::Q6_K) f(TypeTag<GgmlType::Q6_K>{});
    else return false;
    return true;
}

// Calls f(tag, std::bool_constant<tiled>) for a weight format the row-wise kernels and the GEMM
// take (every dispatch_type type in the file's rows; Q4_K/Q6_K tiled); returns false otherwise.
template <typename F>
bool dispatch_format(GgmlType t, bool tiled, F&& f) {
    if (tiled) return dispatch_tiled_type(t, [&](auto tag) { f(tag, std::true_type{}); });
    return dispatch_type(t, [&](auto tag) { f(tag, std::false_type{}); });
}

// Calls f(tag) for the types with an int8 chunk decoder (every quantized type of dispatch_type,
// not the float ones); returns false for the others.
constexpr bool has_chunk_q8(GgmlType t) { return t != GgmlType::F32 && t != GgmlType::F16 && t != GgmlType::BF16; }

template <typename F>
bool dispatch_q8_type(GgmlType t, F&& f) {
    if (!has_chunk_q8(t)) return false;
    return dispatch_type(t, [&](auto tag) {
        if constexpr (has_chunk_q8(decltype(tag)::value)) f(tag);
    });
}

inline cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

}  // namespace cuda
}  // namespace jllm
