// backend/cpu/quant_dot_avx512.cpp — AVX-512 (F/BW/VL) + AVX512-VNNI activation quantizers
// and dot products. All 256-bit kernels of quant_dot_x86_kernels.inc are compiled here again
// with vpdpbusd / vpdpwssd; the hot weight types of Q4_K_M / Q8_0 / Q4_x models (Q4_K, Q6_K,
// Q5_K, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) also get full 512-bit kernels.
//
// 512-bit layout tricks:
//  - Q4_K / Q5_K: one 32-byte group of nibbles is broadcast to both halves of a zmm and the upper
//    half shifted right by 4 (vpsrlvq), so the register holds 64 consecutive elements and
//    matches a single 64-byte activation load.
//  - Q6_K: the 64 low-nibble bytes of a half super-block are one load; the matching 2-bit high
//    parts come from one broadcast 32-byte qh load with per-half shift counts.
//  - Q8_0 / Q4_x: two 32-element blocks per zmm, one scale per 256-bit half.
//  - Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q4_K / Q6_K: one arithmetic for decode (vec_dot) and prefill
//    (the gemm path), chunks of 16 blocks of 32 elements with one block per float lane.
#include <cstring>
#include <type_traits>

#include "backend/cpu/quant_dot_internal.h"
#include "quant/quant_blocks.h"

#if defined(__x86_64__)
#include <immintrin.h>

namespace jllm::cpu_detail {
namespace {
// vpermw indices: int16 lane L of the Q5_K scale vector for nibble group g is scale 2g + L/16.
alignas(64) const int16_t kQ4KScaleIdx[4][32] = {
    {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
    {2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3},
    {4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5},
    {6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7}};
}  // namespace
}  // namespace jllm::cpu_detail

// Every function below carries target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"): GCC through its target pragma, clang
// through an attribute push (clang ignores the GCC pragma).
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")
#endif
// GCC 12's avx512fintrin.h initialises its "undefined" operands from themselves, which
// -Wall reports at every inlined use (GCC bug 105593, fixed in GCC 13).
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace jllm::cpu_detail {

namespace {

#define JLLM_X86_VNNI 1
#include "backend/cpu/quant_dot_x86_kernels.inc"
#undef JLLM_X86_VNNI

inline __m512i loadu512(const void* p) { return _mm512_loadu_si512(p); }

// Decode reads every weight row once, from DRAM, and the hardware prefetcher alone keeps too few
// lines in flight: on the Intel Xeon build machine Q4_K's one-token dot streamed 4.7 GB/s of the
// 10 GB/s one core reads. Each kernel asks, per block (or block pair / chunk) it consumes, for
// the lines kPrefetchAhead bytes further on: 8.6-8.9 GB/s (bench_cpu_kernels Q4_K 4096x4096,
// 1 thread; 1,152 and 4,608 bytes ahead measured 8.2-8.6). Rows are contiguous, so past a row's
// end this fetches the next row; past the matrix it is a hint that cannot fault. No arithmetic
// changes.
constexpr size_t kPrefetchAhead = 2048;
template <size_t Bytes>
inline void prefetch_ahead(const void* p) {
    const char* c = static_cast<const char*>(p) + kPrefetchAhead;
    for (size_t o = 0; o < Bytes; o += 64) _mm_prefetch(c + o, _MM_HINT_T0);
}

// The NA activation rows of a dot product call, as bytes av + t * as.
template <int NA, class A>
inline void token_rows(const void* av, size_t as, const A** a) {
    for (int t = 0; t < NA; t++) a[t] = reinterpret_cast<const A*>(static_cast<const char*>(av) + t * as);
}

// Two 256-bit halves -> one zmm.
inline __m512i join256(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }

// Q5_K: per super-block, each 32-byte group g of nibbles is broadcast to both halves of a zmm
// and the upper half shifted right by 4, so the register holds elements 64g .. 64g+63 and
// matches one 64-byte activation load; the fifth bit: qh is broadcast to both halves once per
// super-block and bit 2g (lower half) / 2g + 1 (upper half) of each byte tested into a byte
// mask; the sub-block scales are spread over int16 lanes by vpermw.
template <int NA>
void dot_q5_k_512(int64_t n, const void* wv, const void* av, size_t as, float* out) {
    const BlockQ5_K* w = static_cast<const BlockQ5_K*>(wv);
    const BlockQ8_K* a[NA];
    token_rows<NA>(av, as, a);
    __m512 acc[NA];
    __m256 accm[NA];
    for (int t = 0; t < NA; t++) {
        acc[t] = _mm512_setzero_ps();
        accm[t] = _mm256_setzero_ps();
    }
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i b4 = _mm512_set1_epi8(0x10);
    const __m512i nib_shift = _mm512_setr_epi64(0, 0, 0, 0, 4, 4, 4, 4);
    for (int64_t i = 0; i < n / QK_K; i++) {
        prefetch_ahead<sizeof(*w)>(w + i);
        const __m128i sm128 = scales_mins_k4(w[i].scales);                         // scales[8], mins[8]
        const __m512i sc = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(sm128));  // int16 lanes 0..7: scales
        const __m256i mins = mins_dup16(sm128);
        const __m512i qh = _mm512_broadcast_i64x4(loadu(w[i].qh));
        __m512i sumi[NA];
        for (int t = 0; t < NA; t++) sumi[t] = _mm512_setzero_si512();
        for (int g = 0; g < 4; g++) {
            const __m512i q = _mm512_broadcast_i64x4(loadu(w[i].qs + 32 * g));
            const __m512i bits = join256(_mm256_set1_epi8(static_cast<char>(1 << (2 * g))),
                                         _mm256_set1_epi8(static_cast<char>(1 << (2 * g + 1))));
            const __mmask64 hb = _mm512_test_epi8_mask(qh, bits);
            const __m512i lo4 = _mm512_and_si512(_mm512_srlv_epi64(q, nib_shift), m4);
            const __m512i v = _mm512_mask_add_epi8(lo4, hb, lo4, b4);  // elements 64g .. 64g+63, 0..31
            const __m512i s = _mm512_permutexvar_epi16(loadu512(kQ4KScaleIdx[g]), sc);
            for (int t = 0; t < NA; t++) {
                sumi[t] = _mm512_dpwssd_epi32(sumi[t], _mm512_maddubs_epi16(v, loadu512(a[t][i].qs + 64 * g)), s);
            }
        }
        const float dw = h2f(w[i].d), dmw = h2f(w[i].dmin);
        for (int t = 0; t < NA; t++) {
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi[t]), _mm512_set1_ps(dw * a[t][i].d), acc[t]);
            const __m256i mm = _mm256_madd_epi16(mins, loadu(a[t][i].bsums));
            accm[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mm), _mm256_set1_ps(dmw * a[t][i].d), accm[t]);
        }
    }
    for (int t = 0; t < NA; t++) out[t] = _mm512_reduce_add_ps(acc[t]) - hsum_ps(accm[t]);
}

// zmm whose lanes 0..7 are lane 0 of v and lanes 8..15 lane 2 of v.
inline __m512 spread02(__m128 v) {
    const __m512i idx = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2);
    return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(v));
}

template <int NA>
void dot_q8_0_512(int64_t n, const void* wv, const void* av, size_t as, float* out) {
    const BlockQ8_0* w = static_cast<const BlockQ8_0*>(wv);
    const BlockQ8_0* a[NA];
    token_rows<NA>(av, as, a);
    __m512 acc[NA];
    for (int t = 0; t < NA; t++) acc[t] = _mm512_setzero_ps();
    const int64_t nb = n / QK8_0;
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        prefetch_ahead<2 * sizeof(*w)>(w + i);
        const __m512i wq = join256(loadu(w[i].qs), loadu(w[i + 1].qs));
        const __m512i wabs = _mm512_abs_epi8(wq);
        const __mmask64 neg = _mm512_movepi8_mask(wq);
        const __m128 dw = head2_ps(&w[i], &w[i + 1]);  // lanes 1, 3: quant bytes, unused
        for (int t = 0; t < NA; t++) {
            __m512i aq = join256(loadu(a[t][i].qs), loadu(a[t][i + 1].qs));
            aq = _mm512_mask_sub_epi8(aq, neg, _mm512_setzero_si512(), aq);  // a * sign(w)
            const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wabs, aq);
            const __m128 d = _mm_mul_ps(dw, head2_ps(&a[t][i], &a[t][i + 1]));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), spread02(d), acc[t]);
        }
    }
    float tail[NA];
    for (int t = 0; t < NA; t++) tail[t] = 0.0f;
    if (i < nb) dot_q8_0<NA>(QK8_0, w + i, a[0] + i, as, tail);
    for (int t = 0; t < NA; t++) out[t] = _mm512_reduce_add_ps(acc[t]) + tail[t];
}

// ---- Q4_0 / Q4_1 / Q5_0 / Q5_1 against Q8_1: one arithmetic for decode and prefill ----
//
// Per (row, token) the blocks are taken 16 at a time (a chunk; the last one zero-padded), one
// block per float lane (lane l: block kBlockOfLane[l] of the chunk):
//     acc = fma(float(p), dw * da, acc);  acc = fma(cw, sa, acc);   out = reduce_add(acc)
// p: the block's exact integer sum of u * q (u the weight's unsigned 4/5-bit values, q the
// activation's int8), dw / da: the weight's and the activation's scales, cw: the coefficient of
// the activation sum (-8 dw, -16 dw, or the block's min m), sa: the activation's s. vec_dot (a
// few tokens, the row as stored) forms p with one vpdpbusd per block pair and an integer
// reduction to one lane per block; the gemm path (many tokens) unpacks a tile of rows once into
// a panel where register k holds dword k of every block of the chunk (in that lane order), packs
// each token's activations the same way, and forms p directly with 8 vpdpbusd per (row, token,
// chunk). The integer sums are exact either way, so both give the same bits.
// (Weights of up to 5 bits: u <= 31, |q| <= 127, which the reduction's int16 packs rely on.)

template <class F>
struct Q81Coef;  // cw from the gathered scale dwords: -8 dw / -16 dw, or the stored min
template <>
struct Q81Coef<FmtQ4_0> {
    static constexpr bool kMin = false;
    static constexpr float kOff = -8.0f;
};
template <>
struct Q81Coef<FmtQ5_0> {
    static constexpr bool kMin = false;
    static constexpr float kOff = -16.0f;
};
template <>
struct Q81Coef<FmtQ4_1> {
    static constexpr bool kMin = true;  // cw: the stored min
};
template <>
struct Q81Coef<FmtQ5_1> {
    static constexpr bool kMin = true;  // cw: the stored min
};

constexpr int64_t kChunkBlocks = 16;
constexpr size_t kChunkScales = 512;  // dw / da: after 8 x 64 B of quants
constexpr size_t kChunkOffsets = 576;  // cw / sa of half 0

// The gemm path's chunk layouts. A weight panel chunk: 8 x 64 B of unsigned quants (register k:
// dword k of every block, lane order kBlockOfLane), then per half h of the block (one half for
// the 32-element formats and Q4_K, two of 16 elements for Q6_K) 16 floats dw at kChunkScales +
// 128 h and 16 floats cw at kChunkOffsets + 128 h. A packed activation chunk: 8 x 64 B of int8
// quants (the same order), 16 floats da at kChunkScales, then the sa vector of each half at
// kSa[h].
struct LayoutQ81 {  // Q4_0 / Q4_1 / Q5_0 / Q5_1 against Q8_1
    static constexpr size_t kW = 640, kA = 640;
    static constexpr int kHalves = 1;
    static constexpr size_t kSa[2] = {kChunkOffsets, 0};
};
constexpr size_t kQ8KChunk = 768;  // the Q8_K activation chunk: quants, da, sa, sa_lo, sa_hi
struct LayoutQ4K {  // Q4_K against Q8_K
    static constexpr size_t kW = 640, kA = kQ8KChunk;
    static constexpr int kHalves = 1;
    static constexpr size_t kSa[2] = {kChunkOffsets, 0};
};
struct LayoutQ6K {  // Q6_K against Q8_K
    static constexpr size_t kW = 768, kA = kQ8KChunk;
    static constexpr int kHalves = 2;
    static constexpr size_t kSa[2] = {kChunkOffsets + 64, kChunkOffsets + 128};  // after sa
};

// Chunks of a row of n elements: 16 blocks of 32 each.
inline int64_t row_chunks(int64_t n) { return (n / 32 + kChunkBlocks - 1) / kChunkBlocks; }
template <size_t ChunkBytes>
size_t chunk_bytes(int64_t n) {
    return static_cast<size_t>(row_chunks(n)) * ChunkBytes;
}

// Lane l of a chunk's vectors holds block kBlockOfLane[l] (the order reduce_block_sums leaves).
alignas(64) constexpr int32_t kBlockOfLane[16] = {0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15};

// Lanes l whose block kBlockOfLane[l] < nblk: the dword at base + block * stride bytes; other
// lanes 0 (not read).
inline __m512i gather_dwords(const void* base, int stride, int64_t nblk) {
    const __m512i blk = _mm512_load_si512(kBlockOfLane);
    const __mmask16 m = _mm512_cmplt_epi32_mask(blk, _mm512_set1_epi32(static_cast<int>(nblk < 16 ? nblk : 16)));
    return _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, _mm512_mullo_epi32(blk, _mm512_set1_epi32(stride)),
                                       base, 1);
}
inline __m512 halves_lo(__m512i g) { return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(g)); }
inline __m512 halves_hi(__m512i g) { return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(g, 16))); }

// The chunk's weight scales and activation-sum coefficients, lane j = block j (0 past nblk).
template <class F>
inline void q81_wscales(const typename F::Block* b, int64_t nblk, __m512* dw, __m512* cw) {
    const __m512i g = gather_dwords(b, static_cast<int>(sizeof(typename F::Block)), nblk);  // d | m << 16
    *dw = halves_lo(g);
    if constexpr (Q81Coef<F>::kMin) {
        *cw = halves_hi(g);
    } else {
        *cw = _mm512_mul_ps(*dw, _mm512_set1_ps(Q81Coef<F>::kOff));
    }
}

// Two blocks' 4-bit values in one zmm: each block's 16 bytes go to two 128-bit lanes, the second
// shifted right by 4, so bytes 0..31 are block b0's elements 0..31 and 32..63 block b1's.
inline __m512i nibbles_pair(const uint8_t* qs0, const uint8_t* qs1) {
    const __m256i q = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs0))),
                                              _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs1)), 1);
    const __m512i x = _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 1, 0, 1, 2, 3, 2, 3), _mm512_castsi256_si512(q));
    return _mm512_and_si512(_mm512_srlv_epi64(x, _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4)), _mm512_set1_epi8(0x0F));
}
// The fifth bits of two blocks (qh: bit j = element j) added to their nibbles as 16.
inline __m512i add_high_bits_pair(__m512i v, const uint8_t* qh0, const uint8_t* qh1) {
    uint32_t h0, h1;
    std::memcpy(&h0, qh0, 4);
    std::memcpy(&h1, qh1, 4);
    const __mmask64 m = _cvtu64_mask64(static_cast<uint64_t>(h0) | (static_cast<uint64_t>(h1) << 32));
    return _mm512_mask_add_epi8(v, m, v, _mm512_set1_epi8(0x10));
}
template <class F>
inline __m512i q81_unpack_pair(const typename F::Block& b0, const typename F::Block& b1) {
    const __m512i v = nibbles_pair(b0.qs, b1.qs);
    if constexpr (std::is_same_v<F, FmtQ5_0> || std::is_same_v<F, FmtQ5_1>) {
        return add_high_bits_pair(v, b0.qh, b1.qh);
    } else {
        return v;
    }
}

// Block pair i of a chunk as 64 unsigned bytes (block 2i in the low half); missing blocks 0.
template <class F>
inline __m512i q81_wpair(const typename F::Block* b, int64_t i, int64_t nblk) {
    if (2 * i + 1 < nblk) return q81_unpack_pair<F>(b[2 * i], b[2 * i + 1]);
    if (2 * i < nblk) return _mm512_castsi256_si512(F::unpack(b[2 * i]));
    return _mm512_setzero_si512();
}
inline __m512i q81_apair(const BlockQ8_1* a, int64_t i, int64_t nblk) {
    if (2 * i + 1 < nblk) return join256(loadu(a[2 * i].qs), loadu(a[2 * i + 1].qs));
    if (2 * i < nblk) return _mm512_castsi256_si512(loadu(a[2 * i].qs));
    return _mm512_setzero_si512();
}

// P[i]: vpdpbusd sums of block pair i (block 2i in 128-bit lanes 0-1, 2i+1 in 2-3; 4 products
// per int32 lane, |sum| <= 4 * 31 * 127) -> one lane per block, lane l holding block
// kBlockOfLane[l]. Two rounds of vpackssdw + vpmaddwd (pairs of adjacent lanes added; the
// partial sums stay below 2^15, so the packs never saturate) and one round across 128-bit lanes.
// Exact.

inline __m512i pack_add_pairs(__m512i x, __m512i y) {
    return _mm512_madd_epi16(_mm512_packs_epi32(x, y), _mm512_set1_epi16(1));
}
inline __m512i reduce_block_sums(const __m512i* P) {
    const __m512i t0 = pack_add_pairs(pack_add_pairs(P[0], P[1]), pack_add_pairs(P[2], P[3]));
    const __m512i t1 = pack_add_pairs(pack_add_pairs(P[4], P[5]), pack_add_pairs(P[6], P[7]));
    // 128-bit lane q of t0, dword e: P[e]'s lane q (t1: P[4 + e]); add lanes 0+1 and 2+3
    return _mm512_add_epi32(_mm512_shuffle_i64x2(t0, t1, _MM_SHUFFLE(2, 0, 2, 0)),
                            _mm512_shuffle_i64x2(t0, t1, _MM_SHUFFLE(3, 1, 3, 1)));
}

// The canonical float step of one chunk (see above).
inline __m512 chunk_accumulate(__m512 acc, __m512i p, __m512 dw, __m512 da, __m512 cw, __m512 sa) {
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(dw, da), acc);
    return _mm512_fmadd_ps(cw, sa, acc);
}

// Where a dot product's token side comes from. kRows: the quantized rows as stored (vec_dot),
// each chunk's scales gathered from them for every weight row. kPacked: the rows packed once per
// matmul call (QuantDotPacked): per chunk the quants in their stored order (block pair i at byte
// 64 i, zeros past the row's end), then the scales as floats in lane order at the gemm layout's
// offsets, so a weight row's chunk reads them with aligned loads. The same values either way.
enum class ActSrc { kRows, kPacked };

template <class F, int NA, ActSrc kSrc>
void dot_q_x_q8_1_512(int64_t n, const void* wv, const void* av, size_t as, float* out) {
    using Block = typename F::Block;
    const Block* w = static_cast<const Block*>(wv);
    const char* a[NA];
    token_rows<NA>(av, as, a);
    __m512 acc[NA];
    for (int t = 0; t < NA; t++) acc[t] = _mm512_setzero_ps();
    const int64_t nb = n / 32;
    for (int64_t b0 = 0; b0 < nb; b0 += kChunkBlocks) {
        const int64_t nblk = nb - b0 < kChunkBlocks ? nb - b0 : kChunkBlocks;
        prefetch_ahead<kChunkBlocks * sizeof(Block)>(w + b0);
        __m512i q[8];
        for (int i = 0; i < 8; i++) q[i] = q81_wpair<F>(w + b0, i, nblk);
        __m512 dw, cw;
        q81_wscales<F>(w + b0, nblk, &dw, &cw);
        for (int t = 0; t < NA; t++) {
            __m512i P[8];
            __m512 da, sa;
            if constexpr (kSrc == ActSrc::kPacked) {
                const char* ac = a[t] + (b0 / kChunkBlocks) * LayoutQ81::kA;
                for (int i = 0; i < 8; i++) {
                    P[i] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[i], _mm512_load_si512(ac + 64 * i));
                }
                da = _mm512_load_ps(ac + kChunkScales);
                sa = _mm512_load_ps(ac + kChunkOffsets);
            } else {
                const BlockQ8_1* ab = reinterpret_cast<const BlockQ8_1*>(a[t]) + b0;
                for (int i = 0; i < 8; i++) P[i] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[i], q81_apair(ab, i, nblk));
                const __m512i g = gather_dwords(ab, static_cast<int>(sizeof(BlockQ8_1)), nblk);  // d | s << 16
                da = halves_lo(g);
                sa = halves_hi(g);
            }
            acc[t] = chunk_accumulate(acc[t], reduce_block_sums(P), dw, da, cw, sa);
        }
    }
    for (int t = 0; t < NA; t++) out[t] = _mm512_reduce_add_ps(acc[t]);
}

// The chunk transpose: x[i] holds block pair i (block 2i in dwords 0-7, 2i + 1 in 8-15); after
// it x[k] holds dword k of every block, lane l = block kBlockOfLane[l]. As bits, the dword at
// register (g, i1, i0), lane (h, k2, k1, k0) goes to register (k2, k1, k0), lane (g, h, i1, i0):
// three rounds, round b swapping register-index bit b with lane-index bit b by one two-register
// vpermt2d per output (the last round also swaps lane bits 2 and 3). 24 permutes, no gathers
// (8 vpgatherdd per chunk cost the short batches of a verify forward their packing).
struct TransposeIdx {
    int32_t a[3][16], b[3][16];  // round b's indices for the register with bit b clear / set
};
constexpr TransposeIdx make_transpose_idx() {
    TransposeIdx t{};
    for (int r = 0; r < 3; r++) {
        const int bit = 1 << r;
        for (int lane = 0; lane < 16; lane++) {
            // the last round's lane order with bits 2 and 3 swapped
            const int l = r < 2 ? lane : (lane & 3) | ((lane & 4) << 1) | ((lane & 8) >> 1);
            t.a[r][lane] = (l & bit) != 0 ? 16 + (l ^ bit) : l;
            t.b[r][lane] = (l & bit) != 0 ? 16 + l : (l ^ bit);
        }
    }
    return t;
}
alignas(64) constexpr TransposeIdx kTransposeIdx = make_transpose_idx();

inline void transpose_chunk(__m512i* x) {
    for (int r = 0; r < 3; r++) {
        const int bit = 1 << r;
        const __m512i ia = _mm512_loadu_si512(kTransposeIdx.a[r]), ib = _mm512_loadu_si512(kTransposeIdx.b[r]);
        for (int i = 0; i < 8; i++) {
            if ((i & bit) != 0) continue;
            const __m512i xa = x[i], xb = x[i | bit];
            x[i] = _mm512_permutex2var_epi32(xa, ia, xb);
            x[i | bit] = _mm512_permutex2var_epi32(xa, ib, xb);
        }
    }
}
inline void store_chunk_quants(__m512i* x, uint8_t* dst) {
    transpose_chunk(x);
    for (int k = 0; k < 8; k++) _mm512_store_si512(dst + 64 * k, x[k]);
}

// One Q8_1 activation row -> packed chunks: the gemm path's (kGemm: register k holds dword k of
// every block, lane order kBlockOfLane) or the packed dot product's (the quants in their stored
// order); then the chunk's da and sa (lane order, zeros past the row's end).
template <bool kGemm>
void q81_pack_act(int64_t n, const void* act_row, void* packed) {
    const BlockQ8_1* a = static_cast<const BlockQ8_1*>(act_row);
    uint8_t* dst = static_cast<uint8_t*>(packed);
    const int64_t nb = n / 32;
    for (int64_t b0 = 0; b0 < nb; b0 += kChunkBlocks, dst += LayoutQ81::kA) {
        const int64_t nblk = nb - b0 < kChunkBlocks ? nb - b0 : kChunkBlocks;
        for (int k = 0; k < 8; k++) {
            const __m512i v = kGemm ? gather_dwords(a[b0].qs + 4 * k, static_cast<int>(sizeof(BlockQ8_1)), nblk)
                                    : q81_apair(a + b0, k, nblk);
            _mm512_store_si512(dst + 64 * k, v);
        }
        const __m512i g = gather_dwords(a + b0, static_cast<int>(sizeof(BlockQ8_1)), nblk);  // d | s << 16
        _mm512_store_ps(dst + kChunkScales, halves_lo(g));
        _mm512_store_ps(dst + kChunkOffsets, halves_hi(g));
    }
}

template <class F>
void q81_pack_rows(int64_t n, const void* wv, size_t w_row_bytes, int n_rows, void* panel) {
    using Block = typename F::Block;
    uint8_t* dst = static_cast<uint8_t*>(panel);
    const int64_t nb = n / 32;
    for (int r = 0; r < n_rows; r++) {
        const Block* w = reinterpret_cast<const Block*>(static_cast<const char*>(wv) + r * w_row_bytes);
        for (int64_t b0 = 0; b0 < nb; b0 += kChunkBlocks, dst += LayoutQ81::kW) {
            const int64_t nblk = nb - b0 < kChunkBlocks ? nb - b0 : kChunkBlocks;
            prefetch_ahead<kChunkBlocks * sizeof(Block)>(w + b0);
            __m512i q[8];
            for (int i = 0; i < 8; i++) q[i] = q81_wpair<F>(w + b0, i, nblk);
            store_chunk_quants(q, dst);
            __m512 dw, cw;
            q81_wscales<F>(w + b0, nblk, &dw, &cw);
            _mm512_store_ps(dst + kChunkScales, dw);
            _mm512_store_ps(dst + kChunkOffsets, cw);
        }
    }
}

// R rows x T tokens of the gemm path from registers: per chunk and half, 8 / kHalves weight and
// activation loads per row / token, as many vpdpbusd per pair, then the canonical float step
// per pair (half 0 before half 1).
template <class L, int R, int T>
void gemm_tile(int64_t nch, const uint8_t* wp, const uint8_t* ap, float* y, int64_t y_stride) {
    const size_t ws = static_cast<size_t>(nch) * L::kW, as = static_cast<size_t>(nch) * L::kA;
    constexpr int K = 8 / L::kHalves;
    __m512 acc[R][T];
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++) acc[r][t] = _mm512_setzero_ps();
    for (int64_t c = 0; c < nch; c++) {
        const uint8_t* wc = wp + static_cast<size_t>(c) * L::kW;
        const uint8_t* ac = ap + static_cast<size_t>(c) * L::kA;
        for (int h = 0; h < L::kHalves; h++) {
            __m512i p[R][T];
            for (int r = 0; r < R; r++)
                for (int t = 0; t < T; t++) p[r][t] = _mm512_setzero_si512();
            for (int k = h * K; k < (h + 1) * K; k++) {
                __m512i wk[R];
                for (int r = 0; r < R; r++) wk[r] = _mm512_load_si512(wc + r * ws + 64 * k);
                for (int t = 0; t < T; t++) {
                    const __m512i ak = _mm512_load_si512(ac + t * as + 64 * k);
                    for (int r = 0; r < R; r++) p[r][t] = _mm512_dpbusd_epi32(p[r][t], wk[r], ak);
                }
            }
            for (int r = 0; r < R; r++) {
                const __m512 dw = _mm512_load_ps(wc + r * ws + kChunkScales + 128 * h);
                const __m512 cw = _mm512_load_ps(wc + r * ws + kChunkOffsets + 128 * h);
                for (int t = 0; t < T; t++) {
                    acc[r][t] = chunk_accumulate(acc[r][t], p[r][t], dw, _mm512_load_ps(ac + t * as + kChunkScales), cw,
                                                 _mm512_load_ps(ac + t * as + L::kSa[h]));
                }
            }
        }
    }
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++) y[t * y_stride + r] = _mm512_reduce_add_ps(acc[r][t]);
}

constexpr int kGemmRows = 4;
constexpr int kGemmTokens = 3;

template <class L, int R>
void gemm_rows(int64_t nch, const uint8_t* wp, const uint8_t* ap, int64_t n_tokens, float* y, int64_t y_stride) {
    const size_t as = static_cast<size_t>(nch) * L::kA;
    int64_t t = 0;
    for (; t + kGemmTokens <= n_tokens; t += kGemmTokens) {
        gemm_tile<L, R, kGemmTokens>(nch, wp, ap + t * as, y + t * y_stride, y_stride);
    }
    if (n_tokens - t == 2) gemm_tile<L, R, 2>(nch, wp, ap + t * as, y + t * y_stride, y_stride);
    if (n_tokens - t == 1) gemm_tile<L, R, 1>(nch, wp, ap + t * as, y + t * y_stride, y_stride);
}

template <class L>
void gemm_run(int64_t n, const void* panel, int n_rows, const void* packed, int64_t n_tokens, float* y,
              int64_t y_stride) {
    const int64_t nch = row_chunks(n);
    const uint8_t* wp = static_cast<const uint8_t*>(panel);
    const uint8_t* ap = static_cast<const uint8_t*>(packed);
    switch (n_rows) {
        case 1: gemm_rows<L, 1>(nch, wp, ap, n_tokens, y, y_stride); break;
        case 2: gemm_rows<L, 2>(nch, wp, ap, n_tokens, y, y_stride); break;
        case 3: gemm_rows<L, 3>(nch, wp, ap, n_tokens, y, y_stride); break;
        default: gemm_rows<L, 4>(nch, wp, ap, n_tokens, y, y_stride); break;
    }
}

// min_tokens: where the gemm path beats vec_dot (4 tokens per call, so 5-7 tokens cost it a
// second pass). Speculative decoding's verification forwards, `jllm-bench --verify -t 2` on the
// Intel Xeon build machine (2026-12-03), x one-token step, vec_dot only / gemm from 2 tokens:
// SmolLM2 Q4_1 3 tokens 1.71 / 1.62, 4: 2.05 / 1.83, 5: 2.72 / 2.07; Qwen2.5-1.5B (Q4_K / Q6_K)
// 2: 1.21 / 1.49, 3: 1.51 / 1.68, 4: 1.80 / 1.78, 5: 2.50 / 1.88, 8: 3.32 / 2.39. So the
// 32-element formats take it from 4 tokens, the K-quants from 5.
template <class L>
constexpr QuantGemm make_gemm(int64_t min_tokens, void (*pack_act)(int64_t, const void*, void*),
                              void (*pack_rows)(int64_t, const void*, size_t, int, void*)) {
    QuantGemm g;
    g.min_tokens = min_tokens;
    g.rows_per_panel = kGemmRows;
    g.act_bytes = &chunk_bytes<L::kA>;
    g.row_bytes = &chunk_bytes<L::kW>;
    g.pack_act = pack_act;
    g.pack_rows = pack_rows;
    g.run = &gemm_run<L>;
    return g;
}
constexpr QuantGemm kGemmQ4_0 = make_gemm<LayoutQ81>(4, &q81_pack_act<true>, &q81_pack_rows<FmtQ4_0>);
constexpr QuantGemm kGemmQ4_1 = make_gemm<LayoutQ81>(4, &q81_pack_act<true>, &q81_pack_rows<FmtQ4_1>);
constexpr QuantGemm kGemmQ5_0 = make_gemm<LayoutQ81>(4, &q81_pack_act<true>, &q81_pack_rows<FmtQ5_0>);
constexpr QuantGemm kGemmQ5_1 = make_gemm<LayoutQ81>(4, &q81_pack_act<true>, &q81_pack_rows<FmtQ5_1>);

// ---- Q4_K / Q6_K against Q8_K: one arithmetic for decode and prefill ----
//
// The same chunks as above: 16 blocks of 32 elements, two super-blocks (blocks 0-7: super-block
// 2c, 8-15: 2c+1, zeros past the row's end), one block per float lane (kBlockOfLane). Per
// (row, token) and chunk, in this order:
//   Q4_K:  acc = fma(float(p), dw * da, acc);  acc = fma(cw, sa, acc)
//          p: the block's exact integer sum of u * q (u in 0..15), dw = d * scale, cw = -dmin *
//          min (both exact: an fp16 times a 6-bit integer), da: the activation super-block's d,
//          sa = float(bsum) * da with bsum the block's 32 activation quants summed.
//   Q6_K:  the same step for each half h = 0, 1 of the block (16 elements, one int8 scale each):
//          p_h over u in 0..63 (the stored values, +32), dw_h = d * scale_h, cw_h = -32 dw_h,
//          sa_h = float(bsum_h) * da.
// vec_dot forms p from the row as stored (one vpdpbusd per block pair and an exact reduction to
// one lane per block or half); the gemm path from the panels above. Q4_K and Q6_K pack the
// activations the same way, so a fused Q4_K / Q6_K matmul (a Q4_K_M attention block) shares them.

// Lane l, half h: the index of half h of block kBlockOfLane[l] among two super-blocks' 32
// per-16 values (bsums or Q6_K scales; super-block 1's from 16).
struct HalfOfLane {
    int32_t idx[2][16];
};
constexpr HalfOfLane make_half_of_lane() {
    HalfOfLane t{};
    for (int h = 0; h < 2; h++) {
        for (int l = 0; l < 16; l++) t.idx[h][l] = 16 * (kBlockOfLane[l] / 8) + 2 * (kBlockOfLane[l] % 8) + h;
    }
    return t;
}
alignas(64) constexpr HalfOfLane kHalfOfLane = make_half_of_lane();
static_assert(kHalfOfLane.idx[0][4] == 2 && kHalfOfLane.idx[1][8] == 17 && kHalfOfLane.idx[1][15] == 31,
              "lane l, half h: 16 (block / 8) + 2 (block % 8) + h");

// Lanes 0-7: x0, lanes 8-15: x1.
inline __m512 split_ps(float x0, float x1) { return _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(x0), _mm512_set1_ps(x1)); }

// Per-16 values of two super-blocks (v0, v1: 16 int32 lanes each, index 2 b + h for half h of
// block b) -> lane order kBlockOfLane, half h.
inline __m512i halves_of_lanes(__m512i v0, __m512i v1, int h) {
    return _mm512_permutex2var_epi32(v0, _mm512_load_si512(kHalfOfLane.idx[h]), v1);
}

// The activation side of a chunk of nsb (1 or 2) super-blocks: da, sa (whole blocks) and sa_lo /
// sa_hi (halves), lane order kBlockOfLane, zeros past nsb.
struct Q8KChunk {
    __m512 da, sa, sa_lo, sa_hi;
};
inline Q8KChunk q8k_chunk(const BlockQ8_K* a, int64_t nsb) {
    const __m512i b0 = _mm512_cvtepi16_epi32(loadu(a[0].bsums));
    const __m512i b1 = nsb > 1 ? _mm512_cvtepi16_epi32(loadu(a[1].bsums)) : _mm512_setzero_si512();
    const __m512i lo = halves_of_lanes(b0, b1, 0), hi = halves_of_lanes(b0, b1, 1);
    Q8KChunk c;
    c.da = split_ps(a[0].d, nsb > 1 ? a[1].d : 0.0f);
    c.sa = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(lo, hi)), c.da);
    c.sa_lo = _mm512_mul_ps(_mm512_cvtepi32_ps(lo), c.da);
    c.sa_hi = _mm512_mul_ps(_mm512_cvtepi32_ps(hi), c.da);
    return c;
}
// The scale vectors of a packed Q8_K chunk (q8k_pack_act's).
inline Q8KChunk q8k_load_chunk(const char* pc) {
    Q8KChunk c;
    c.da = _mm512_load_ps(pc + kChunkScales);
    c.sa = _mm512_load_ps(pc + kChunkOffsets);
    c.sa_lo = _mm512_load_ps(pc + LayoutQ6K::kSa[0]);
    c.sa_hi = _mm512_load_ps(pc + LayoutQ6K::kSa[1]);
    return c;
}
// Activation block pair i of a chunk (blocks 2i, 2i + 1: 64 consecutive quants).
inline __m512i q8k_apair(const BlockQ8_K* a, int i, int64_t nsb) {
    return i / 4 < nsb ? loadu512(a[i / 4].qs + 64 * (i % 4)) : _mm512_setzero_si512();
}

// Q4_K: the 8 block pairs of a chunk as unsigned bytes (pair 4s + g: nibble group g of
// super-block s, elements 64g .. 64g+63) and the dw / cw vectors.
inline void q4k_wchunk(const BlockQ4_K* w, int64_t nsb, __m512i* q, __m512* dw, __m512* cw) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i nib_shift = _mm512_setr_epi64(0, 0, 0, 0, 4, 4, 4, 4);
    for (int i = 0; i < 8; i++) {
        q[i] = i / 4 < nsb ? _mm512_and_si512(_mm512_srlv_epi64(_mm512_broadcast_i64x4(loadu(w[i / 4].qs + 32 * (i % 4))), nib_shift), m4)
                           : _mm512_setzero_si512();
    }
    const __m128i sm0 = scales_mins_k4(w[0].scales);  // scales[8], mins[8]
    const __m128i sm1 = nsb > 1 ? scales_mins_k4(w[1].scales) : _mm_setzero_si128();
    const __m512i lanes = _mm512_load_si512(kBlockOfLane);
    const __m512i sc = _mm512_permutexvar_epi32(lanes, _mm512_cvtepu8_epi32(_mm_unpacklo_epi64(sm0, sm1)));
    const __m512i mn = _mm512_permutexvar_epi32(lanes, _mm512_cvtepu8_epi32(_mm_unpackhi_epi64(sm0, sm1)));
    *dw = _mm512_mul_ps(_mm512_cvtepi32_ps(sc), split_ps(h2f(w[0].d), nsb > 1 ? h2f(w[1].d) : 0.0f));
    *cw = _mm512_mul_ps(_mm512_cvtepi32_ps(mn), split_ps(-h2f(w[0].dmin), nsb > 1 ? -h2f(w[1].dmin) : 0.0f));
}

// Q6_K: the 8 block pairs of a chunk as unsigned bytes 0..63 (pair 4s + 2h: elements
// 128h + [0, 64) of super-block s, pair 4s + 2h + 1: 128h + [64, 128)) and dw / cw per half.
inline void q6k_wchunk(const BlockQ6_K* w, int64_t nsb, __m512i* q, __m512* dw, __m512* cw) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i m30 = _mm512_set1_epi8(0x30);
    const __m512i shl = _mm512_setr_epi64(4, 4, 4, 4, 2, 2, 2, 2);  // qh bits 0-1 / 2-3 -> 4-5
    const __m512i shr = _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2);  // qh bits 4-5 / 6-7 -> 4-5
    for (int s = 0; s < 2; s++) {
        for (int h = 0; h < 2; h++) {
            if (s >= nsb) {
                q[4 * s + 2 * h] = q[4 * s + 2 * h + 1] = _mm512_setzero_si512();
                continue;
            }
            const __m512i ql = loadu512(w[s].ql + 64 * h);
            const __m512i qh = _mm512_broadcast_i64x4(loadu(w[s].qh + 32 * h));
            q[4 * s + 2 * h] = _mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_and_si512(_mm512_sllv_epi64(qh, shl), m30));
            q[4 * s + 2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                                   _mm512_and_si512(_mm512_srlv_epi64(qh, shr), m30));
        }
    }
    const __m512i s0 = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w[0].scales)));
    const __m512i s1 = nsb > 1 ? _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w[1].scales)))
                               : _mm512_setzero_si512();
    const __m512 d = split_ps(h2f(w[0].d), nsb > 1 ? h2f(w[1].d) : 0.0f);
    for (int h = 0; h < 2; h++) {
        dw[h] = _mm512_mul_ps(_mm512_cvtepi32_ps(halves_of_lanes(s0, s1, h)), d);
        cw[h] = _mm512_mul_ps(dw[h], _mm512_set1_ps(-32.0f));
    }
}

// P[i]: vpdpbusd sums of block pair i (128-bit lane q: elements 16q .. 16q+15 of the pair, i.e.
// half q % 2 of block 2i + q / 2; |lane| <= 4 * 63 * 127 < 2^15) -> one lane per block half, in
// kBlockOfLane order: lo (elements 0-15) and hi (16-31). One round of vpackssdw + vpmaddwd (no
// saturation below 2^15), one of adjacent-lane int32 adds, one across 128-bit lanes. Exact.
inline __m512i add_adjacent_epi32(__m512i a, __m512i b) {  // per 128-bit lane [a0+a1, a2+a3, b0+b1, b2+b3]
    const __m512 fa = _mm512_castsi512_ps(a), fb = _mm512_castsi512_ps(b);
    return _mm512_add_epi32(_mm512_castps_si512(_mm512_shuffle_ps(fa, fb, _MM_SHUFFLE(2, 0, 2, 0))),
                            _mm512_castps_si512(_mm512_shuffle_ps(fa, fb, _MM_SHUFFLE(3, 1, 3, 1))));
}
inline void reduce_half_sums(const __m512i* P, __m512i* lo, __m512i* hi) {
    const __m512i s0 = add_adjacent_epi32(pack_add_pairs(P[0], P[1]), pack_add_pairs(P[2], P[3]));
    const __m512i s1 = add_adjacent_epi32(pack_add_pairs(P[4], P[5]), pack_add_pairs(P[6], P[7]));
    // 128-bit lane q of s0, dword e: pair e's lane q (s1: pair 4 + e)
    *lo = _mm512_shuffle_i64x2(s0, s1, _MM_SHUFFLE(2, 0, 2, 0));
    *hi = _mm512_shuffle_i64x2(s0, s1, _MM_SHUFFLE(3, 1, 3, 1));
}

// Q4_K / Q6_K (Block) against Q8_K: the chunk arithmetic above, from the rows as stored and
// the activations as kSrc says (the packed chunks: LayoutQ4K's kA with the quants in their
// stored order).
template <class Block, int NA, ActSrc kSrc>
void dot_k_q8_k_512(int64_t n, const void* wv, const void* av, size_t as, float* out) {
    constexpr bool kQ6 = std::is_same_v<Block, BlockQ6_K>;
    const Block* w = static_cast<const Block*>(wv);
    const char* a[NA];
    token_rows<NA>(av, as, a);
    __m512 acc[NA];
    for (int t = 0; t < NA; t++) acc[t] = _mm512_setzero_ps();
    const int64_t nsb = n / QK_K;
    for (int64_t s0 = 0; s0 < nsb; s0 += 2) {
        const int64_t m = nsb - s0 < 2 ? 1 : 2;
        prefetch_ahead<2 * sizeof(Block)>(w + s0);
        __m512i q[8];
        __m512 dw[2], cw[2];
        if constexpr (kQ6) {
            q6k_wchunk(w + s0, m, q, dw, cw);
        } else {
            q4k_wchunk(w + s0, m, q, dw, cw);
        }
        for (int t = 0; t < NA; t++) {
            __m512i P[8];
            Q8KChunk ac;
            if constexpr (kSrc == ActSrc::kPacked) {
                const char* pc = a[t] + (s0 / 2) * kQ8KChunk;
                for (int i = 0; i < 8; i++) P[i] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[i], _mm512_load_si512(pc + 64 * i));
                ac = q8k_load_chunk(pc);
            } else {
                const BlockQ8_K* ab = reinterpret_cast<const BlockQ8_K*>(a[t]) + s0;
                for (int i = 0; i < 8; i++) P[i] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[i], q8k_apair(ab, i, m));
                ac = q8k_chunk(ab, m);
            }
            if constexpr (kQ6) {
                __m512i lo, hi;
                reduce_half_sums(P, &lo, &hi);
                acc[t] = chunk_accumulate(acc[t], lo, dw[0], ac.da, cw[0], ac.sa_lo);
                acc[t] = chunk_accumulate(acc[t], hi, dw[1], ac.da, cw[1], ac.sa_hi);
            } else {
                acc[t] = chunk_accumulate(acc[t], reduce_block_sums(P), dw[0], ac.da, cw[0], ac.sa);
            }
        }
    }
    for (int t = 0; t < NA; t++) out[t] = _mm512_reduce_add_ps(acc[t]);
}

// One Q8_K activation row -> packed chunks (LayoutQ4K / LayoutQ6K's kA): the gemm path's
// (kGemm: the quants transposed as the weight panels are) or the packed dot product's (the quants
// in their stored order); then the chunk's da, sa, sa_lo and sa_hi.
template <bool kGemm>
void q8k_pack_act(int64_t n, const void* act_row, void* packed) {
    const BlockQ8_K* a = static_cast<const BlockQ8_K*>(act_row);
    uint8_t* dst = static_cast<uint8_t*>(packed);
    const int64_t nsb = n / QK_K;
    for (int64_t s0 = 0; s0 < nsb; s0 += 2, dst += kQ8KChunk) {
        const int64_t m = nsb - s0 < 2 ? 1 : 2;
        __m512i q[8];
        for (int i = 0; i < 8; i++) q[i] = q8k_apair(a + s0, i, m);
        if constexpr (kGemm) {
            store_chunk_quants(q, dst);
        } else {
            for (int i = 0; i < 8; i++) _mm512_store_si512(dst + 64 * i, q[i]);
        }
        const Q8KChunk c = q8k_chunk(a + s0, m);
        _mm512_store_ps(dst + kChunkScales, c.da);
        _mm512_store_ps(dst + kChunkOffsets, c.sa);
        _mm512_store_ps(dst + LayoutQ6K::kSa[0], c.sa_lo);
        _mm512_store_ps(dst + LayoutQ6K::kSa[1], c.sa_hi);
    }
}

template <class Block>
void k_pack_rows(int64_t n, const void* wv, size_t w_row_bytes, int n_rows, void* panel) {
    constexpr bool kQ6 = std::is_same_v<Block, BlockQ6_K>;
    constexpr size_t kW = kQ6 ? LayoutQ6K::kW : LayoutQ4K::kW;
    uint8_t* dst = static_cast<uint8_t*>(panel);
    const int64_t nsb = n / QK_K;
    for (int r = 0; r < n_rows; r++) {
        const Block* w = reinterpret_cast<const Block*>(static_cast<const char*>(wv) + r * w_row_bytes);
        for (int64_t s0 = 0; s0 < nsb; s0 += 2, dst += kW) {
            const int64_t m = nsb - s0 < 2 ? 1 : 2;
            prefetch_ahead<2 * sizeof(Block)>(w + s0);
            __m512i q[8];
            __m512 dw[2], cw[2];
            if constexpr (kQ6) {
                q6k_wchunk(w + s0, m, q, dw, cw);
            } else {
                q4k_wchunk(w + s0, m, q, dw, cw);
            }
            store_chunk_quants(q, dst);
            for (int h = 0; h < (kQ6 ? 2 : 1); h++) {
                _mm512_store_ps(dst + kChunkScales + 128 * h, dw[h]);
                _mm512_store_ps(dst + kChunkOffsets + 128 * h, cw[h]);
            }
        }
    }
}

constexpr QuantGemm kGemmQ4_K = make_gemm<LayoutQ4K>(5, &q8k_pack_act<true>, &k_pack_rows<BlockQ4_K>);
constexpr QuantGemm kGemmQ6_K = make_gemm<LayoutQ6K>(5, &q8k_pack_act<true>, &k_pack_rows<BlockQ6_K>);

#define JLLM_K1(NAME, FN)                                                               \
    struct NAME {                                                                       \
        template <int NA>                                                               \
        static void run(int64_t n, const void* w, const void* a, size_t as, float* o) { \
            FN<NA>(n, w, a, as, o);                                                     \
        }                                                                               \
    };
JLLM_K1(KQ5_K_512, dot_q5_k_512)
JLLM_K1(KQ8_0_512, dot_q8_0_512)
#define JLLM_KS(NAME, FN, ARG)                                                          \
    template <ActSrc kSrc>                                                              \
    struct NAME {                                                                       \
        template <int NA>                                                               \
        static void run(int64_t n, const void* w, const void* a, size_t as, float* o) { \
            FN<ARG, NA, kSrc>(n, w, a, as, o);                                          \
        }                                                                               \
    };
JLLM_KS(KQ4_K_512, dot_k_q8_k_512, BlockQ4_K)
JLLM_KS(KQ6_K_512, dot_k_q8_k_512, BlockQ6_K)
JLLM_KS(KQ4_0_512, dot_q_x_q8_1_512, FmtQ4_0)
JLLM_KS(KQ4_1_512, dot_q_x_q8_1_512, FmtQ4_1)
JLLM_KS(KQ5_0_512, dot_q_x_q8_1_512, FmtQ5_0)
JLLM_KS(KQ5_1_512, dot_q_x_q8_1_512, FmtQ5_1)
#undef JLLM_K1
#undef JLLM_KS

// The dot products over activations packed once per matmul call: kernel K<kPacked>, its chunk
// bytes and packer.
template <template <ActSrc> class K, size_t ChunkBytes, void (*Pack)(int64_t, const void*, void*)>
constexpr QuantDotPacked kPacked{&chunk_bytes<ChunkBytes>, Pack, &by_n_act<K<ActSrc::kPacked>>};

}  // namespace

}  // namespace jllm::cpu_detail

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif

namespace jllm::cpu_detail {

VecDotFn vec_dot_avx512(GgmlType w_type) {
    switch (w_type) {
        case GgmlType::Q4_0: return &by_n_act<KQ4_0_512<ActSrc::kRows>>;
        case GgmlType::Q4_1: return &by_n_act<KQ4_1_512<ActSrc::kRows>>;
        case GgmlType::Q5_0: return &by_n_act<KQ5_0_512<ActSrc::kRows>>;
        case GgmlType::Q5_1: return &by_n_act<KQ5_1_512<ActSrc::kRows>>;
        case GgmlType::Q8_0: return &by_n_act<KQ8_0_512>;
        case GgmlType::Q2_K: return &by_n_act<KQ2_K>;
        case GgmlType::Q3_K: return &by_n_act<KQ3_K>;
        case GgmlType::Q4_K: return &by_n_act<KQ4_K_512<ActSrc::kRows>>;
        case GgmlType::Q5_K: return &by_n_act<KQ5_K_512>;
        case GgmlType::Q6_K: return &by_n_act<KQ6_K_512<ActSrc::kRows>>;
        case GgmlType::F32: return &by_n_act<KF32>;
        case GgmlType::F16: return &by_n_act<KF16>;
        case GgmlType::BF16: return &by_n_act<KBF16>;
        default: return nullptr;
    }
}

const QuantGemm* gemm_avx512(GgmlType w_type) {
    switch (w_type) {
        case GgmlType::Q4_0: return &kGemmQ4_0;
        case GgmlType::Q4_1: return &kGemmQ4_1;
        case GgmlType::Q5_0: return &kGemmQ5_0;
        case GgmlType::Q5_1: return &kGemmQ5_1;
        case GgmlType::Q4_K: return &kGemmQ4_K;
        case GgmlType::Q6_K: return &kGemmQ6_K;
        default: return nullptr;
    }
}

const QuantDotPacked* packed_avx512(GgmlType w_type) {
    switch (w_type) {
        case GgmlType::Q4_0: return &kPacked<KQ4_0_512, LayoutQ81::kA, &q81_pack_act<false>>;
        case GgmlType::Q4_1: return &kPacked<KQ4_1_512, LayoutQ81::kA, &q81_pack_act<false>>;
        case GgmlType::Q5_0: return &kPacked<KQ5_0_512, LayoutQ81::kA, &q81_pack_act<false>>;
        case GgmlType::Q5_1: return &kPacked<KQ5_1_512, LayoutQ81::kA, &q81_pack_act<false>>;
        case GgmlType::Q4_K: return &kPacked<KQ4_K_512, kQ8KChunk, &q8k_pack_act<false>>;
        case GgmlType::Q6_K: return &kPacked<KQ6_K_512, kQ8KChunk, &q8k_pack_act<false>>;
        default: return nullptr;
    }
}

QuantizeActFn quantize_act_avx512(GgmlType act_type) {
    switch (act_type) {
        case GgmlType::Q8_0: return &quantize_q8_0;
        case GgmlType::Q8_1: return &quantize_q8_1;
        case GgmlType::Q8_K: return &quantize_q8_k;
        default: return nullptr;
    }
}

}  // namespace jllm::cpu_detail

#else  // !__x86_64__

namespace jllm::cpu_detail {
VecDotFn vec_dot_avx512(GgmlType) { return nullptr; }
const QuantGemm* gemm_avx512(GgmlType) { return nullptr; }
const QuantDotPacked* packed_avx512(GgmlType) { return nullptr; }
QuantizeActFn quantize_act_avx512(GgmlType) { return nullptr; }
}  // namespace jllm::cpu_detail

#endif  // __x86_64__
