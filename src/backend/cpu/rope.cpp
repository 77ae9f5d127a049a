// backend/cpu/rope.cpp — RoPE frequency tables and the scalar rotation.
#include "backend/cpu/rope.h"

#include <cmath>

namespace jllm {

std::vector<float> rope_inv_freq(const ModelConfig& c, const float* freq_divisors) {
    const int64_t half = c.n_rot / 2;
    std::vector<float> inv(static_cast<size_t>(half));
    for (int64_t i = 0; i < half; ++i) {
        double f = std::pow(static_cast<double>(c.rope_freq_base), -2.0 * static_cast<double>(i) / c.n_rot);
        if (freq_divisors != nullptr) {
            f /= freq_divisors[i];
        } else if (c.rope_scaling == RopeScaling::Llama3) {
            // Llama 3.x: long wavelengths are divided by the factor, short ones kept, a smooth
            // blend in between (low/high frequency factors 1 and 4, the published defaults).
            const double factor = c.rope_scaling_factor;
            const double low_ff = 1.0, high_ff = 4.0;
            const double orig = c.rope_scaling_orig_ctx > 0 ? static_cast<double>(c.rope_scaling_orig_ctx) : 8192.0;
            const double wavelen = 2.0 * M_PI / f;
            const double low_wl = orig / low_ff, high_wl = orig / high_ff;
            if (wavelen > low_wl) {
                f /= factor;
            } else if (wavelen >= high_wl) {
                const double smooth = (orig / wavelen - low_ff) / (high_ff - low_ff);
                f = (1.0 - smooth) * f / factor + smooth * f;
            }
        }
        if (c.rope_scaling == RopeScaling::Linear && c.rope_scaling_factor > 0) f /= c.rope_scaling_factor;
        inv[static_cast<size_t>(i)] = static_cast<float>(f);
    }
    return inv;
}

void rope_apply_ref(float* x, int64_t n_rot, RopeStyle style, const float* inv_freq, int64_t pos) {
    const int64_t half = n_rot / 2;
    for (int64_t i = 0; i < half; ++i) {
        const float theta = static_cast<float>(pos) * inv_freq[i];
        const float cs = std::cos(theta), sn = std::sin(theta);
        const int64_t a = style == RopeStyle::Normal ? 2 * i : i;
        const int64_t b = style == RopeStyle::Normal ? 2 * i + 1 : i + half;
        const float x0 = x[a], x1 = x[b];
        x[a] = x0 * cs - x1 * sn;
        x[b] = x0 * sn + x1 * cs;
    }
}

void rope_angles(int64_t n_rot, const float* inv_freq, int64_t pos, float* cs) {
    const int64_t half = n_rot / 2;
    for (int64_t i = 0; i < half; ++i) {
        const float theta = static_cast<float>(pos) * inv_freq[i];
        cs[i] = std::cos(theta);
        cs[half + i] = std::sin(theta);
    }
}

void rope_apply_cs(float* x, int64_t n_rot, RopeStyle style, const float* cs) {
    const int64_t half = n_rot / 2;
    for (int64_t i = 0; i < half; ++i) {
        const float c = cs[i], sn = cs[half + i];
        const int64_t a = style == RopeStyle::Normal ? 2 * i : i;
        const int64_t b = style == RopeStyle::Normal ? 2 * i + 1 : i + half;
        const float x0 = x[a], x1 = x[b];
        x[a] = x0 * c - x1 * sn;
        x[b] = x0 * sn + x1 * c;
    }
}

}  // namespace jllm
