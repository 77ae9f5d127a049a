// synth/synth_quant.h — fast single-pass Q4_K and Q6_K quantizers for synthetic weights.
// The reference quantizers (quant/quant_ref.h) search many candidate grids per sub-block: the
// right oracle for real models, but ~14x slower here (tiny-qwen3 q4_k_m: 44 s vs 3.1 s). Random
// N(0, 0.02) weights gain nothing from that search, so synthetic files use one covering grid
// plus one least-squares refinement per sub-block. Output is valid Q4_K / Q6_K that every
// dequantizer reads; only plain float operations, so the bytes are the same on every machine.
#pragma once

#include <cstdint>

#include "quant/quant_types.h"

namespace jllm {

void quantize_row_q4_k_fast(const float* x, void* y, int64_t k);
void quantize_row_q6_k_fast(const float* x, void* y, int64_t k);

// The row quantizer synthetic models use for `type`: the fast ones above for Q4_K and Q6_K,
// the reference quantizer otherwise (`exact`: always the reference).
FromFloatFn synth_from_float(GgmlType type, bool exact);

}  // namespace jllm
