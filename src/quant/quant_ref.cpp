// quant/quant_ref.cpp — scalar reference dequantizers and quantizers for every block type.
//
// The dequantizers are the oracle for every SIMD and CUDA kernel, so each one is written as a
// loop over the elements of a block in output order, reading each element's bits from the
// place the GGUF format puts them.
//
// Exactness: in every fp16-scaled format each product is exact in float32, because the
// significant bits add up to at most 24: fp16 d (11 bits) x 6-bit sub-block scale x 5-bit q
// (Q4_K/Q5_K: 22), x int8 scale (7) x 6-bit q (Q6_K: 23), x int8 q (Q8_0: 18). So the only
// rounding is the final add of the min (Q4_1, Q5_1, Q2_K, Q4_K, Q5_K); the values do not
// depend on the order of the multiplications nor on FMA contraction, and a kernel computing
// the same formula in any order, with or without fma, must match these bit for bit. (Q8_K has
// a float32 d: one rounded product.) The `gguf` Python package agrees bit for bit.
//
// The quantizers are references for quality, not speed. Q4_0..Q8_1 and Q8_K use the classic
// max-abs / min-max rules of their formats; the k-quants (Q2_K..Q6_K) pick each sub-block's
// scale (and min) by a least-squares search over candidate grids, then quantize the sub-block
// scales against a super-block scale and re-assign every element to its nearest level on the
// final, stored grid.
#include "quant/quant_ref.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace jllm {

namespace {

// Number of blocks in a row of k elements; k must be a whole number of blocks (callers check
// user-provided sizes with row_size(), which throws, so a bad k here is a program bug).
int64_t block_count(int64_t k, int64_t block_size) {
    JLLM_ASSERT_MSG(k >= 0 && k % block_size == 0, "row is not a whole number of blocks");
    return k / block_size;
}

// Round half away from zero (as C's roundf), clamped to [lo, hi].
int round_clamp(float v, int lo, int hi) {
    const float r = std::round(v);
    if (!(r >= static_cast<float>(lo))) return lo;  // also maps NaN to lo
    if (r > static_cast<float>(hi)) return hi;
    return static_cast<int>(r);
}

// Value as stored in an fp16 scale field (the quantizers work with the rounded scale so the
// elements are fitted to the grid the dequantizer will actually use).
float fp16_round(float v) { return fp16_to_f32(f32_to_fp16(v)); }

// ---- element-position helpers: where element e (0..255) of a k-quant block lives ----

// 2-bit fields packed four to a byte (Q2_K qs, Q3_K qs, Q6_K qh): the block is two halves of
// 128 elements; in half h, element 32*s + l sits in byte 32*h + l at bits [2s, 2s+1].
inline int crumb_byte(int e) { return (e / 128) * 32 + (e % 32); }
inline int crumb_shift(int e) { return 2 * ((e % 128) / 32); }

// One bit per element (Q3_K hmask, Q5_K qh): element e is bit e/32 of byte e%32.
inline int bit_byte(int e) { return e % 32; }
inline int bit_shift(int e) { return e / 32; }

// Nibbles of Q4_K / Q5_K qs: chunks of 64 elements; in chunk c, element l (0..31) is the low
// nibble of byte 32*c + l and element 32 + l the high nibble.
inline int nib32_byte(int e) { return (e / 64) * 32 + (e % 32); }
inline int nib32_shift(int e) { return 4 * ((e % 64) / 32); }

// Nibbles of Q6_K ql: halves of 128; in half h, element l (0..63) is the low nibble of byte
// 64*h + l and element 64 + l the high nibble.
inline int nib64_byte(int e) { return (e / 128) * 64 + (e % 64); }
inline int nib64_shift(int e) { return 4 * ((e % 128) / 64); }

// The 16 6-bit scales of Q3_K (stored biased by +32): scale j has its low 4 bits in the low
// nibble of byte j (j < 8) or the high nibble of byte j - 8 (j >= 8), and its high 2 bits in
// byte 8 + j%4 at bits [2*(j/4), 2*(j/4)+1].
int q3k_scale(const uint8_t* sc, int j) {
    const int lo = (j < 8) ? (sc[j] & 0xF) : (sc[j - 8] >> 4);
    const int hi = (sc[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (lo | (hi << 4)) - 32;
}

void set_q3k_scale(uint8_t* sc, int j, int value) {
    const int v = value + 32;  // 0..63
    if (j < 8) {
        sc[j] = static_cast<uint8_t>((sc[j] & 0xF0) | (v & 0xF));
    } else {
        sc[j - 8] = static_cast<uint8_t>((sc[j - 8] & 0x0F) | ((v & 0xF) << 4));
    }
    const int sh = 2 * (j / 4);
    sc[8 + j % 4] = static_cast<uint8_t>((sc[8 + j % 4] & ~(3 << sh)) | (((v >> 4) & 3) << sh));
}

// Inverse of get_scale_min_k4: packs eight 6-bit scales and mins into 12 bytes.
void pack_scale_min_k4(const uint8_t* sc, const uint8_t* mn, uint8_t* q) {
    for (int j = 0; j < 4; ++j) {
        q[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
        q[j + 4] = static_cast<uint8_t>((mn[j] & 63) | ((mn[j + 4] >> 4) << 6));
        q[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0xF) | ((mn[j + 4] & 0xF) << 4));
    }
}

// ---- sub-block fitting for the k-quant quantizers ----

// Least-squares (s, b) for x ~ s * q + b given the levels q, with b <= 0 (the format can
// only subtract an unsigned min). Returns false when the levels do not determine a scale.
bool solve_scale_offset(const float* x, const int* q, int n, double* s_out, double* b_out) {
    double sq = 0, sqq = 0, sx = 0, sxq = 0;
    for (int i = 0; i < n; ++i) {
        sq += q[i];
        sqq += static_cast<double>(q[i]) * q[i];
        sx += x[i];
        sxq += static_cast<double>(x[i]) * q[i];
    }
    const double det = n * sqq - sq * sq;
    if (det <= 0) return false;
    double s = (n * sxq - sq * sx) / det;
    double b = (sqq * sx - sq * sxq) / det;
    if (b > 0) {
        b = 0;
        s = sxq / sqq;
    }
    if (!(s > 0)) return false;
    *s_out = s;
    *b_out = b;
    return true;
}

// Assigns each element its nearest level on the grid s * q + b; returns the squared error.
double assign_levels(const float* x, int n, int nmax, double s, double b, int* q) {
    double err = 0;
    for (int i = 0; i < n; ++i) {
        q[i] = round_clamp(static_cast<float>((x[i] - b) / s), 0, nmax);
        const double diff = s * q[i] + b - x[i];
        err += diff * diff;
    }
    return err;
}

// Fits x[0..n) ~ s * q - m with q in [0, nmax], s >= 0, m >= 0, minimising the squared error.
// Candidate grids stretch the covering grid [min(x, 0), max(x)] over nmax + t levels for t in
// [-1, 1]; from each, a few alternations of least-squares (s, m) and nearest-level assignment
// descend to a local optimum. The covering grid itself is a candidate, so the result is never
// worse than it.
void fit_scale_min(const float* x, int n, int nmax, float* s_out, float* m_out) {
    JLLM_ASSERT(n <= 32);
    float xmin = 0.0f;
    float xmax = x[0];
    for (int i = 0; i < n; ++i) {
        xmin = std::min(xmin, x[i]);
        xmax = std::max(xmax, x[i]);
    }
    if (!(xmax > xmin)) {  // all zero (or all equal and <= 0): a constant offset
        *s_out = 0.0f;
        *m_out = -xmin;
        return;
    }
    int q[32];
    const double range = static_cast<double>(xmax) - xmin;
    double best_s = range / nmax;
    double best_b = xmin;
    double best_err = assign_levels(x, n, nmax, best_s, best_b, q);
    for (int step = -10; step <= 10; ++step) {
        double s = range / (nmax + 0.1 * step);
        double b = xmin;
        assign_levels(x, n, nmax, s, b, q);
        for (int iter = 0; iter < 3; ++iter) {
            if (!solve_scale_offset(x, q, n, &s, &b)) break;
            const double err = assign_levels(x, n, nmax, s, b, q);
            if (err < best_err) {
                best_err = err;
                best_s = s;
                best_b = b;
            }
        }
    }
    *s_out = static_cast<float>(best_s);
    *m_out = static_cast<float>(-best_b);
}

// Nearest levels q in [-nneg, npos] on the grid s * q; returns the squared error.
double assign_levels_sym(const float* x, int n, int nneg, int npos, double s, int* q) {
    double err = 0;
    for (int i = 0; i < n; ++i) {
        q[i] = round_clamp(static_cast<float>(x[i] / s), -nneg, npos);
        const double diff = s * q[i] - x[i];
        err += diff * diff;
    }
    return err;
}

// Fits x[0..n) ~ s * q with q in [-nneg, npos] (s may be negative), minimising the squared
// error. Candidates map the largest-magnitude element to -(nneg + t) or to npos + t levels for
// t in [-1, 1]; from each, a few alternations of the least-squares scale and nearest-level
// assignment descend to a local optimum. The max-abs grid is a candidate (t = 0).
float fit_scale_sym(const float* x, int n, int nneg, int npos) {
    JLLM_ASSERT(n <= 32);
    float xm = 0.0f;
    for (int i = 0; i < n; ++i) {
        if (std::fabs(x[i]) > std::fabs(xm)) xm = x[i];
    }
    if (xm == 0.0f) return 0.0f;
    int q[32];
    double best_s = -static_cast<double>(xm) / nneg;  // the max-abs grid
    double best_err = assign_levels_sym(x, n, nneg, npos, best_s, q);
    for (int side = 0; side < 2; ++side) {
        for (int step = -10; step <= 10; ++step) {
            const double levels = (side == 0 ? -(nneg + 0.1 * step) : (npos + 0.1 * step));
            if (std::fabs(levels) < 0.5) continue;
            double s = xm / levels;
            double err = assign_levels_sym(x, n, nneg, npos, s, q);
            if (err < best_err) {
                best_err = err;
                best_s = s;
            }
            for (int iter = 0; iter < 3; ++iter) {
                double sxq = 0, sqq = 0;
                for (int i = 0; i < n; ++i) {
                    sxq += static_cast<double>(x[i]) * q[i];
                    sqq += static_cast<double>(q[i]) * q[i];
                }
                if (sqq <= 0) break;
                s = sxq / sqq;
                err = assign_levels_sym(x, n, nneg, npos, s, q);
                if (err < best_err) {
                    best_err = err;
                    best_s = s;
                }
            }
        }
    }
    return static_cast<float>(best_s);
}

// Squared error of a sub-block on the stored grid y = dl * q - ml, q in [0, nmax], with every
// element on its nearest level (the float operations are those of the dequantizers).
double grid_error_asym(const float* x, int n, float dl, float ml, int nmax) {
    double err = 0;
    for (int i = 0; i < n; ++i) {
        const int q = dl != 0.0f ? round_clamp((x[i] + ml) / dl, 0, nmax) : 0;
        const double diff = double(dl * static_cast<float>(q) - ml) - x[i];
        err += diff * diff;
    }
    return err;
}

// Squared error of a sub-block on the stored grid y = dl * q, q in [-nneg, npos].
double grid_error_sym(const float* x, int n, float dl, int nneg, int npos) {
    double err = 0;
    for (int i = 0; i < n; ++i) {
        const int q = dl != 0.0f ? round_clamp(x[i] / dl, -nneg, npos) : 0;
        const double diff = double(dl * static_cast<float>(q)) - x[i];
        err += diff * diff;
    }
    return err;
}

// Integer sub-block scale and min for a fitted (s, m) against super-block scales (d, dmin):
// the rounded quotients and their neighbours are tried on the stored grid, keeping the pair
// of least squared error (rounding the scale down can clip the sub-block's top element, which
// the neighbour search avoids when it matters).
void pick_scale_min(const float* x, int n, int nmax, float s, float m, float d, float dmin,
                    int qmax, int* sc_out, int* mn_out) {
    const int sc0 = d != 0.0f ? round_clamp(s / d, 0, qmax) : 0;
    const int mn0 = dmin != 0.0f ? round_clamp(m / dmin, 0, qmax) : 0;
    double best = -1;
    for (int sc = std::max(0, sc0 - 1); sc <= std::min(qmax, sc0 + 1); ++sc) {
        for (int mn = std::max(0, mn0 - 1); mn <= std::min(qmax, mn0 + 1); ++mn) {
            const double err = grid_error_asym(x, n, d * static_cast<float>(sc),
                                               dmin * static_cast<float>(mn), nmax);
            if (best < 0 || err < best) {
                best = err;
                *sc_out = sc;
                *mn_out = mn;
            }
        }
    }
}

// Signed integer sub-block scale in [-qmax, qmax] for a fitted s against d, as pick_scale_min.
int pick_scale_sym(const float* x, int n, int nneg, int npos, float s, float d, int qmax) {
    const int sc0 = d != 0.0f ? round_clamp(s / d, -qmax, qmax) : 0;
    int best_sc = sc0;
    double best = -1;
    for (int sc = std::max(-qmax, sc0 - 1); sc <= std::min(qmax, sc0 + 1); ++sc) {
        const double err = grid_error_sym(x, n, d * static_cast<float>(sc), nneg, npos);
        if (best < 0 || err < best) {
            best = err;
            best_sc = sc;
        }
    }
    return best_sc;
}

}  // namespace

// =============================== dequantizers (the oracle) ===============================

// F16 / BF16: one element per 2-byte word, exact widening.
void dequantize_row_f16(const Half* x, float* y, int64_t k) {
    for (int64_t i = 0; i < k; ++i) y[i] = fp16_to_f32(x[i].bits);
}

void dequantize_row_bf16(const BFloat16* x, float* y, int64_t k) {
    for (int64_t i = 0; i < k; ++i) y[i] = bf16_to_f32(x[i].bits);
}

// Q4_0: element j (0..15) = low nibble of qs[j], element 16 + j = high nibble of qs[j];
// y = d * float(q - 8).
void dequantize_row_q4_0(const BlockQ4_0* x, float* y, int64_t k) {
    const int64_t nb = block_count(k, QK4_0);
    for (int64_t b = 0; b < nb; ++b, y += QK4_0) {
        const float d = to_f32(x[b].d);
        for (int j = 0; j < QK4_0 / 2; ++j) {
            y[j] = d * static_cast<float>((x[b].qs[j] & 0xF) - 8);
            y[j + QK4_0 / 2] = d * static_cast<float>((x[b].qs[j] >> 4) - 8);
        }
    }
}

// Q4_1: nibbles as Q4_0; y = (d * float(q)) + m.
void dequantize_row_q4_1(const BlockQ4_1* x, float* y, int64_t k) {
    const int64_t nb = block_count(k, QK4_1);
    for (int64_t b = 0; b < nb; ++b, y += QK4_1) {
        const float d = to_f32(x[b].d);
        const float m = to_f32(x[b].m);
        for (int j = 0; j < QK4_1 / 2; ++j) {
            y[j] = d * static_cast<float>(x[b].qs[j] & 0xF) + m;
            y[j + QK4_1 / 2] = d * static_cast<float>(x[b].qs[j] >> 4) + m;
        }
    }
}

// Bit 4 of element j of a Q5_0 / Q5_1 block: bit j of qh read as a little-endian uint32.
static inline int q5_high_bit(const uint8_t* qh, int j) { return (qh[j / 8] >> (j % 8)) & 1; }

// Q5_0: low 4 bits as the Q4_0 nibbles, bit 4 from qh; y = d * float(q - 16).
void dequantize_row_q5_0(const BlockQ5_0* x, float* y, int64_t k) {
    const int64_t nb = block_count(k, QK5_0);
    for (int64_t b = 0; b < nb; ++b, y += QK5_0) {
        const float d = to_f32(x[b].d);
        for (int j = 0; j < QK5_0 / 2; ++j) {
            const int q0 = (x[b].qs[j] & 0xF) | (q5_high_bit(x[b].qh, j) << 4);
            const int q1 = (x[b].qs[j] >> 4) | (q5_high_bit(x[b].qh, j + QK5_0 / 2) << 4);
            y[j] = d * static_cast<float>(q0 - 16);
            y[j + QK5_0 / 2] = d * static_cast<float>(q1 - 16);
        }
    }
}

// Q5_1: q as Q5_0 (unbiased); y = (d * float(q)) + m.
void dequantize_row_q5_1(const BlockQ5_1* x, float* y, int64_t k) {
    const int64_t nb = block_count(k, QK5_1);
    for (int64_t b = 0; b < nb; ++b, y += QK5_1) {
        const float d = to_f32(x[b].d);
        const float m = to_f32(x[b].m);
        for (int j = 0; j < QK5_1 / 2; ++j) {
            const int q0 = (x[b].qs[j] & 0xF) | (q5_high_bit(x[b].qh, j) << 4);
            const int q1 = (x[b].qs[j] >> 4) | (q5_high_bit(x[b].qh, j + QK5_1 / 2) << 4);
            y[j] = d * static_cast<float>(q0) + m;
            y[j + QK5_1 / 2] = d * static_cast<float>(q1) + m;
        }
    }
}

// Q8_0: element j = qs[j]; y = d * float(q).
void dequantize_row_q8_0(const BlockQ8_0* x, float* y, int64_t k) {
    const int64_t nb = block_count(k, QK8_0);
    for (int64_t b = 0; b < nb; ++b, y += QK8_0) {
        const float d = to_f32(x[b].d);
        for (int j = 0; j < QK8_0; ++j) y[j] = d * static_cast<float>(x[b].qs[j]);
    }
}

// Q8_1: as Q8_0; the precomputed sum s does not enter the values.
void dequantize_row_q8_1(const BlockQ8_1* x, float* y, int64_t k) {
    const int64_t nb = block_count(k, QK8_1);
    for (int64_t b = 0; b < nb; ++b, y += QK8_1) {
        const float d = to_f32(x[b].d);
        for (int j = 0; j < QK8_1; ++j) y[j] = d * static_cast<float>(x[b].qs[j]);
    }
}

// Q2_K: 16 sub-blocks of 16; element e has q = 2 bits of qs (crumb order above), sub-block
// e/16 with scale sc = scales[e/16] & 0xF and min mn = scales[e/16] >> 4;
// y = (d * float(sc)) * float(q) - (dmin * float(mn)).
void dequantize_row_q2_k(const BlockQ2_K* x, float* y, int64_t k) {
    const int64_t nb = block_count(k, QK_K);
    for (int64_t b = 0; b < nb; ++b, y += QK_K) {
        const BlockQ2_K& blk = x[b];
        const float d = to_f32(blk.d);
        const float dmin = to_f32(blk.dmin);
        for (int e = 0; e < QK_K; ++e) {
            const int s = blk.scales[e / 16];
            const float dl = d * static_cast<float>(s & 0xF);
            const float ml = dmin * static_cast<float>(s >> 4);
            const int q = (blk.qs[crumb_byte(e)] >> crumb_shift(e)) & 3;
            y[e] = dl * static_cast<float>(q) - ml;
        }
    }
}

// Q3_K: 16 sub-blocks of 16; element e has low 2 bits from qs (crumb order), bit 2 from hmask
// (bit e/32 of byte e%32); q = low - (high bit set ? 0 : 4), in [-4, 3]. Signed 6-bit scale
// sc of sub-block e/16 (packing at q3k_scale); y = (d * float(sc)) * float(q).
void dequantize_row_q3_k(const BlockQ3_K* x, float* y, int64_t k) {
    const int64_t nb = block_count(k, QK_K);
    for (int64_t b = 0; b < nb; ++b, y += QK_K) {
        const BlockQ3_K& blk = x[b];
        const float d = to_f32(blk.d);
        for (int e = 0; e < QK_K; ++e) {
            const float dl = d * static_cast<float>(q3k_scale(blk.scales, e / 16));
            const int lo = (blk.qs[crumb_byte(e)] >> crumb_shift(e)) & 3;
            const int hi = (blk.hmask[bit_byte(e)] >> bit_shift(e)) & 1;
            y[e] = dl * static_cast<float>(lo - (hi ? 0 : 4));
        }
    }
}

// Q4_K: 8 sub-blocks of 32; element e has q = nibble of qs (nib32 order), scale/min of
// sub-block e/32 from get_scale_min_k4; y = (d * float(sc)) * float(q) - (dmin * float(mn)).
void dequantize_row_q4_k(const BlockQ4_K* x, float* y, int64_t k) {
    const int64_t nb = block_count(k, QK_K);
    for (int64_t b = 0; b < nb; ++b, y += QK_K) {
        const BlockQ4_K& blk = x[b];
        const float d = to_f32(blk.d);
        const float dmin = to_f32(blk.dmin);
        for (int e = 0; e < QK_K; ++e) {
            uint8_t sc, mn;
            get_scale_min_k4(e / 32, blk.scales, &sc, &mn);
            const float dl = d * static_cast<float>(sc);
            const float ml = dmin * static_cast<float>(mn);
            const int q = (blk.qs[nib32_byte(e)] >> nib32_shift(e)) & 0xF;
            y[e] = dl * static_cast<float>(q) - ml;
        }
    }
}

// Q5_K: as Q4_K with bit 4 of q from qh (bit e/32 of byte e%32); q in [0, 31].
void dequantize_row_q5_k(const BlockQ5_K* x, float* y, int64_t k) {
    const int64_t nb = block_count(k, QK_K);
    for (int64_t b = 0; b < nb; ++b, y += QK_K) {
        const BlockQ5_K& blk = x[b];
        const float d = to_f32(blk.d);
        const float dmin = to_f32(blk.dmin);
        for (int e = 0; e < QK_K; ++e) {
            uint8_t sc, mn;
            get_scale_min_k4(e / 32, blk.scales, &sc, &mn);
            const float dl = d * static_cast<float>(sc);
            const float ml = dmin * static_cast<float>(mn);
            const int lo = (blk.qs[nib32_byte(e)] >> nib32_shift(e)) & 0xF;
            const int hi = (blk.qh[bit_byte(e)] >> bit_shift(e)) & 1;
            y[e] = dl * static_cast<float>(lo | (hi << 4)) - ml;
        }
    }
}

// Q6_K: 16 sub-blocks of 16 with int8 scales; element e has low 4 bits from ql (nib64 order)
// and high 2 bits from qh (crumb order); q = that 6-bit value - 32, in [-32, 31];
// y = (d * float(scales[e/16])) * float(q).
void dequantize_row_q6_k(const BlockQ6_K* x, float* y, int64_t k) {
    const int64_t nb = block_count(k, QK_K);
    for (int64_t b = 0; b < nb; ++b, y += QK_K) {
        const BlockQ6_K& blk = x[b];
        const float d = to_f32(blk.d);
        for (int e = 0; e < QK_K; ++e) {
            const float dl = d * static_cast<float>(blk.scales[e / 16]);
            const int lo = (blk.ql[nib64_byte(e)] >> nib64_shift(e)) & 0xF;
            const int hi = (blk.qh[crumb_byte(e)] >> crumb_shift(e)) & 3;
            y[e] = dl * static_cast<float>((lo | (hi << 4)) - 32);
        }
    }
}

// Q8_K: element e = qs[e]; y = d * float(q) with a float32 d. bsums do not enter the values.
void dequantize_row_q8_k(const BlockQ8_K* x, float* y, int64_t k) {
    const int64_t nb = block_count(k, QK_K);
    for (int64_t b = 0; b < nb; ++b, y += QK_K) {
        for (int e = 0; e < QK_K; ++e) y[e] = x[b].d * static_cast<float>(x[b].qs[e]);
    }
}

// ================================== reference quantizers ==================================

void quantize_row_f16_ref(const float* x, Half* y, int64_t k) {
    for (int64_t i = 0; i < k; ++i) y[i] = to_half(x[i]);
}

void quantize_row_bf16_ref(const float* x, BFloat16* y, int64_t k) {
    for (int64_t i = 0; i < k; ++i) y[i] = BFloat16{f32_to_bf16(x[i])};
}

namespace {

// Signed value of largest magnitude (the first one on ties).
float max_abs_signed(const float* x, int n) {
    float xm = 0.0f;
    for (int i = 0; i < n; ++i) {
        if (std::fabs(x[i]) > std::fabs(xm)) xm = x[i];
    }
    return xm;
}

// Symmetric 4/5-bit: the largest-magnitude element maps to the extra negative level -2^(b-1),
// so the grid [-2^(b-1), 2^(b-1) - 1] * d is used in full. Returns the stored (fp16) d.
float quantize_sym_block(const float* x, int n, int half_levels, int* q) {
    const float d = fp16_round(max_abs_signed(x, n) / static_cast<float>(-half_levels));
    for (int i = 0; i < n; ++i) {
        q[i] = d != 0.0f ? round_clamp(x[i] / d, -half_levels, half_levels - 1) + half_levels
                         : half_levels;
    }
    return d;
}

// Asymmetric 4/5-bit: grid [min, max] in nmax steps. Returns stored d and m.
void quantize_minmax_block(const float* x, int n, int nmax, int* q, float* d_out, float* m_out) {
    float lo = x[0], hi = x[0];
    for (int i = 0; i < n; ++i) {
        lo = std::min(lo, x[i]);
        hi = std::max(hi, x[i]);
    }
    const float d = fp16_round((hi - lo) / static_cast<float>(nmax));
    const float m = fp16_round(lo);
    for (int i = 0; i < n; ++i) q[i] = d != 0.0f ? round_clamp((x[i] - m) / d, 0, nmax) : 0;
    *d_out = d;
    *m_out = m;
}

// 8-bit symmetric: d = amax / 127, q in [-127, 127] (never -128, so kernels may negate it).
float quantize_q8_block(const float* x, int n, bool fp16_scale, int8_t* q) {
    float amax = 0.0f;
    for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
    float d = amax / 127.0f;
    if (fp16_scale) d = fp16_round(d);
    for (int i = 0; i < n; ++i) {
        q[i] = static_cast<int8_t>(d != 0.0f ? round_clamp(x[i] / d, -127, 127) : 0);
    }
    return d;
}

void pack_nibbles(const int* q, uint8_t* qs, int n) {
    for (int j = 0; j < n / 2; ++j) qs[j] = static_cast<uint8_t>((q[j] & 0xF) | ((q[j + n / 2] & 0xF) << 4));
}

void pack_q5_high(const int* q, uint8_t* qh) {
    for (int j = 0; j < 4; ++j) qh[j] = 0;
    for (int j = 0; j < 32; ++j) qh[j / 8] = static_cast<uint8_t>(qh[j / 8] | (((q[j] >> 4) & 1) << (j % 8)));
}

}  // namespace

void quantize_row_q4_0_ref(const float* x, BlockQ4_0* y, int64_t k) {
    const int64_t nb = block_count(k, QK4_0);
    int q[QK4_0];
    for (int64_t b = 0; b < nb; ++b, x += QK4_0) {
        y[b].d = to_half(quantize_sym_block(x, QK4_0, 8, q));
        pack_nibbles(q, y[b].qs, QK4_0);
    }
}

void quantize_row_q4_1_ref(const float* x, BlockQ4_1* y, int64_t k) {
    const int64_t nb = block_count(k, QK4_1);
    int q[QK4_1];
    for (int64_t b = 0; b < nb; ++b, x += QK4_1) {
        float d, m;
        quantize_minmax_block(x, QK4_1, 15, q, &d, &m);
        y[b].d = to_half(d);
        y[b].m = to_half(m);
        pack_nibbles(q, y[b].qs, QK4_1);
    }
}

void quantize_row_q5_0_ref(const float* x, BlockQ5_0* y, int64_t k) {
    const int64_t nb = block_count(k, QK5_0);
    int q[QK5_0];
    for (int64_t b = 0; b < nb; ++b, x += QK5_0) {
        y[b].d = to_half(quantize_sym_block(x, QK5_0, 16, q));
        pack_q5_high(q, y[b].qh);
        pack_nibbles(q, y[b].qs, QK5_0);
    }
}

void quantize_row_q5_1_ref(const float* x, BlockQ5_1* y, int64_t k) {
    const int64_t nb = block_count(k, QK5_1);
    int q[QK5_1];
    for (int64_t b = 0; b < nb; ++b, x += QK5_1) {
        float d, m;
        quantize_minmax_block(x, QK5_1, 31, q, &d, &m);
        y[b].d = to_half(d);
        y[b].m = to_half(m);
        pack_q5_high(q, y[b].qh);
        pack_nibbles(q, y[b].qs, QK5_1);
    }
}

void quantize_row_q8_0_ref(const float* x, BlockQ8_0* y, int64_t k) {
    const int64_t nb = block_count(k, QK8_0);
    for (int64_t b = 0; b < nb; ++b, x += QK8_0) {
        y[b].d = to_half(quantize_q8_block(x, QK8_0, true, y[b].qs));
    }
}

// Q8_1: s = d * sum(q) with the stored d, i.e. the sum of the block's dequantized values.
void quantize_row_q8_1_ref(const float* x, BlockQ8_1* y, int64_t k) {
    const int64_t nb = block_count(k, QK8_1);
    for (int64_t b = 0; b < nb; ++b, x += QK8_1) {
        const float d = quantize_q8_block(x, QK8_1, true, y[b].qs);
        int sum = 0;
        for (int j = 0; j < QK8_1; ++j) sum += y[b].qs[j];
        y[b].d = to_half(d);
        y[b].s = to_half(d * static_cast<float>(sum));
    }
}

// Q2_K: per sub-block (16 elements) a least-squares (scale, min) on the 4-level grid; the 16
// scales and 16 mins are quantized to 4 bits against d = max(scale)/15, dmin = max(min)/15.
void quantize_row_q2_k_ref(const float* x, BlockQ2_K* y, int64_t k) {
    const int64_t nb = block_count(k, QK_K);
    constexpr int NSUB = QK_K / 16;
    for (int64_t b = 0; b < nb; ++b, x += QK_K) {
        BlockQ2_K& blk = y[b];
        float s[NSUB], m[NSUB];
        float max_s = 0.0f, max_m = 0.0f;
        for (int j = 0; j < NSUB; ++j) {
            fit_scale_min(x + 16 * j, 16, 3, &s[j], &m[j]);
            max_s = std::max(max_s, s[j]);
            max_m = std::max(max_m, m[j]);
        }
        const float d = fp16_round(max_s / 15.0f);
        const float dmin = fp16_round(max_m / 15.0f);
        blk.d = to_half(d);
        blk.dmin = to_half(dmin);
        for (int j = 0; j < NSUB; ++j) {
            int sc = 0, mn = 0;
            pick_scale_min(x + 16 * j, 16, 3, s[j], m[j], d, dmin, 15, &sc, &mn);
            blk.scales[j] = static_cast<uint8_t>(sc | (mn << 4));
        }
        for (int i = 0; i < QK_K / 4; ++i) blk.qs[i] = 0;
        for (int e = 0; e < QK_K; ++e) {
            const float dl = d * static_cast<float>(blk.scales[e / 16] & 0xF);
            const float ml = dmin * static_cast<float>(blk.scales[e / 16] >> 4);
            const int q = dl != 0.0f ? round_clamp((x[e] + ml) / dl, 0, 3) : 0;
            blk.qs[crumb_byte(e)] = static_cast<uint8_t>(blk.qs[crumb_byte(e)] | (q << crumb_shift(e)));
        }
    }
}

// Q3_K: per sub-block (16 elements) a least-squares signed scale on the levels [-4, 3]; the
// scales are quantized to 6 signed bits in [-31, 31] against d = max|scale|/31.
void quantize_row_q3_k_ref(const float* x, BlockQ3_K* y, int64_t k) {
    const int64_t nb = block_count(k, QK_K);
    constexpr int NSUB = QK_K / 16;
    for (int64_t b = 0; b < nb; ++b, x += QK_K) {
        BlockQ3_K& blk = y[b];
        float s[NSUB];
        float max_s = 0.0f;
        for (int j = 0; j < NSUB; ++j) {
            s[j] = fit_scale_sym(x + 16 * j, 16, 4, 3);
            max_s = std::max(max_s, std::fabs(s[j]));
        }
        const float d = fp16_round(max_s / 31.0f);
        blk.d = to_half(d);
        for (int i = 0; i < 12; ++i) blk.scales[i] = 0;
        for (int j = 0; j < NSUB; ++j) {
            set_q3k_scale(blk.scales, j, pick_scale_sym(x + 16 * j, 16, 4, 3, s[j], d, 31));
        }
        for (int i = 0; i < QK_K / 8; ++i) blk.hmask[i] = 0;
        for (int i = 0; i < QK_K / 4; ++i) blk.qs[i] = 0;
        for (int e = 0; e < QK_K; ++e) {
            const float dl = d * static_cast<float>(q3k_scale(blk.scales, e / 16));
            const int u = (dl != 0.0f ? round_clamp(x[e] / dl, -4, 3) : 0) + 4;  // 0..7
            blk.qs[crumb_byte(e)] = static_cast<uint8_t>(blk.qs[crumb_byte(e)] | ((u & 3) << crumb_shift(e)));
            blk.hmask[bit_byte(e)] = static_cast<uint8_t>(blk.hmask[bit_byte(e)] | ((u >> 2) << bit_shift(e)));
        }
    }
}

namespace {

// Shared by Q4_K and Q5_K: 8 sub-blocks of 32 with 6-bit scales and mins. Fills d, dmin, the
// packed scales, and the per-element levels q[256] in [0, nmax] on the stored grid.
void quantize_k4_superblock(const float* x, int nmax, Half* d_out, Half* dmin_out,
                            uint8_t* scales, int* q) {
    constexpr int NSUB = QK_K / 32;
    float s[NSUB], m[NSUB];
    float max_s = 0.0f, max_m = 0.0f;
    for (int j = 0; j < NSUB; ++j) {
        fit_scale_min(x + 32 * j, 32, nmax, &s[j], &m[j]);
        max_s = std::max(max_s, s[j]);
        max_m = std::max(max_m, m[j]);
    }
    const float d = fp16_round(max_s / 63.0f);
    const float dmin = fp16_round(max_m / 63.0f);
    *d_out = to_half(d);
    *dmin_out = to_half(dmin);
    uint8_t sc[NSUB], mn[NSUB];
    for (int j = 0; j < NSUB; ++j) {
        int isc = 0, imn = 0;
        pick_scale_min(x + 32 * j, 32, nmax, s[j], m[j], d, dmin, 63, &isc, &imn);
        sc[j] = static_cast<uint8_t>(isc);
        mn[j] = static_cast<uint8_t>(imn);
    }
    pack_scale_min_k4(sc, mn, scales);
    for (int e = 0; e < QK_K; ++e) {
        const float dl = d * static_cast<float>(sc[e / 32]);
        const float ml = dmin * static_cast<float>(mn[e / 32]);
        q[e] = dl != 0.0f ? round_clamp((x[e] + ml) / dl, 0, nmax) : 0;
    }
}

}  // namespace

void quantize_row_q4_k_ref(const float* x, BlockQ4_K* y, int64_t k) {
    const int64_t nb = block_count(k, QK_K);
    int q[QK_K];
    for (int64_t b = 0; b < nb; ++b, x += QK_K) {
        BlockQ4_K& blk = y[b];
        quantize_k4_superblock(x, 15, &blk.d, &blk.dmin, blk.scales, q);
        for (int i = 0; i < QK_K / 2; ++i) blk.qs[i] = 0;
        for (int e = 0; e < QK_K; ++e) {
            blk.qs[nib32_byte(e)] = static_cast<uint8_t>(blk.qs[nib32_byte(e)] | (q[e] << nib32_shift(e)));
        }
    }
}

void quantize_row_q5_k_ref(const float* x, BlockQ5_K* y, int64_t k) {
    const int64_t nb = block_count(k, QK_K);
    int q[QK_K];
    for (int64_t b = 0; b < nb; ++b, x += QK_K) {
        BlockQ5_K& blk = y[b];
        quantize_k4_superblock(x, 31, &blk.d, &blk.dmin, blk.scales, q);
        for (int i = 0; i < QK_K / 2; ++i) blk.qs[i] = 0;
        for (int i = 0; i < QK_K / 8; ++i) blk.qh[i] = 0;
        for (int e = 0; e < QK_K; ++e) {
            blk.qs[nib32_byte(e)] = static_cast<uint8_t>(blk.qs[nib32_byte(e)] | ((q[e] & 0xF) << nib32_shift(e)));
            blk.qh[bit_byte(e)] = static_cast<uint8_t>(blk.qh[bit_byte(e)] | ((q[e] >> 4) << bit_shift(e)));
        }
    }
}

// Q6_K: per sub-block (16 elements) a least-squares signed scale on the levels [-32, 31]; the
// scales are quantized to int8 in [-127, 127] against d = max|scale|/127.
void quantize_row_q6_k_ref(const float* x, BlockQ6_K* y, int64_t k) {
    const int64_t nb = block_count(k, QK_K);
    constexpr int NSUB = QK_K / 16;
    for (int64_t b = 0; b < nb; ++b, x += QK_K) {
        BlockQ6_K& blk = y[b];
        float s[NSUB];
        float max_s = 0.0f;
        for (int j = 0; j < NSUB; ++j) {
            s[j] = fit_scale_sym(x + 16 * j, 16, 32, 31);
            max_s = std::max(max_s, std::fabs(s[j]));
        }
        const float d = fp16_round(max_s / 127.0f);
        blk.d = to_half(d);
        for (int j = 0; j < NSUB; ++j) {
            blk.scales[j] = static_cast<int8_t>(pick_scale_sym(x + 16 * j, 16, 32, 31, s[j], d, 127));
        }
        for (int i = 0; i < QK_K / 2; ++i) blk.ql[i] = 0;
        for (int i = 0; i < QK_K / 4; ++i) blk.qh[i] = 0;
        for (int e = 0; e < QK_K; ++e) {
            const float dl = d * static_cast<float>(blk.scales[e / 16]);
            const int u = (dl != 0.0f ? round_clamp(x[e] / dl, -32, 31) : 0) + 32;  // 0..63
            blk.ql[nib64_byte(e)] = static_cast<uint8_t>(blk.ql[nib64_byte(e)] | ((u & 0xF) << nib64_shift(e)));
            blk.qh[crumb_byte(e)] = static_cast<uint8_t>(blk.qh[crumb_byte(e)] | ((u >> 4) << crumb_shift(e)));
        }
    }
}

// Q8_K: float d = amax/127, q in [-127, 127], bsums[j] = sum of q over elements 16j..16j+15.
void quantize_row_q8_k_ref(const float* x, BlockQ8_K* y, int64_t k) {
    const int64_t nb = block_count(k, QK_K);
    for (int64_t b = 0; b < nb; ++b, x += QK_K) {
        y[b].d = quantize_q8_block(x, QK_K, false, y[b].qs);
        for (int j = 0; j < QK_K / 16; ++j) {
            int sum = 0;
            for (int i = 0; i < 16; ++i) sum += y[b].qs[16 * j + i];
            y[b].bsums[j] = static_cast<int16_t>(sum);
        }
    }
}

}  // namespace jllm
