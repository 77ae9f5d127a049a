// backend/cpu/select.cpp — see select.h. One pass over the row keeping the k best in order:
// a value enters only when it beats the k-th best so far, so after the first k the pass is one
// comparison per logit (a few hundred insertions over a 152k vocabulary).
#include "backend/cpu/select.h"

#include <cmath>

#include "core/error.h"

namespace jllm {

void select_top_k(const float* x, int64_t n, int k, const uint32_t* allowed, int32_t* ids, float* vals) {
    JLLM_ASSERT(k >= 1 && k <= n);
    int have = 0;
    for (int64_t i = 0; i < n; ++i) {
        float v = x[i];
        if (std::isnan(v) || (allowed != nullptr && ((allowed[i >> 5] >> (i & 31)) & 1u) == 0)) v = -INFINITY;
        // Scanned in index order, so an equal value never beats one already held (lower id).
        if (have == k && !(v > vals[k - 1])) continue;
        int at = have < k ? have++ : k - 1;
        while (at > 0 && v > vals[at - 1]) {
            vals[at] = vals[at - 1];
            ids[at] = ids[at - 1];
            --at;
        }
        vals[at] = v;
        ids[at] = static_cast<int32_t>(i);
    }
}

}  // namespace jllm
