// synth/synth_rng.cpp — SplitMix64 and the polar-method normal transform (see synth_rng.h).
// Contraction of a*b+c into FMA would change low bits between machines: keep it off (GCC in
// ISO mode, -std=c++17, already compiles with -ffp-contract=off; clang needs the pragma).
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif
#include "synth/synth_rng.h"

#include <cmath>

namespace jllm {

uint64_t synth_mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t SynthRng::next_u64() {
    state_ += 0x9E3779B97F4A7C15ull;
    return synth_mix64(state_);
}

double SynthRng::next_unit() { return static_cast<double>(next_u64() >> 11) * (1.0 / 9007199254740992.0); }

uint64_t synth_name_hash(const std::string& name) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (unsigned char c : name) {
        h ^= c;
        h *= 0x100000001B3ull;
    }
    return synth_mix64(h);
}

uint64_t synth_row_seed(uint64_t seed, uint64_t name_hash, uint64_t row) {
    return synth_mix64(synth_mix64(seed ^ name_hash) + row * 0xD1B54A32D192ED03ull);
}

// ln(x) = e*ln2 + 2*atanh(t), t = (m-1)/(m+1), m in [sqrt(1/2), sqrt(2)), |t| < 0.1716:
// the odd series to t^25 is below 1e-19 relative, i.e. exact in double.
double synth_log(double x) {
    int e = 0;
    double m = std::frexp(x, &e);  // exact: x = m * 2^e, m in [0.5, 1)
    if (m < 0.70710678118654752440) {
        m = m * 2.0;
        e = e - 1;
    }
    const double t = (m - 1.0) / (m + 1.0);
    const double t2 = t * t;
    double s = 1.0 / 25.0;
    const double inv[] = {1.0 / 23.0, 1.0 / 21.0, 1.0 / 19.0, 1.0 / 17.0, 1.0 / 15.0, 1.0 / 13.0,
                          1.0 / 11.0, 1.0 / 9.0,  1.0 / 7.0,  1.0 / 5.0,  1.0 / 3.0,  1.0};
    for (double c : inv) {
        const double p = s * t2;
        s = p + c;
    }
    const double ln_m = 2.0 * (t * s);
    const double ln2 = 0.693147180559945309417232121458;
    const double ep = static_cast<double>(e) * ln2;
    return ep + ln_m;
}

double SynthRng::next_normal() {
    if (has_spare_) {
        has_spare_ = false;
        return spare_;
    }
    double u, v, s;
    do {
        u = 2.0 * next_unit() - 1.0;
        v = 2.0 * next_unit() - 1.0;
        const double uu = u * u;
        const double vv = v * v;
        s = uu + vv;
    } while (s >= 1.0 || s == 0.0);
    const double ls = synth_log(s);
    const double q = (-2.0 * ls) / s;
    const double f = std::sqrt(q);  // IEEE sqrt: correctly rounded
    spare_ = v * f;
    has_spare_ = true;
    return u * f;
}

}  // namespace jllm
