// backend/cpu/matmul.cpp — quantize-once, row-parallel, token-tiled matrix multiply
// (see matmul.h).
#include "backend/cpu/matmul.h"

#include <algorithm>
#include <vector>

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
    const QuantGemm* gemm;  // the many-token path, used when the job has packed activations
    const QuantDotPacked* dot_packed;  // dot over the job's dot_act instead, where it has them
};

struct MatmulJob {
    Segment seg[MAX_MULTI];
    int n_seg;
    const char* act;     // [n_tokens][act_row_bytes]
    size_t act_row_bytes;
    int64_t n_in;
    int64_t n_tokens;
    const char* packed = nullptr;  // [n_tokens][packed_row_bytes] for the gemm path, or nullptr
    size_t packed_row_bytes = 0;
    // [n_tokens][dot_act_row_bytes]: the rows packed for the segments' dot_packed, or nullptr
    const char* dot_act = nullptr;
    size_t dot_act_row_bytes = 0;
    // One segment's rows as runs [runs[2i], runs[2i + 1]), in order; the job's row indices count
    // the rows of the runs only. Empty: every row.
    std::vector<int64_t> runs;
};

constexpr size_t kPackedTile = 512 * 1024;  // packed activation bytes per token tile (L2)

// The gemm path: token tiles of ~kPackedTile bytes outermost (they stay in L2), then the rows in
// panels of rows_per_panel, each unpacked once per token tile into a per-thread buffer (L1) and
// run against every token of the tile.
void run_rows_gemm(const MatmulJob& job, const Segment& s, int64_t r0, int64_t r1) {
    const QuantGemm& g = *s.gemm;
    thread_local std::vector<char> buf;  // grows once per thread to the largest panel
    const size_t panel_bytes = static_cast<size_t>(g.rows_per_panel) * g.row_bytes(job.n_in);
    if (buf.size() < panel_bytes + 64) buf.resize(panel_bytes + 64);
    char* panel = align64(buf.data());
    const int64_t tile = std::max<int64_t>(16, static_cast<int64_t>(kPackedTile / job.packed_row_bytes));
    for (int64_t t0 = 0; t0 < job.n_tokens; t0 += tile) {
        const int64_t nt = std::min(tile, job.n_tokens - t0);
        for (int64_t r = r0; r < r1; r += g.rows_per_panel) {
            const int nr = static_cast<int>(std::min<int64_t>(g.rows_per_panel, r1 - r));
            g.pack_rows(job.n_in, s.w + r * s.w_row_bytes, s.w_row_bytes, nr, panel);
            g.run(job.n_in, panel, nr, job.packed + t0 * job.packed_row_bytes, nt, s.y + t0 * s.n_out + r, s.n_out);
        }
    }
}

// Rows [r0, r1) of one weight against every token: token tiles outermost so a tile of
// activations stays in L2 while the row block (<= a few tens of KB) stays in L1/L2 and is
// reused by each group of VEC_DOT_MAX_ACT tokens.
void run_rows(const MatmulJob& job, const Segment& s, int64_t r0, int64_t r1) {
    if (s.gemm != nullptr && job.packed != nullptr) {
        run_rows_gemm(job, s, r0, r1);
        return;
    }
    const bool packed = s.dot_packed != nullptr && job.dot_act != nullptr;
    const VecDotFn dot = packed ? s.dot_packed->vec_dot : s.dot;
    const char* act = packed ? job.dot_act : job.act;
    const size_t arb = packed ? job.dot_act_row_bytes : job.act_row_bytes;
    float out[VEC_DOT_MAX_ACT];
    for (int64_t t0 = 0; t0 < job.n_tokens; t0 += TOKEN_TILE) {
        const int64_t t1 = std::min(job.n_tokens, t0 + TOKEN_TILE);
        for (int64_t tg = t0; tg < t1; tg += VEC_DOT_MAX_ACT) {
            const int n_act = static_cast<int>(std::min<int64_t>(VEC_DOT_MAX_ACT, t1 - tg));
            const char* a = act + tg * arb;
            for (int64_t r = r0; r < r1; r++) {
                dot(job.n_in, s.w + r * s.w_row_bytes, a, arb, n_act, out);
                for (int t = 0; t < n_act; t++) s.y[(tg + t) * s.n_out + r] = out[t];
            }
        }
    }
}

void run_job(const MatmulJob& job, int64_t b, int64_t e) {
    if (!job.runs.empty()) {  // [b, e) over the runs' rows, back to the weight's rows
        int64_t before = 0;   // rows of the runs before run i
        for (size_t i = 0; i + 1 < job.runs.size() && b < e; i += 2) {
            const int64_t len = job.runs[i + 1] - job.runs[i];
            const int64_t lo = std::max(b, before), hi = std::min(e, before + len);
            if (lo < hi) run_rows(job, job.seg[0], job.runs[i] + lo - before, job.runs[i] + hi - before);
            before += len;
        }
        return;
    }
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

// Quantizes the input rows into scratch ([n_tokens][row bytes]); where the weights have a gemm
// path and the batch is large enough for it, also packs every row for it (after the quantized
// rows, 64-byte aligned) and sets job->packed; else, where k has a packed dot product, packs them
// for that and sets job->dot_act.
void quantize_input(ThreadPool& pool, const QuantDotKernel& k, const float* x, void* scratch, size_t scratch_bytes,
                    MatmulJob* job) {
    const int64_t n_in = job->n_in, n_tokens = job->n_tokens;
    if (k.act_type == GgmlType::F32) {
        job->act_row_bytes = static_cast<size_t>(n_in) * sizeof(float);
        job->act = reinterpret_cast<const char*>(x);
        return;
    }
    const size_t rb = static_cast<size_t>(n_in / k.act_block) * k.act_block_bytes;
    char* act = static_cast<char*>(scratch);  // [n_tokens][rb]
    const size_t act_total = rb * static_cast<size_t>(n_tokens);
    JLLM_ASSERT_MSG(scratch_bytes >= act_total, "matmul scratch too small");
    // The one packing this batch takes: the gemm path's, or the packed dot product's.
    const bool gemm = k.gemm != nullptr && n_tokens >= k.gemm->min_tokens;
    void (*pack)(int64_t, const void*, void*) = nullptr;
    size_t pb = 0;
    if (gemm) {
        pack = k.gemm->pack_act;
        pb = k.gemm->act_bytes(n_in);
    } else if (k.packed != nullptr) {
        pack = k.packed->pack_act;
        pb = k.packed->act_bytes(n_in);
    }
    char* packed = pack != nullptr ? align64(act + act_total) : nullptr;
    JLLM_ASSERT_MSG(packed == nullptr ||
                        static_cast<size_t>(packed - act) + pb * static_cast<size_t>(n_tokens) <= scratch_bytes,
                    "matmul scratch too small for the packed activations");
    if (n_tokens == 1) {
        k.quantize_act(x, act, n_in);
        if (packed != nullptr) pack(n_in, act, packed);
    } else {
        pool.parallel_for(
            n_tokens,
            [&](int64_t b, int64_t e, int) {
                for (int64_t t = b; t < e; t++) {
                    k.quantize_act(x + t * n_in, act + t * rb, n_in);
                    if (packed != nullptr) pack(n_in, act + t * rb, packed + t * pb);
                }
            },
            std::max<int64_t>(1, n_tokens / (2 * pool.n_threads())));
    }
    job->act_row_bytes = rb;
    job->act = act;
    job->packed = gemm ? packed : nullptr;
    job->packed_row_bytes = gemm ? pb : 0;
    job->dot_act = gemm ? nullptr : packed;
    job->dot_act_row_bytes = gemm ? 0 : pb;
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
    const size_t act = static_cast<size_t>(n_in / k->act_block) * k->act_block_bytes * static_cast<size_t>(n_tokens);
    // Room for the packed rows (the gemm path's or the packed dot product's) at any level this CPU
    // runs (they follow the quantized rows at the next 64-byte boundary).
    size_t packed = 0;
    for (SimdLevel level : {SimdLevel::Avx2, SimdLevel::Avx512, SimdLevel::Neon}) {
        const QuantDotKernel* kl = simd_level_supported(level) ? quant_dot_kernel(w_type, level) : nullptr;
        if (kl != nullptr && kl->gemm != nullptr && n_tokens >= kl->gemm->min_tokens) {
            packed = std::max(packed, 64 + kl->gemm->act_bytes(n_in) * static_cast<size_t>(n_tokens));
        } else if (kl != nullptr && kl->packed != nullptr) {
            packed = std::max(packed, 64 + kl->packed->act_bytes(n_in) * static_cast<size_t>(n_tokens));
        }
    }
    return act + packed;
}

void matmul_cpu(ThreadPool& pool, const MatmulWeight& w, const float* x, int64_t n_tokens, float* y,
                void* scratch, size_t scratch_bytes, SimdLevel level, const uint32_t* row_blocks) {
    const QuantDotKernel* k = quant_dot_kernel(w.type, level);
    check_weight(w, k);
    if (n_tokens <= 0 || w.n_out <= 0) return;
    MatmulJob job;
    job.n_seg = 1;
    job.seg[0] = Segment{static_cast<const char*>(w.data), row_size(w.type, w.n_in), k->vec_dot, y, w.n_out, 0,
                         k->gemm, k->packed};
    job.n_in = w.n_in;
    job.n_tokens = n_tokens;
    int64_t total = w.n_out;
    if (row_blocks != nullptr) {
        total = 0;
        for (int64_t r = 0; r < w.n_out; r += 32) {
            if (row_blocks[r / 32] == 0) continue;
            const int64_t end = std::min(w.n_out, r + 32);
            if (!job.runs.empty() && job.runs.back() == r) job.runs.back() = end;
            else job.runs.insert(job.runs.end(), {r, end});
            total += end - r;
        }
        if (total == 0) return;
    }
    quantize_input(pool, *k, x, scratch, scratch_bytes, &job);
    execute(pool, job, total);
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
        const QuantDotKernel* k = quant_dot_kernel(ws[i].type, level);
        // A weight's gemm path reads the activations as k0's packs them: same packing or none.
        const QuantGemm* g = k->gemm != nullptr && k0->gemm != nullptr && k->gemm->pack_act == k0->gemm->pack_act
                                 ? k->gemm
                                 : nullptr;
        // Likewise its packed dot product.
        const QuantDotPacked* p =
            k->packed != nullptr && k0->packed != nullptr && k->packed->pack_act == k0->packed->pack_act ? k->packed
                                                                                                         : nullptr;
        job.seg[i] = Segment{static_cast<const char*>(ws[i].data), row_size(ws[i].type, ws[i].n_in), k->vec_dot,
                             ys[i], ws[i].n_out, total, g, p};
        total += ws[i].n_out;
    }
    job.n_in = ws[0].n_in;
    job.n_tokens = n_tokens;
    quantize_input(pool, *k0, x, scratch, scratch_bytes, &job);
    execute(pool, job, total);
}

}  // namespace jllm
