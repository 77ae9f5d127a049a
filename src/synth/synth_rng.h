// synth/synth_rng.h — the deterministic random stream of synthetic models: SplitMix64 integers
// and a normal transform (Marsaglia polar method with our own logarithm) built only from
// IEEE-754 basic operations and sqrt, which are correctly rounded everywhere. No libm
// transcendental and no std::*_distribution is involved, so every machine (x86, the Jetson's
// ARM cores, any compiler or C library) regenerates the same bytes from the same seed.
#pragma once

#include <cstdint>
#include <string>

namespace jllm {

// SplitMix64 (Steele, Lea, Flood): one 64-bit state, passes BigCrush, trivially seekable.
class SynthRng {
public:
    explicit SynthRng(uint64_t seed) : state_(seed) {}
    uint64_t next_u64();
    // Uniform in [0, 1) with 53 random bits.
    double next_unit();
    // Standard normal N(0, 1).
    double next_normal();

private:
    uint64_t state_;
    double spare_ = 0.0;
    bool has_spare_ = false;
};

// The SplitMix64 finaliser: a bijective 64-bit mix.
uint64_t synth_mix64(uint64_t x);
// Stable 64-bit hash of a tensor name (FNV-1a, then mixed).
uint64_t synth_name_hash(const std::string& name);
// Seed of row `row` of the tensor named `name`: every row has its own stream, so a tensor's
// bytes do not depend on how many threads generated it.
uint64_t synth_row_seed(uint64_t seed, uint64_t name_hash, uint64_t row);
// Natural logarithm of x > 0 from +, -, *, / only (error < 1 ulp-ish; deterministic, not fast).
double synth_log(double x);

}  // namespace jllm
