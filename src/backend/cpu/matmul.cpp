// backend/cpu/matmul.cpp — quantize-once, row-parallel, token-tiled matrix multiply
// (see matmul.h).
#include "backend/cpu/matmul.h"

#include <algorithm>

#include "core/error.h"

namespace jllm {

namespace {

constexpr int MAX_MULTI = 8;       // weights per fused call
constexpr int64_t TOKEN_TILE = 64;  // tokens per tile: 64 Q8_K rows of 4096 are ~300 KB (L2)

struct Segment {
    const char* w;       // weight rows [n_out][w_row_bytes]
    size_t w_row_bytes;
    VecDotFn dot;
    float* y;            // [n_tokens, n_out]
    int64_t n_out;
    int64_t row0;        // first global row index of this weight
};

struct MatmulJob {
    Segment seg[MAX_MULTI];
    int n_seg;
    const char* act;     // [n_tokens][act_row_bytes]
    size_t act_row_bytes;
    int64_t n_in;
    int64_t n_tokens;
};

// Rows [r0, r1) of one weight against every token: token tiles outermost so a tile of
// activations stays in L2 while the row block (<= a few tens of KB) stays in L1/L2 and is
// reused by each group of VEC_DOT_MAX_ACT tokens.
void run_rows(const MatmulJob& job, const Segment& s, int64_t r0, int64_t r1) {
    float out[VEC_DOT_MAX_ACT];
    for (int64_t t0 = 0; t0 < job.n_tokens; t0 += TOKEN_TILE) {
        const int64_t t1 = std::min(job.n_tokens, t0 + TOKEN_TILE);
        for (int64_t tg = t0; tg < t1; tg += VEC_DOT_MAX_ACT) {
            const int n_act = static_cast<int>(std::min<int64_t>(VEC_DOT_MAX_ACT, t1 - tg));
            const char* a = job.act + tg * job.act_row_bytes;
            for (int64_t r = r0; r < r1; r++) {
                s.dot(job.n_in, s.w + r * s.w_row_bytes, a, job.act_row_bytes, n_act, out);
                for (int t = 0; t < n_act; t++) s.y[(tg + t) * s.n_out + r] = out[t];
            }
        }
    }
}

void run_job(const MatmulJob& job, int64_t b, int64_t e) {
    for (int i = 0; i < job.n_seg && b < e; i++) {
        const Segment& s = job.seg[i];
        const int64_t lo = std::max(b, s.row0), hi = std::min(e, s.row0 + s.n_out);
        if (lo < hi) run_rows(job, s, lo - s.row0, hi - s.row0);
    }
}

void execute(ThreadPool& pool, const MatmulJob& job, int64_t total_rows) {
    // Chunks of rows claimed dynamically: ~8 per thread for balance on a noisy machine, at
    // least 4 rows so the atomic claim is amortised.
    const int64_t per = total_rows / (8 * pool.n_threads());
    const int64_t chunk = std::max<int64_t>(4, per);
    pool.parallel_for(total_rows, [&job](int64_t b, int64_t e, int) { run_job(job, b, e); }, chunk);
}

const char* quantize_input(ThreadPool& pool, const QuantDotKernel& k, const float* x, int64_t n_in,
                           int64_t n_tokens, void* scratch, size_t scratch_bytes, size_t* row_bytes) {
    if (k.act_type == GgmlType::F32) {
        *row_bytes = static_cast<size_t>(n_in) * sizeof(float);
        return reinterpret_cast<const char*>(x);
    }
    const size_t rb = static_cast<size_t>(n_in / k.act_block) * k.act_block_bytes;
    JLLM_ASSERT_MSG(scratch_bytes >= rb * static_cast<size_t>(n_tokens), "matmul scratch too small");
    char* act = static_cast<char*>(scratch);  // [n_tokens][rb]
    if (n_tokens == 1) {
        k.quantize_act(x, act, n_in);
    } else {
        pool.parallel_for(
            n_tokens,
            [&](int64_t b, int64_t e, int) {
                for (int64_t t = b; t < e; t++) k.quantize_act(x + t * n_in, act + t * rb, n_in);
            },
            std::max<int64_t>(1, n_tokens / (2 * pool.n_threads())));
    }
    *row_bytes = rb;
    return act;
}

void check_weight(const MatmulWeight& w, const QuantDotKernel* k) {
    JLLM_ASSERT_MSG(k != nullptr && k->vec_dot != nullptr, "matmul: weight type has no CPU dot product");
    JLLM_ASSERT_MSG(w.n_in % type_traits(w.type).block_size == 0 && w.n_in % k->act_block == 0,
                    "matmul: n_in is not a multiple of the block size");
}

}  // namespace

size_t matmul_scratch_size(GgmlType w_type, int64_t n_in, int64_t n_tokens) {
    const QuantDotKernel* k = quant_dot_kernel(w_type, SimdLevel::Scalar);
    if (k == nullptr || k->act_type == GgmlType::F32) return 0;
    return static_cast<size_t>(n_in / k->act_block) * k->act_block_bytes * static_cast<size_t>(n_tokens);
}

void matmul_cpu(ThreadPool& pool, const MatmulWeight& w, const float* x, int64_t n_tokens, float* y,
                void* scratch, size_t scratch_bytes, SimdLevel level) {
    const QuantDotKernel* k = quant_dot_kernel(w.type, level);
    check_weight(w, k);
    if (n_tokens <= 0 || w.n_out <= 0) return;
    MatmulJob job;
    job.n_seg = 1;
    job.seg[0] = Segment{static_cast<const char*>(w.data), row_size(w.type, w.n_in), k->vec_dot, y, w.n_out, 0};
    job.n_in = w.n_in;
    job.n_tokens = n_tokens;
    job.act = quantize_input(pool, *k, x, w.n_in, n_tokens, scratch, scratch_bytes, &job.act_row_bytes);
    execute(pool, job, w.n_out);
}

void matmul_multi_cpu(ThreadPool& pool, const MatmulWeight* ws, int n_w, const float* x, int64_t n_tokens,
                      float* const* ys, void* scratch, size_t scratch_bytes, SimdLevel level) {
    if (n_w <= 0 || n_tokens <= 0) return;
    const QuantDotKernel* k0 = quant_dot_kernel(ws[0].type, level);
    bool same = n_w <= MAX_MULTI;
    for (int i = 0; i < n_w && same; i++) {
        const QuantDotKernel* k = quant_dot_kernel(ws[i].type, level);
        check_weight(ws[i], k);
        JLLM_ASSERT_MSG(ws[i].n_in == ws[0].n_in, "matmul_multi: weights differ in n_in");
        same = k->act_type == k0->act_type;
    }
    if (!same) {  // different activation formats: one matmul each (scratch reused in turn)
        for (int i = 0; i < n_w; i++) matmul_cpu(pool, ws[i], x, n_tokens, ys[i], scratch, scratch_bytes, level);
        return;
    }
    MatmulJob job;
    job.n_seg = n_w;
    int64_t total = 0;
    for (int i = 0; i < n_w; i++) {
        job.seg[i] = Segment{static_cast<const char*>(ws[i].data), row_size(ws[i].type, ws[i].n_in),
                             quant_dot_kernel(ws[i].type, level)->vec_dot, ys[i], ws[i].n_out, total};
        total += ws[i].n_out;
    }
    job.n_in = ws[0].n_in;
    job.n_tokens = n_tokens;
    job.act = quantize_input(pool, *k0, x, ws[0].n_in, n_tokens, scratch, scratch_bytes, &job.act_row_bytes);
    execute(pool, job, total);
}

}  // namespace jllm
