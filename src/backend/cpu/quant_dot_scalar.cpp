// backend/cpu/quant_dot_scalar.cpp — scalar reference activation quantizers and dot products
// (the `_ref` oracle every SIMD path must agree with). Integer sums are exact per block or
// super-block; the float math per block is the same one the SIMD paths do, so SIMD and
// scalar differ only by float summation order.
#include <cmath>
#include <cstring>

#include "backend/cpu/quant_dot_internal.h"
#include "quant/quant_blocks.h"

namespace jllm {

namespace {

// Shared by all three activation formats: d = amax / 127, q = round-half-even(x / d).
inline float absmax(const float* x, int n) {
    float amax = 0.0f;
    for (int i = 0; i < n; i++) amax = std::fmax(amax, std::fabs(x[i]));
    return amax;
}

inline int quantize_block_i8(const float* x, int8_t* q, int n, float d) {
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int sum = 0;
    for (int i = 0; i < n; i++) {
        const int v = static_cast<int>(std::nearbyint(x[i] * id));
        q[i] = static_cast<int8_t>(v);
        sum += v;
    }
    return sum;
}

}  // namespace

void quantize_act_q8_0_ref(const float* x, void* y, int64_t n) {
    BlockQ8_0* b = static_cast<BlockQ8_0*>(y);  // [n / 32]
    for (int64_t i = 0; i < n / QK8_0; i++) {
        const float d = absmax(x + i * QK8_0, QK8_0) / 127.0f;
        quantize_block_i8(x + i * QK8_0, b[i].qs, QK8_0, d);
        b[i].d = to_half(d);
    }
}

void quantize_act_q8_1_ref(const float* x, void* y, int64_t n) {
    BlockQ8_1* b = static_cast<BlockQ8_1*>(y);  // [n / 32]
    for (int64_t i = 0; i < n / QK8_1; i++) {
        const float d = absmax(x + i * QK8_1, QK8_1) / 127.0f;
        const int sum = quantize_block_i8(x + i * QK8_1, b[i].qs, QK8_1, d);
        b[i].d = to_half(d);
        b[i].s = to_half(d * static_cast<float>(sum));
    }
}

void quantize_act_q8_k_ref(const float* x, void* y, int64_t n) {
    BlockQ8_K* b = static_cast<BlockQ8_K*>(y);  // [n / 256]
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = absmax(x + i * QK_K, QK_K) / 127.0f;
        for (int j = 0; j < QK_K / 16; j++) {
            b[i].bsums[j] =
                static_cast<int16_t>(quantize_block_i8(x + i * QK_K + 16 * j, b[i].qs + 16 * j, 16, d));
        }
        b[i].d = d;
    }
}

namespace {

// ---- dot products: one weight row against one activation row ----

float dot_q4_0(int64_t n, const void* wv, const void* av) {
    const BlockQ4_0* w = static_cast<const BlockQ4_0*>(wv);
    const BlockQ8_1* a = static_cast<const BlockQ8_1*>(av);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK4_0; i++) {
        int s = 0;
        for (int j = 0; j < 16; j++) {
            s += (w[i].qs[j] & 0xF) * a[i].qs[j] + (w[i].qs[j] >> 4) * a[i].qs[j + 16];
        }
        const float dw = to_f32(w[i].d);
        sum += dw * to_f32(a[i].d) * static_cast<float>(s) - 8.0f * dw * to_f32(a[i].s);
    }
    return sum;
}

float dot_q4_1(int64_t n, const void* wv, const void* av) {
    const BlockQ4_1* w = static_cast<const BlockQ4_1*>(wv);
    const BlockQ8_1* a = static_cast<const BlockQ8_1*>(av);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK4_1; i++) {
        int s = 0;
        for (int j = 0; j < 16; j++) {
            s += (w[i].qs[j] & 0xF) * a[i].qs[j] + (w[i].qs[j] >> 4) * a[i].qs[j + 16];
        }
        sum += to_f32(w[i].d) * to_f32(a[i].d) * static_cast<float>(s) + to_f32(w[i].m) * to_f32(a[i].s);
    }
    return sum;
}

inline int dot_q5_block(const uint8_t* qs, const uint8_t* qh4, const int8_t* aq) {
    uint32_t qh;
    std::memcpy(&qh, qh4, 4);
    int s = 0;
    for (int j = 0; j < 16; j++) {
        const int q0 = (qs[j] & 0xF) | (((qh >> j) & 1) << 4);
        const int q1 = (qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
        s += q0 * aq[j] + q1 * aq[j + 16];
    }
    return s;
}

float dot_q5_0(int64_t n, const void* wv, const void* av) {
    const BlockQ5_0* w = static_cast<const BlockQ5_0*>(wv);
    const BlockQ8_1* a = static_cast<const BlockQ8_1*>(av);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK5_0; i++) {
        const int s = dot_q5_block(w[i].qs, w[i].qh, a[i].qs);
        const float dw = to_f32(w[i].d);
        sum += dw * to_f32(a[i].d) * static_cast<float>(s) - 16.0f * dw * to_f32(a[i].s);
    }
    return sum;
}

float dot_q5_1(int64_t n, const void* wv, const void* av) {
    const BlockQ5_1* w = static_cast<const BlockQ5_1*>(wv);
    const BlockQ8_1* a = static_cast<const BlockQ8_1*>(av);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK5_1; i++) {
        const int s = dot_q5_block(w[i].qs, w[i].qh, a[i].qs);
        sum += to_f32(w[i].d) * to_f32(a[i].d) * static_cast<float>(s) + to_f32(w[i].m) * to_f32(a[i].s);
    }
    return sum;
}

float dot_q8_0(int64_t n, const void* wv, const void* av) {
    const BlockQ8_0* w = static_cast<const BlockQ8_0*>(wv);
    const BlockQ8_0* a = static_cast<const BlockQ8_0*>(av);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK8_0; i++) {
        int s = 0;
        for (int j = 0; j < QK8_0; j++) s += w[i].qs[j] * a[i].qs[j];
        sum += to_f32(w[i].d) * to_f32(a[i].d) * static_cast<float>(s);
    }
    return sum;
}

// k-quants: element e of a super-block belongs to 16-element sub-block e / 16; the integer
// part sum_j scale_j * sum_{e in j} q_e * a_e is exact, offsets use the activation bsums.

float dot_q2_k(int64_t n, const void* wv, const void* av) {
    const BlockQ2_K* w = static_cast<const BlockQ2_K*>(wv);
    const BlockQ8_K* a = static_cast<const BlockQ8_K*>(av);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int sumi = 0, summ = 0;
        for (int e0 = 0; e0 < QK_K; e0 += 16) {
            const int h = e0 / 128, jj = (e0 % 128) / 32, l0 = e0 % 32;
            int s = 0;
            for (int l = l0; l < l0 + 16; l++) s += ((w[i].qs[32 * h + l] >> (2 * jj)) & 3) * a[i].qs[128 * h + 32 * jj + l];
            sumi += (w[i].scales[e0 / 16] & 0xF) * s;
            summ += (w[i].scales[e0 / 16] >> 4) * a[i].bsums[e0 / 16];
        }
        sum += a[i].d * (to_f32(w[i].d) * static_cast<float>(sumi) - to_f32(w[i].dmin) * static_cast<float>(summ));
    }
    return sum;
}

float dot_q3_k(int64_t n, const void* wv, const void* av) {
    const BlockQ3_K* w = static_cast<const BlockQ3_K*>(wv);
    const BlockQ8_K* a = static_cast<const BlockQ8_K*>(av);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int8_t sc[16];
        cpu_detail::unpack_scales_q3_k(w[i].scales, sc);
        int sumi = 0;
        for (int e0 = 0; e0 < QK_K; e0 += 16) {
            const int h = e0 / 128, jj = (e0 % 128) / 32, l0 = e0 % 32;
            int s = 0;
            for (int l = l0; l < l0 + 16; l++) {
                const int q = ((w[i].qs[32 * h + l] >> (2 * jj)) & 3) | (((w[i].hmask[l] >> (4 * h + jj)) & 1) << 2);
                s += q * a[i].qs[128 * h + 32 * jj + l];
            }
            sumi += sc[e0 / 16] * (s - 4 * a[i].bsums[e0 / 16]);
        }
        sum += a[i].d * to_f32(w[i].d) * static_cast<float>(sumi);
    }
    return sum;
}

float dot_q4_k(int64_t n, const void* wv, const void* av) {
    const BlockQ4_K* w = static_cast<const BlockQ4_K*>(wv);
    const BlockQ8_K* a = static_cast<const BlockQ8_K*>(av);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        uint8_t sm[16];  // scales[8], mins[8]
        cpu_detail::unpack_scales_mins_k4(w[i].scales, sm);
        int sumi = 0, summ = 0;
        for (int g = 0; g < 4; g++) {
            int s_lo = 0, s_hi = 0;
            for (int l = 0; l < 32; l++) {
                s_lo += (w[i].qs[32 * g + l] & 0xF) * a[i].qs[64 * g + l];
                s_hi += (w[i].qs[32 * g + l] >> 4) * a[i].qs[64 * g + 32 + l];
            }
            sumi += sm[2 * g] * s_lo + sm[2 * g + 1] * s_hi;
        }
        for (int j = 0; j < 8; j++) summ += sm[8 + j] * (a[i].bsums[2 * j] + a[i].bsums[2 * j + 1]);
        sum += a[i].d * (to_f32(w[i].d) * static_cast<float>(sumi) - to_f32(w[i].dmin) * static_cast<float>(summ));
    }
    return sum;
}

float dot_q5_k(int64_t n, const void* wv, const void* av) {
    const BlockQ5_K* w = static_cast<const BlockQ5_K*>(wv);
    const BlockQ8_K* a = static_cast<const BlockQ8_K*>(av);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        uint8_t sm[16];
        cpu_detail::unpack_scales_mins_k4(w[i].scales, sm);
        int sumi = 0, summ = 0;
        for (int g = 0; g < 4; g++) {
            int s_lo = 0, s_hi = 0;
            for (int l = 0; l < 32; l++) {
                const int q_lo = (w[i].qs[32 * g + l] & 0xF) | (((w[i].qh[l] >> (2 * g)) & 1) << 4);
                const int q_hi = (w[i].qs[32 * g + l] >> 4) | (((w[i].qh[l] >> (2 * g + 1)) & 1) << 4);
                s_lo += q_lo * a[i].qs[64 * g + l];
                s_hi += q_hi * a[i].qs[64 * g + 32 + l];
            }
            sumi += sm[2 * g] * s_lo + sm[2 * g + 1] * s_hi;
        }
        for (int j = 0; j < 8; j++) summ += sm[8 + j] * (a[i].bsums[2 * j] + a[i].bsums[2 * j + 1]);
        sum += a[i].d * (to_f32(w[i].d) * static_cast<float>(sumi) - to_f32(w[i].dmin) * static_cast<float>(summ));
    }
    return sum;
}

float dot_q6_k(int64_t n, const void* wv, const void* av) {
    const BlockQ6_K* w = static_cast<const BlockQ6_K*>(wv);
    const BlockQ8_K* a = static_cast<const BlockQ8_K*>(av);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int sumi = 0;
        for (int e0 = 0; e0 < QK_K; e0 += 16) {
            const int h = e0 / 128, c = (e0 % 128) / 32, l0 = e0 % 32;
            const uint8_t* ql = w[i].ql + 64 * h + (c & 1) * 32;
            const uint8_t* qh = w[i].qh + 32 * h;
            int s = 0;
            for (int l = l0; l < l0 + 16; l++) {
                const int lo = (c < 2) ? (ql[l] & 0xF) : (ql[l] >> 4);
                const int q = lo | (((qh[l] >> (2 * c)) & 3) << 4);
                s += q * a[i].qs[e0 + l - l0];
            }
            sumi += w[i].scales[e0 / 16] * (s - 32 * a[i].bsums[e0 / 16]);
        }
        sum += a[i].d * to_f32(w[i].d) * static_cast<float>(sumi);
    }
    return sum;
}

float dot_f32(int64_t n, const void* wv, const void* av) {
    const float* w = static_cast<const float*>(wv);
    const float* a = static_cast<const float*>(av);
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) sum += w[i] * a[i];
    return sum;
}

float dot_f16(int64_t n, const void* wv, const void* av) {
    const Half* w = static_cast<const Half*>(wv);
    const float* a = static_cast<const float*>(av);
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) sum += to_f32(w[i]) * a[i];
    return sum;
}

float dot_bf16(int64_t n, const void* wv, const void* av) {
    const BFloat16* w = static_cast<const BFloat16*>(wv);
    const float* a = static_cast<const float*>(av);
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) sum += bf16_to_f32(w[i].bits) * a[i];
    return sum;
}

template <float (*Dot)(int64_t, const void*, const void*)>
void vec_dot_rows(int64_t n, const void* w, const void* a, size_t a_stride, int n_act, float* out) {
    for (int t = 0; t < n_act; t++) out[t] = Dot(n, w, static_cast<const char*>(a) + t * a_stride);
}

}  // namespace

namespace cpu_detail {

VecDotFn vec_dot_scalar(GgmlType w_type) {
    switch (w_type) {
        case GgmlType::Q4_0: return &vec_dot_rows<dot_q4_0>;
        case GgmlType::Q4_1: return &vec_dot_rows<dot_q4_1>;
        case GgmlType::Q5_0: return &vec_dot_rows<dot_q5_0>;
        case GgmlType::Q5_1: return &vec_dot_rows<dot_q5_1>;
        case GgmlType::Q8_0: return &vec_dot_rows<dot_q8_0>;
        case GgmlType::Q2_K: return &vec_dot_rows<dot_q2_k>;
        case GgmlType::Q3_K: return &vec_dot_rows<dot_q3_k>;
        case GgmlType::Q4_K: return &vec_dot_rows<dot_q4_k>;
        case GgmlType::Q5_K: return &vec_dot_rows<dot_q5_k>;
        case GgmlType::Q6_K: return &vec_dot_rows<dot_q6_k>;
        case GgmlType::F32: return &vec_dot_rows<dot_f32>;
        case GgmlType::F16: return &vec_dot_rows<dot_f16>;
        case GgmlType::BF16: return &vec_dot_rows<dot_bf16>;
        default: return nullptr;
    }
}

QuantizeActFn quantize_act_scalar(GgmlType act_type) {
    switch (act_type) {
        case GgmlType::Q8_0: return &quantize_act_q8_0_ref;
        case GgmlType::Q8_1: return &quantize_act_q8_1_ref;
        case GgmlType::Q8_K: return &quantize_act_q8_k_ref;
        default: return nullptr;
    }
}

}  // namespace cpu_detail

}  // namespace jllm
