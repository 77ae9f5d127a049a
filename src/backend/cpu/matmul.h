// backend/cpu/matmul.h — y = x · W^T on the CPU for weights of any supported type: the
// activation rows are quantized once into caller-provided scratch (no allocation per call),
// output rows are spread over the thread pool, and batches are tiled so each block of weight
// rows is read from memory once for many tokens (prefill).
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cpu/quant_dot.h"
#include "core/thread_pool.h"
#include "quant/quant_types.h"

namespace jllm {

// p rounded up to the next 64-byte boundary (for buffers allocated 64 bytes larger).
template <class T>
inline T* align64(T* p) {
    return reinterpret_cast<T*>((reinterpret_cast<uintptr_t>(p) + 63) & ~static_cast<uintptr_t>(63));
}

// A weight as GGUF stores it: ne[0] = n_in, ne[1] = n_out, rows contiguous.
struct MatmulWeight {
    const void* data = nullptr;  // [n_out][row_size(type, n_in)] bytes
    GgmlType type = GgmlType::F32;
    int64_t n_in = 0;
    int64_t n_out = 0;
};

// Scratch bytes matmul_cpu / matmul_multi_cpu need for n_tokens activation rows of n_in
// (0 for F32/F16/BF16 weights, which read x directly). Generous enough for any weight type
// sharing the same activation format.
size_t matmul_scratch_size(GgmlType w_type, int64_t n_in, int64_t n_tokens);

// y [n_tokens, n_out] = x [n_tokens, n_in] · W^T  (y row t is y + t * n_out).
// scratch: at least matmul_scratch_size(w.type, w.n_in, n_tokens) bytes, 64-byte aligned
// preferred. The dot products are quant_dot_kernel(w.type, level)'s.
// row_blocks (optional, [ceil(n_out / 32)] words): only the rows r whose word r / 32 is
// non-zero are computed (blocks of 32 rows, as a token mask's words); the other entries of y are
// left as they were. Each computed entry is the same as without the mask.
void matmul_cpu(ThreadPool& pool, const MatmulWeight& w, const float* x, int64_t n_tokens,
                float* y, void* scratch, size_t scratch_bytes, SimdLevel level,
                const uint32_t* row_blocks = nullptr);

// Several weights that read the same input (Q/K/V; gate/up): x is quantized once when their
// activation formats agree, and one parallel job covers all their rows.
//   ws: [n_w] (at most 8 for the fused path), all with the same n_in;
//   ys[i]: [n_tokens, ws[i].n_out]
// scratch: the largest matmul_scratch_size(ws[i].type, n_in, n_tokens). Weights whose
// activation formats differ are run one after the other, reusing the scratch.
void matmul_multi_cpu(ThreadPool& pool, const MatmulWeight* ws, int n_w, const float* x,
                      int64_t n_tokens, float* const* ys, void* scratch, size_t scratch_bytes,
                      SimdLevel level);

}  // namespace jllm
