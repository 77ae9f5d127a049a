// tests/common/verification_rows.h — a speculative verification's logits rows and the same tokens
// decoded one at a time, on one backend, for the tests that compare them (CPU and CUDA).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace jllm::test {

// From an empty cache: `prefix`, then `batch` one token at a time (steps) and, after truncating
// back to the prefix, as one forward with every row's logits (rows); each [batch.size()][n_vocab].
inline void verification_rows_and_steps(Backend& b, const std::vector<int32_t>& prefix,
                                        const std::vector<int32_t>& batch, size_t n_vocab, std::vector<float>& rows,
                                        std::vector<float>& steps) {
    const int n0 = static_cast<int>(prefix.size()), n = static_cast<int>(batch.size());
    std::vector<float> last(n_vocab);
    b.truncate_kv(0);
    b.forward(prefix.data(), n0, 0, LogitsMode::Last, last.data());
    steps.assign(static_cast<size_t>(n) * n_vocab, 0.0f);
    rows.assign(static_cast<size_t>(n) * n_vocab, 0.0f);
    for (int i = 0; i < n; ++i) {
        b.forward(&batch[static_cast<size_t>(i)], 1, n0 + i, LogitsMode::Last, steps.data() + i * n_vocab);
    }
    b.truncate_kv(n0);
    b.forward(batch.data(), n, n0, LogitsMode::All, rows.data());
}

}  // namespace jllm::test
