// bench/cuda_kernels/bench_cuda_kernels.cpp — jllm-bench-kernels: what the GPU's memory gives
// (a device-to-device copy, counted bytes read + bytes written) next to what our decode GEMV
// takes from it (cuda::launch_gemv_q8 on 8-bit activations, the engine's decode path, for the
// quantized types; launch_matmul otherwise; n_tok <= 4: weight bytes read per call / time).
//
// Cases, per weight type: one large matrix (65536 x 8192), and the matrices of a qwen3-4b
// decode step (the output matrix for Q6_K only, as in the q4_k_m file). Each case rotates over
// enough device copies of its matrix (together >= --rotate-mib, at least 2) that L2 holds none
// between two uses, as in a real decode step where every weight is read once per token. A sample
// is a run of calls captured once as a CUDA graph (as the engine runs its decode step; --launch
// stream: back-to-back launches) held behind a launch gate (cuda_bench.h) and timed with CUDA
// events, so it measures the GPU, not the host's launch rate; the table gives the median time per
// call over --reps samples. After timing, one call is checked against matmul_ref on the first
// rows (relative RMS error; > 5% fails the run).
// Token counts above 4 time the prefill GEMMs (launch_gemm on fp16 activations, and for tiled Q4_K
// on int8 tensor cores from their act_q8k copy, both converted outside the timing, with a split-K
// work buffer the size the engine allocates for qwen3-4b at its batch of 512; stream launches, as
// the engine's prefill) and add TFLOPS (TOPS for int8; 2 x rows x cols x n_tok per matrix / time)
// and the int8 / fp16 ratio per matrix; their check is against gemm_ref / gemm_s8_ref.
// --s8-gemv N[,M..] also times, for tiled Q4_K and 1..8 tokens, the int8 tensor-core GEMV
// (launch_gemv_s8, the prefill GEMM's arithmetic in a GEMV's grid) with N 256-column blocks per
// warp, as the GEMV is timed; its check is against gemv_s8_ref.
// Then the decode step's sampling kernels (argmax, top-k) over 151,936 logits, checked exactly.
//   jllm-bench-kernels [--copy-gib 2] [--reps 50] [--types q4_k,q6_k,q8_0] [--ntok 1,4[,33,512]]
//                      [--gemm int8,fp16] [--quick] [--launch graph|stream] [--rows-layout]
//                      [--no-sampling] [--s8-gemv 1,2 [--no-dp4a]] [--json FILE]
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cuda_bench.h"
#include "backend/cuda/cuda_ops.h"
#include "core/error.h"
#include "core/fp16.h"
#include "jllm_version.h"
#include "quant/quant_blocks.h"
#include "quant/quant_types.h"

namespace {

using jllm::GgmlType;
namespace cuda = jllm::cuda;

constexpr double CHECK_BOUND = 0.05;  // relative RMS error of the checked rows
constexpr int64_t CHECK_ROWS = 64;
constexpr int MAX_CALLS_PER_SAMPLE = 256;  // stream launches: stay well inside the driver's launch queue
constexpr int MIN_CALLS_PER_SAMPLE = 8;
constexpr int MAX_BENCH_TOKENS = 4096;
// The engine's split-K buffer for qwen3-4b (widest non-FFN product 4,096 rows) at n_batch 512:
// gemm_work_floats_for_batch(512, 4096) floats (as cuda_backend.cu allocates it).
constexpr int64_t ENGINE_WORK_ROWS = 4096;
constexpr int ENGINE_BATCH = 512;

// A weight matrix W [rows][cols]: rows = output features, cols = input features (GGUF ne[1], ne[0]).
struct Shape {
    const char* name;
    int64_t rows, cols;
    bool swiglu;  // gate and up read in one pass (MatOut::SwiGLU): two matrices per call
};

const Shape LARGE = {"large", 65536, 8192, false};
// qwen3-4b: n_embd 2560, n_ff 9728, 32 query heads and 8 KV heads of 128, n_vocab 151936.
const Shape QWEN3_4B[] = {
    {"attn_q", 4096, 2560, false},
    {"attn_k/v", 1024, 2560, false},
    {"attn_output", 2560, 4096, false},
    {"ffn_gate/up", 9728, 2560, false},
    {"ffn_gate+up (SwiGLU)", 9728, 2560, true},
    {"ffn_down", 2560, 9728, false},
};
const Shape QWEN3_4B_OUTPUT = {"output", 151936, 2560, false};  // Q6_K in q4_k_m (tied embedding)

const GgmlType KNOWN_TYPES[] = {GgmlType::F16,  GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0,
                                GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K,
                                GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

struct SplitMix {
    uint64_t s;
    uint64_t next() {
        uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    float uniform() { return static_cast<float>(next() >> 40) * (1.0f / 16777216.0f); }  // [0, 1)
};

// Byte offsets of the fp16 fields (scale d, and min/dmin where the format has one) in a block.
std::vector<size_t> half_fields(GgmlType type) {
    using namespace jllm;
    switch (type) {
        case GgmlType::Q4_0: return {offsetof(BlockQ4_0, d)};
        case GgmlType::Q4_1: return {offsetof(BlockQ4_1, d), offsetof(BlockQ4_1, m)};
        case GgmlType::Q5_0: return {offsetof(BlockQ5_0, d)};
        case GgmlType::Q5_1: return {offsetof(BlockQ5_1, d), offsetof(BlockQ5_1, m)};
        case GgmlType::Q8_0: return {offsetof(BlockQ8_0, d)};
        case GgmlType::Q2_K: return {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)};
        case GgmlType::Q3_K: return {offsetof(BlockQ3_K, d)};
        case GgmlType::Q4_K: return {offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin)};
        case GgmlType::Q5_K: return {offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin)};
        case GgmlType::Q6_K: return {offsetof(BlockQ6_K, d)};
        default: return {};
    }
}

void put_half(uint8_t* p, float v) {
    const jllm::Half h = jllm::to_half(v);
    std::memcpy(p, &h, sizeof(h));
}

// One matrix [rows][row_size(type, cols)] of valid blocks: random quants and packed scales,
// every fp16 field a small finite value in [2^-10, 2^-9) (F16: every element in [-1/16, 1/16)).
std::vector<uint8_t> random_matrix(GgmlType type, int64_t rows, int64_t cols, uint64_t seed) {
    const size_t bytes = jllm::row_size(type, cols) * static_cast<size_t>(rows);
    std::vector<uint8_t> w(bytes);
    SplitMix rng{seed};
    if (type == GgmlType::F16) {
        for (size_t i = 0; i + 2 <= bytes; i += 2) put_half(&w[i], (rng.uniform() - 0.5f) * 0.125f);
        return w;
    }
    size_t i = 0;
    for (; i + 8 <= bytes; i += 8) {
        const uint64_t r = rng.next();
        std::memcpy(&w[i], &r, 8);
    }
    for (; i < bytes; ++i) w[i] = static_cast<uint8_t>(rng.next());
    const size_t block = jllm::type_traits(type).type_size;
    const std::vector<size_t> fields = half_fields(type);
    for (size_t b = 0; b < bytes; b += block) {
        for (size_t off : fields) put_half(&w[b + off], (1.0f + rng.uniform()) / 1024.0f);
    }
    return w;
}

// A comma-separated list of integers in 1..max (what: how the error names one).
std::vector<int> parse_int_list(const std::string& s, const char* flag, int max = MAX_BENCH_TOKENS,
                                const char* what = "a token count") {
    std::vector<int> v;
    std::stringstream ss(s);
    std::string item;
    while (std::getline(ss, item, ',')) {
        if (item.empty()) continue;
        char* end = nullptr;
        const long x = std::strtol(item.c_str(), &end, 10);
        if (*end != '\0' || x < 1 || x > max) {
            throw jllm::JllmError(jllm::strfmt("%s: '%s' is not %s in 1..%d", flag, item.c_str(), what, max));
        }
        v.push_back(static_cast<int>(x));
    }
    if (v.empty()) throw jllm::JllmError(std::string(flag) + ": empty list");
    return v;
}

std::string upper(std::string s) {
    for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return s;
}

std::vector<GgmlType> parse_types(const std::string& s) {
    std::vector<GgmlType> v;
    std::stringstream ss(s);
    std::string item;
    while (std::getline(ss, item, ',')) {
        if (item.empty()) continue;
        bool found = false;
        for (GgmlType t : KNOWN_TYPES) {
            if (upper(item) == jllm::type_name(t)) {
                if (!cuda::matmul_type_supported(t)) {
                    throw jllm::JllmError("--types: " + item + " has no CUDA matmul kernel");
                }
                v.push_back(t);
                found = true;
            }
        }
        if (!found) {
            std::string known;
            for (GgmlType t : KNOWN_TYPES) known += std::string(known.empty() ? "" : ", ") + jllm::type_name(t);
            throw jllm::JllmError("--types: unknown type '" + item + "' (known: " + known + ")");
        }
    }
    if (v.empty()) throw jllm::JllmError("--types: empty list");
    return v;
}

double median_of(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

// Device buffer freed with the object.
struct DevBuf {
    void* p = nullptr;
    explicit DevBuf(size_t bytes) : p(cuda::dev_alloc(bytes)) {}
    ~DevBuf() { cuda::dev_free(p); }
    DevBuf(const DevBuf&) = delete;
    DevBuf& operator=(const DevBuf&) = delete;
    uint8_t* bytes() const { return static_cast<uint8_t*>(p); }
};

struct CopyResult {
    size_t bytes = 0;  // buffer size; each copy reads and writes it
    std::vector<double> ms;
    double best_gbps = 0, median_gbps = 0;
};

// cudaMemcpyAsync device to device of `bytes`, one warm-up then `reps` timed copies;
// GB/s = 2 * bytes / time (read + write), as the anchors count it.
CopyResult measure_copy(size_t bytes, int reps, cuda::BenchStream& stream) {
    DevBuf a(bytes), b(bytes);
    cuda::dev_memset(a.p, 1, bytes);
    cuda::dev_memset(b.p, 2, bytes);
    cuda::synchronize();
    cuda::EventTimer timer;
    CopyResult r;
    r.bytes = bytes;
    cuda::memcpy_d2d(b.p, a.p, bytes, stream.get());
    stream.sync();
    for (int i = 0; i < reps; ++i) {
        timer.start(stream.get());
        cuda::memcpy_d2d(b.p, a.p, bytes, stream.get());
        timer.stop(stream.get());
        r.ms.push_back(timer.elapsed_ms());
    }
    const double best = *std::min_element(r.ms.begin(), r.ms.end());
    r.best_gbps = 2.0 * static_cast<double>(bytes) / (best * 1e-3) / 1e9;
    r.median_gbps = 2.0 * static_cast<double>(bytes) / (median_of(r.ms) * 1e-3) / 1e9;
    return r;
}

struct CaseResult {
    std::string type, shape;
    int64_t rows = 0, cols = 0;
    int n_tok = 1;
    bool swiglu = false;
    // n_tok > 4: the prefill GEMM's arithmetic ("fp16" or "int8"); "" for the dp4a GEMV; "s8/bN" for the
    // int8 tensor-core GEMV with gemv_s8_split(cols, N)
    std::string gemm;
    uint64_t weight_bytes = 0;  // read per call (both matrices for SwiGLU)
    int copies = 0, calls_per_sample = 0;
    std::vector<double> us;  // time per call of each sample
    double us_median = 0, us_min = 0, us_max = 0;
    double gbps = 0, copy_share = 0;
    double tflops = 0;  // 2 x rows x cols x n_tok (x 2 for SwiGLU) / time
    double rel_err = 0;
    bool check_ok = true;
    int gate_timeouts = 0;
};

struct Options {
    int reps = 50;
    size_t rotate_bytes = size_t{256} << 20;
    std::vector<int> ntoks{1};
    uint64_t seed = 42;
    bool graph = true;  // time the calls as a CUDA graph (the engine's decode path) or as stream launches
    bool rows_layout = false;  // Q4_K/Q6_K in the file's rows (mapped weights) instead of tiles (copied weights)
    // n_tok > 4: the prefill GEMMs timed, each where it takes the matrix: "int8" (tiled Q4_K on act_q8k)
    // and "fp16" (every type; launch_gemm on fp16 activations).
    std::vector<std::string> gemms{"int8", "fp16"};
    // n_tok <= 8 on tiled Q4_K: the int8 tensor-core GEMV (launch_gemv_s8) too, once per entry: its
    // split's 256-column blocks per warp (gemv_s8_split); none: the dp4a GEMV alone.
    std::vector<int> s8_blocks_per_warp;
    bool dp4a = true;  // the dp4a GEMV (n_tok <= 4)
};

// Times launch_matmul on `shape` for every n_tok of opt.ntoks; appends one result per n_tok.
void run_case(GgmlType type, const Shape& shape, const Options& opt, double copy_gbps, cuda::BenchStream& stream,
              cuda::LaunchGate& gate, std::vector<CaseResult>& out) {
    const size_t mat_bytes = jllm::row_size(type, shape.cols) * static_cast<size_t>(shape.rows);
    const size_t stride = round_up(mat_bytes, 256);
    const int per_call = shape.swiglu ? 2 : 1;
    // Enough copies that a matrix is read again only after rotate_bytes of other weights, and
    // never by two consecutive calls.
    size_t copies = std::max<size_t>(2 * per_call, (opt.rotate_bytes + mat_bytes - 1) / mat_bytes);
    copies = round_up(copies, per_call);
    const int n_calls = static_cast<int>(copies) / per_call;  // distinct calls in the rotation
    const int calls_per_sample =
        opt.graph ? (n_calls >= MAX_CALLS_PER_SAMPLE ? MAX_CALLS_PER_SAMPLE
                                                     : n_calls * ((MIN_CALLS_PER_SAMPLE + n_calls - 1) / n_calls))
                  : std::min(MAX_CALLS_PER_SAMPLE, std::max(MIN_CALLS_PER_SAMPLE, n_calls));
    const int max_tok = *std::max_element(opt.ntoks.begin(), opt.ntoks.end());

    const std::vector<uint8_t> host_w = random_matrix(type, shape.rows, shape.cols, opt.seed);
    // The engine's device layout for copied weights (tiles where they fit) unless --rows-layout.
    const cuda::WeightFormat fmt(type, !opt.rows_layout && cuda::tiles_fit(type, shape.rows, shape.cols)
                                           ? cuda::WeightLayout::Tiles
                                           : cuda::WeightLayout::Rows);
    std::vector<uint8_t> tiled_w;
    if (fmt.tiled()) {
        tiled_w.resize(host_w.size());
        cuda::to_tiles(type, host_w.data(), tiled_w.data(), shape.rows, shape.cols);
    }
    std::vector<float> host_x(static_cast<size_t>(max_tok * shape.cols));
    SplitMix rng{opt.seed ^ 0x5EEDull};
    for (float& v : host_x) v = 2.0f * rng.uniform() - 1.0f;

    DevBuf w(copies * stride);
    DevBuf x(host_x.size() * sizeof(float));
    DevBuf y(static_cast<size_t>(max_tok * shape.rows) * sizeof(float));
    // upload() runs on the legacy stream, which a non-blocking stream does not wait for.
    cuda::upload(w.p, fmt.tiled() ? tiled_w.data() : host_w.data(), mat_bytes);
    cuda::upload(x.p, host_x.data(), host_x.size() * sizeof(float));
    cuda::synchronize();
    for (size_t c = 1; c < copies; ++c) cuda::memcpy_d2d(w.bytes() + c * stride, w.p, mat_bytes, stream.get());
    stream.sync();

    const cuda::MatOut mode = shape.swiglu ? cuda::MatOut::SwiGLU : cuda::MatOut::Store;
    // The engine's decode path: the dp4a GEMV on 8-bit activations (quantized once per n_tok,
    // outside the timing, as the preceding kernel does in the forward pass); fp32 GEMV otherwise.
    // Beyond GEMV_MAX_TOKENS: the prefill GEMM with the engine's split-K buffer.
    const bool q8 = cuda::gemv_q8_type_supported(type);
    DevBuf xq(cuda::act_q8_bytes(std::min(max_tok, cuda::GEMV_MAX_TOKENS), shape.cols));
    // SwiGLU also writes its output's 8-bit copy (ffn_down's input), as in the engine (by halves
    // where the engine's tiled ffn_down would read them).
    DevBuf yq(shape.swiglu ? cuda::act_q8_bytes(std::min(max_tok, cuda::GEMV_MAX_TOKENS), shape.rows) : 1);
    // The GEMM's fp16 input (converted once, outside the timing, as the engine does per input).
    DevBuf xh(host_x.size() * sizeof(uint16_t));
    // The int8 GEMM's input (act_q8k of xh) per token count, also outside the timing.
    DevBuf xq8(cuda::gemm_takes_s8(fmt) ? cuda::act_q8k_bytes(max_tok, shape.cols) : 1);
    const bool s8v = cuda::gemm_takes_s8(fmt) && !opt.s8_blocks_per_warp.empty();
    if (max_tok > cuda::GEMV_MAX_TOKENS || s8v) {
        cuda::launch_to_f16(static_cast<const float*>(x.p), static_cast<int64_t>(host_x.size()),
                            static_cast<uint16_t*>(xh.p), stream.get());
        stream.sync();
    }
    const size_t work_floats = cuda::gemm_work_floats_for_batch(ENGINE_BATCH, ENGINE_WORK_ROWS);
    DevBuf work(max_tok > cuda::GEMV_MAX_TOKENS ? work_floats * sizeof(float) : 1);
    bool int8 = false;  // the GEMM of the case being timed
    int s8_split = 0;   // > 0: the case times launch_gemv_s8 with this split
    auto call = [&](int k, int n_tok) {  // the k-th call of the rotation
        const uint8_t* w1 = w.bytes() + static_cast<size_t>(k % n_calls) * per_call * stride;
        const uint8_t* w2 = shape.swiglu ? w1 + stride : nullptr;
        if (s8_split > 0) {
            cuda::launch_gemv_s8(w1, w2, shape.rows, shape.cols, xq8.p, n_tok, s8_split, static_cast<float*>(y.p), mode,
                                 stream.get());
        } else if (n_tok > cuda::GEMV_MAX_TOKENS) {
            cuda::launch_gemm(fmt, w1, w2, shape.rows, shape.cols, static_cast<const uint16_t*>(xh.p), n_tok,
                              static_cast<float*>(y.p), mode, stream.get(), static_cast<float*>(work.p), work_floats,
                              int8 ? xq8.p : nullptr);
        } else if (q8) {
            cuda::launch_gemv_q8(fmt, w1, w2, shape.rows, shape.cols, xq.p, n_tok, static_cast<float*>(y.p), mode,
                                 stream.get(), shape.swiglu ? yq.p : nullptr, fmt.tiled());
        } else {
            cuda::launch_matmul(fmt, w1, w2, shape.rows, shape.cols, static_cast<const float*>(x.p),
                                static_cast<const uint16_t*>(xh.p), n_tok,
                                static_cast<float*>(y.p), mode, stream.get());
        }
    };

    cuda::EventTimer timer;
    // (n_tok, GEMM) pairs: one per GEMV token count, one per GEMM that takes the matrix beyond.
    std::vector<std::pair<int, std::string>> runs;
    for (int n_tok : opt.ntoks) {
        if (s8v && n_tok <= cuda::GEMV_S8_MAX_TOKENS) {
            for (int b : opt.s8_blocks_per_warp) runs.emplace_back(n_tok, "s8/b" + std::to_string(b));
        }
        if (n_tok <= cuda::GEMV_MAX_TOKENS) {
            if (opt.dp4a || !s8v) runs.emplace_back(n_tok, "");
            continue;
        }
        for (const std::string& g : opt.gemms) {
            if (g == "fp16" || cuda::gemm_takes_s8(fmt)) runs.emplace_back(n_tok, g);
        }
    }
    for (const auto& [n_tok, gemm_kind] : runs) {
        int8 = gemm_kind == "int8";
        s8_split = gemm_kind.rfind("s8/b", 0) == 0 ? cuda::gemv_s8_split(shape.cols, std::stoi(gemm_kind.substr(4)))
                                                   : 0;
        if (int8 || s8_split > 0) {
            cuda::launch_quantize_q8k(static_cast<const uint16_t*>(xh.p), n_tok, shape.cols, xq8.p, stream.get());
            stream.sync();
        }
        CaseResult r;
        r.gemm = gemm_kind;
        r.type = jllm::type_name(type);
        r.shape = shape.name;
        r.rows = shape.rows;
        r.cols = shape.cols;
        r.n_tok = n_tok;
        r.swiglu = shape.swiglu;
        r.weight_bytes = static_cast<uint64_t>(mat_bytes) * per_call;
        r.copies = static_cast<int>(copies);
        const bool gemm = n_tok > cuda::GEMV_MAX_TOKENS && s8_split == 0;
        // GEMM calls are up to two launches (product + split-K reduction), all held behind the gate.
        const int cps = gemm ? std::min(MAX_CALLS_PER_SAMPLE / 2, std::max(MIN_CALLS_PER_SAMPLE, n_calls))
                             : calls_per_sample;
        r.calls_per_sample = cps;
        if (q8 && !gemm && s8_split == 0) {
            cuda::launch_quantize_act(static_cast<const float*>(x.p), n_tok, shape.cols, xq.p, stream.get());
        }
        const int timeouts0 = gate.timeouts();
        int k = 0;
        for (int i = 0; i < cps; ++i) call(k++, n_tok);  // warm-up (and module load)
        stream.sync();
        // The engine launches prefill products on its stream (no graph): GEMM samples do too.
        const bool use_graph = opt.graph && !gemm;
        cuda::BenchGraph graph;
        if (use_graph) {
            // One pass over the rotation from copy 0 (calls_per_sample is a multiple of n_calls
            // or at least 256 calls, so a sample's first call's copy was not read in the last
            // rotate_bytes): the graph replays it per sample.
            graph.begin(stream.get());
            for (int i = 0; i < cps; ++i) call(i, n_tok);
            graph.end(stream.get());
            graph.launch(stream.get());
            stream.sync();
        }
        for (int s = 0; s < opt.reps; ++s) {
            gate.hold(stream.get());
            timer.start(stream.get());
            if (use_graph) {
                graph.launch(stream.get());
            } else {
                for (int i = 0; i < cps; ++i) call(k++, n_tok);
            }
            timer.stop(stream.get());
            gate.release();
            r.us.push_back(timer.elapsed_ms() * 1e3 / cps);
        }
        stream.sync();
        r.gate_timeouts = gate.timeouts() - timeouts0;
        r.us_median = median_of(r.us);
        r.us_min = *std::min_element(r.us.begin(), r.us.end());
        r.us_max = *std::max_element(r.us.begin(), r.us.end());
        r.gbps = static_cast<double>(r.weight_bytes) / (r.us_median * 1e-6) / 1e9;
        r.copy_share = copy_gbps > 0 ? r.gbps / copy_gbps : 0;
        r.tflops = 2.0 * static_cast<double>(shape.rows) * static_cast<double>(shape.cols) * n_tok * per_call /
                   (r.us_median * 1e-6) / 1e12;

        // Check: the first CHECK_ROWS rows of copy 0 (and 1 for SwiGLU, same bytes) against the
        // scalar reference; every output finite.
        call(0, n_tok);
        stream.sync();
        std::vector<float> got(static_cast<size_t>(n_tok * shape.rows));
        cuda::download(got.data(), y.p, got.size() * sizeof(float));
        const int64_t nr = std::min(CHECK_ROWS, shape.rows);
        std::vector<float> ref(static_cast<size_t>(n_tok * nr));
        // The GEMM rounds weights and activations to fp16 (gemm_ref is the twin of the kernel it
        // takes), or the int8 GEMM its activations to act_q8k (gemm_s8_ref).
        const uint8_t* w2_ref = shape.swiglu ? host_w.data() : nullptr;
        if (int8 || s8_split > 0) {
            std::vector<uint8_t> hq(cuda::act_q8k_bytes(n_tok, shape.cols));
            cuda::quantize_q8k_ref(host_x.data(), n_tok, shape.cols, hq.data());
            cuda::gemv_s8_ref(host_w.data(), w2_ref, nr, shape.cols, hq.data(), n_tok, std::max(1, s8_split),
                              ref.data(), mode);
        } else if (gemm) {
            cuda::gemm_ref(fmt, host_w.data(), w2_ref, nr, shape.cols, host_x.data(), n_tok, ref.data(), mode);
        } else {
            cuda::matmul_ref(type, host_w.data(), w2_ref, nr, shape.cols, host_x.data(), n_tok, ref.data(), mode);
        }
        double se = 0, sr = 0;
        bool finite = true;
        for (float v : got) finite = finite && std::isfinite(v);
        for (int t = 0; t < n_tok; ++t) {
            for (int64_t i = 0; i < nr; ++i) {
                const double g = got[static_cast<size_t>(t * shape.rows + i)], e = ref[static_cast<size_t>(t * nr + i)];
                se += (g - e) * (g - e);
                sr += e * e;
            }
        }
        r.rel_err = sr > 0 ? std::sqrt(se / sr) : std::sqrt(se);
        r.check_ok = finite && r.rel_err <= CHECK_BOUND;
        if (!finite) r.rel_err = NAN;
        out.push_back(r);
        std::fprintf(stderr, "  %-5s %-22s n_tok %d%s%s: %9.2f us  %8.1f GB/s  %6.1f TFLOPS%s\n", r.type.c_str(),
                     r.shape.c_str(), n_tok, r.gemm.empty() ? "" : " ", r.gemm.c_str(), r.us_median, r.gbps, r.tflops,
                     r.check_ok ? "" : "  CHECK FAILED");
    }
}

// The decode step's sampling kernels over a qwen3 vocabulary of logits (randn x 3, a few ties at
// the top): the argmax and the top-k for the k buckets the engine runs (cuda_backend.cu rounds k up
// to a power of two), each as a graph of SAMPLING_CALLS calls on the same logits (L2 holds them, as
// after the step's output product), median over `reps` samples; checked exactly against the twins.
constexpr int64_t SAMPLING_VOCAB = 151936;
constexpr int SAMPLING_CALLS = 100;

struct SamplingResult {
    std::string kernel;  // "argmax" or "top-k"
    int k = 0;
    double us_median = 0, us_min = 0, us_max = 0;
    bool check_ok = false;
};

std::vector<SamplingResult> measure_sampling(int reps, uint64_t seed, cuda::BenchStream& stream) {
    std::vector<float> logits(static_cast<size_t>(SAMPLING_VOCAB));
    SplitMix rng{seed ^ 0x5A3D1E};
    for (float& v : logits) {  // sum of 4 uniforms: roughly normal, sd ~3
        double u = 0;
        for (int i = 0; i < 4; ++i) u += rng.uniform() - 0.5;
        v = static_cast<float>(u * 5.2);
    }
    for (int i = 0; i < 6; ++i) logits[static_cast<size_t>(i * 20011)] = 9.5f;  // ties at the top
    DevBuf x(logits.size() * sizeof(float)), argmax_work(cuda::argmax_work_bytes()),
        out_id(cuda::TOPK_MAX * sizeof(int32_t)), out_v(cuda::TOPK_MAX * sizeof(float)), topk_work(cuda::topk_work_floats(SAMPLING_VOCAB, cuda::TOPK_MAX) * sizeof(float));
    cuda::upload(x.p, logits.data(), logits.size() * sizeof(float));
    cuda::dev_memset(argmax_work.p, 0, cuda::argmax_work_bytes());
    const auto* xf = static_cast<const float*>(x.p);
    auto* ids = static_cast<int32_t*>(out_id.p);
    std::vector<SamplingResult> out;
    cuda::EventTimer timer;
    for (int k : {0, 1, 64, 128}) {  // 0: the argmax
        auto call = [&] {
            if (k == 0) cuda::launch_argmax(xf, SAMPLING_VOCAB, argmax_work.p, ids, stream.get());
            else cuda::launch_topk(xf, SAMPLING_VOCAB, k, static_cast<float*>(topk_work.p), static_cast<float*>(out_v.p), ids, stream.get());
        };
        SamplingResult r;
        r.kernel = k == 0 ? "argmax" : "top-k";
        r.k = k == 0 ? 1 : k;
        call();
        stream.sync();
        cuda::BenchGraph graph;
        graph.begin(stream.get());
        for (int i = 0; i < SAMPLING_CALLS; ++i) call();
        graph.end(stream.get());
        graph.launch(stream.get());
        stream.sync();
        std::vector<double> us;
        for (int s = 0; s < reps; ++s) {
            timer.start(stream.get());
            graph.launch(stream.get());
            timer.stop(stream.get());
            us.push_back(timer.elapsed_ms() * 1e3 / SAMPLING_CALLS);
        }
        r.us_median = median_of(us);
        r.us_min = *std::min_element(us.begin(), us.end());
        r.us_max = *std::max_element(us.begin(), us.end());
        std::vector<int32_t> got_i(static_cast<size_t>(r.k)), ref_i(static_cast<size_t>(r.k));
        std::vector<float> got_v(static_cast<size_t>(r.k)), ref_v(static_cast<size_t>(r.k));
        cuda::download(got_i.data(), ids, got_i.size() * sizeof(int32_t));
        if (k == 0) {
            ref_i[0] = cuda::argmax_ref(logits.data(), SAMPLING_VOCAB);
            r.check_ok = got_i == ref_i;
        } else {
            cuda::download(got_v.data(), out_v.p, got_v.size() * sizeof(float));
            cuda::topk_ref(logits.data(), SAMPLING_VOCAB, k, ref_v.data(), ref_i.data());
            r.check_ok = got_i == ref_i && got_v == ref_v;
        }
        std::fprintf(stderr, "  %-6s k %3d: %7.2f us%s\n", r.kernel.c_str(), r.k, r.us_median, r.check_ok ? "" : "  CHECK FAILED");
        out.push_back(r);
    }
    return out;
}

const CaseResult* find_case(const std::vector<CaseResult>& v, const char* type, const char* shape) {
    for (const CaseResult& r : v) {
        if (r.type == type && r.shape == shape && r.n_tok == 1 && r.gemm.empty()) return &r;
    }
    return nullptr;
}

// The matmuls of one qwen3-4b q4_k_m decode token from the n_tok = 1 rows: 36 layers with Q4_K
// attn_q, attn_k, attn_output and gate+up (fused SwiGLU); attn_v and ffn_down Q6_K in 18 layers
// (the recipe's 36 + 1 Q6_K tensors) and Q4_K in the other 18; the Q6_K output matrix once.
struct Estimate {
    bool ok = false;
    double us = 0, bytes = 0;
};
Estimate qwen3_4b_estimate(const std::vector<CaseResult>& v) {
    const CaseResult* q4[] = {find_case(v, "Q4_K", "attn_q"), find_case(v, "Q4_K", "attn_k/v"),
                              find_case(v, "Q4_K", "attn_output"), find_case(v, "Q4_K", "ffn_gate+up (SwiGLU)"),
                              find_case(v, "Q4_K", "ffn_down")};
    const CaseResult* q6[] = {find_case(v, "Q6_K", "attn_k/v"), find_case(v, "Q6_K", "ffn_down"),
                              find_case(v, "Q6_K", "output")};
    Estimate e;
    for (const CaseResult* r : q4) {
        if (!r) return e;
    }
    for (const CaseResult* r : q6) {
        if (!r) return e;
    }
    auto add = [&](const CaseResult* r, double times) {
        e.us += times * r->us_median;
        e.bytes += times * static_cast<double>(r->weight_bytes);
    };
    add(q4[0], 36);
    add(q4[1], 36);  // attn_k
    add(q4[2], 36);
    add(q4[3], 36);
    add(q4[1], 18);  // attn_v, Q4_K layers
    add(q4[4], 18);
    add(q6[0], 18);  // attn_v, Q6_K layers
    add(q6[1], 18);
    add(q6[2], 1);
    e.ok = true;
    return e;
}

std::string human_mb(uint64_t b) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.2f", static_cast<double>(b) / 1e6);
    return buf;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"jllm-bench-kernels: device copy bandwidth and decode GEMV bandwidth per weight type"};
    double copy_gib = 2.0;
    int reps = 50, copy_reps = 10;
    double rotate_mib = 256;
    std::string types_s = "q4_k,q6_k,q8_0", ntok_s = "1", gemm_s = "int8,fp16", json_path, s8_s;
    bool no_dp4a = false;
    bool quick = false, no_large = false, no_model = false;
    std::string launch = "graph";
    bool rows_layout = false;
    uint64_t seed = 42;
    app.add_option("--copy-gib", copy_gib, "device-to-device copy buffer size in GiB")->capture_default_str();
    app.add_option("--copy-reps", copy_reps, "timed copies (the best is reported)")->capture_default_str();
    app.add_option("--reps", reps, "timed samples per GEMV case (the median is reported)")->capture_default_str();
    app.add_option("--types", types_s, "weight types, comma-separated (q4_k, q6_k, q8_0, q4_0, f16, ...)")
        ->capture_default_str();
    app.add_option("--ntok", ntok_s, "tokens per call, comma-separated, each 1..4096 (above 4: the prefill GEMM)")
        ->capture_default_str();
    app.add_option("--gemm", gemm_s, "n_tok > 4: the prefill GEMMs to time, comma-separated: int8 (tiled Q4_K on "
                                     "8-bit activations), fp16")
        ->capture_default_str();
    app.add_option("--s8-gemv", s8_s, "n_tok <= 8 on tiled Q4_K: also time the int8 tensor-core GEMV, once per "
                                      "entry (comma-separated: 256-column blocks per warp of its column split, 1..64)");
    app.add_flag("--no-dp4a", no_dp4a, "with --s8-gemv: skip the dp4a GEMV on the matrices the int8 GEMV takes");
    app.add_option("--rotate-mib", rotate_mib, "the copies of a matrix total at least this (MiB; L2 must not hold them)")
        ->capture_default_str();
    app.add_option("--launch", launch, "how a sample's calls are launched: graph (one CUDA graph, as the engine's "
                                       "decode step) or stream (back-to-back launches behind the gate)")
        ->check(CLI::IsMember({"graph", "stream"}))
        ->capture_default_str();
    app.add_flag("--rows-layout", rows_layout, "Q4_K and Q6_K matrices in the file's row layout (the engine's mapped "
                                               "weights) instead of the tiled layout of its copied weights");
    app.add_flag("--no-large", no_large, "skip the large-matrix cases");
    app.add_flag("--no-model", no_model, "skip the qwen3-4b shapes");
    bool no_sampling = false;
    app.add_flag("--no-sampling", no_sampling, "skip the sampling kernels (argmax, top-k)");
    app.add_flag("--quick", quick, "1 GiB copy, 5 copies, 10 samples per case");
    app.add_option("--json", json_path, "also write every number as JSON to this file");
    app.add_option("--seed", seed, "seed of the random weights and activations")->capture_default_str();
    app.set_version_flag("--version", std::string(JLLM_VERSION) + " (" + JLLM_GIT_COMMIT + ")");
    CLI11_PARSE(app, argc, argv);

    if (quick) {
        copy_gib = std::min(copy_gib, 1.0);
        copy_reps = std::min(copy_reps, 5);
        reps = std::min(reps, 10);
    }
    try {
        if (copy_gib <= 0 || copy_reps < 1 || reps < 1 || rotate_mib <= 0) {
            throw jllm::JllmError("--copy-gib, --copy-reps, --reps and --rotate-mib must be positive");
        }
        Options opt;
        opt.reps = reps;
        opt.ntoks = parse_int_list(ntok_s, "--ntok");
        opt.seed = seed;
        opt.graph = launch == "graph";
        opt.rows_layout = rows_layout;
        if (!s8_s.empty()) {
            opt.s8_blocks_per_warp = parse_int_list(s8_s, "--s8-gemv", 64, "a count of blocks per warp");
        } else if (no_dp4a) {
            throw jllm::JllmError("--no-dp4a needs --s8-gemv");
        }
        opt.dp4a = !no_dp4a;
        opt.gemms.clear();
        for (size_t p = 0; p <= gemm_s.size();) {
            const size_t e = std::min(gemm_s.find(',', p), gemm_s.size());
            const std::string g = gemm_s.substr(p, e - p);
            if (g != "int8" && g != "fp16") throw jllm::JllmError("--gemm: '" + g + "' is not int8 or fp16");
            opt.gemms.push_back(g);
            p = e + 1;
        }
        const std::vector<GgmlType> types = parse_types(types_s);
        if (cuda::device_count() == 0) {
            throw jllm::JllmError("no CUDA device found (cudaGetDeviceCount reports none or no driver is loaded); "
                                  "this program needs a GPU");
        }
        const cuda::DeviceInfo dev = cuda::device_info(0);
        // The context before anything else runs: the GPU's used memory at the driver's per-thread
        // stack limit, then at the engine's (the GEMVs below run under the engine's, as it does).
        const size_t stack_default = cuda::thread_stack_limit();
        const int64_t used_default = cuda::device_used_bytes();
        const size_t stack_engine = cuda::fit_thread_stack();
        const int64_t used_engine = cuda::device_used_bytes();
        opt.rotate_bytes = std::max(static_cast<size_t>(rotate_mib * 1048576.0), 4 * dev.l2_bytes);

        char date[64];
        const std::time_t now = std::time(nullptr);
        std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
        std::string command;
        for (int i = 0; i < argc; ++i) command += std::string(i ? " " : "") + argv[i];

        cuda::BenchStream stream;
        cuda::LaunchGate gate;
        std::fprintf(stderr, "jllm-bench-kernels: %s, copy bandwidth (%.2f GiB, %d copies)...\n", dev.name.c_str(),
                     copy_gib, copy_reps);
        const CopyResult copy = measure_copy(static_cast<size_t>(copy_gib * 1073741824.0), copy_reps, stream);

        std::vector<CaseResult> cases;
        for (GgmlType t : types) {
            if (!no_large) run_case(t, LARGE, opt, copy.best_gbps, stream, gate, cases);
            if (!no_model) {
                for (const Shape& s : QWEN3_4B) run_case(t, s, opt, copy.best_gbps, stream, gate, cases);
                if (t == GgmlType::Q6_K) run_case(t, QWEN3_4B_OUTPUT, opt, copy.best_gbps, stream, gate, cases);
            }
        }
        const Estimate est = qwen3_4b_estimate(cases);
        std::vector<SamplingResult> sampling;
        if (!no_sampling) sampling = measure_sampling(reps, seed, stream);
        int failed = 0, timeouts = 0;
        for (const CaseResult& r : cases) {
            failed += r.check_ok ? 0 : 1;
            timeouts += r.gate_timeouts;
        }
        for (const SamplingResult& r : sampling) failed += r.check_ok ? 0 : 1;

        // ---- markdown
        std::printf("## jllm-bench-kernels %s (commit %s), %s\n\n", JLLM_VERSION, JLLM_GIT_COMMIT, date);
        std::printf("- device: %s (SM %d.%d, %d SMs, peak SM clock %d MHz, memory clock %d MHz x %d bit = %.0f GB/s "
                    "theoretical), L2 %.1f MiB, memory %.1f GiB; CUDA driver %s, runtime %s\n",
                    dev.name.c_str(), dev.cc_major, dev.cc_minor, dev.sm_count, dev.sm_clock_khz / 1000,
                    dev.mem_clock_khz / 1000, dev.bus_width_bits, dev.theoretical_gbps(), dev.l2_bytes / 1048576.0,
                    dev.total_bytes / 1073741824.0, cuda::cuda_version_string(dev.driver_version).c_str(),
                    cuda::cuda_version_string(dev.runtime_version).c_str());
        std::printf("- command: `%s`\n", command.c_str());
        std::printf("- CUDA context (the GPU's used memory once this process's context exists; other processes' "
                    "memory included): %.1f MiB at the per-thread stack limit it started with (%zu bytes), %.1f MiB "
                    "at the engine's (%zu bytes)\n",
                    used_default / 1048576.0, stack_default, used_engine / 1048576.0, stack_engine);
        std::printf("- Q4_K/Q6_K weights: %s\n", rows_layout
                                                          ? "the file's rows (--rows-layout; the engine's mapped weights)"
                                                          : "the tiled layout (the engine's copied weights)");
        std::printf("- device copy (cudaMemcpy D2D, %.2f GiB, read + write): **%.1f GB/s** best of %d (median %.1f)\n",
                    copy.bytes / 1073741824.0, copy.best_gbps, copy_reps, copy.median_gbps);
        std::printf("- GEMV: cuda::launch_gemv_q8 (8-bit activations; launch_matmul for unquantized types), median of %d samples of back-to-back calls (%s); each matrix rotates over "
                    "copies totalling >= %.0f MiB; GB/s = weight bytes / time; check = relative RMS error of %lld rows "
                    "against matmul_ref; n_tok > 4: cuda::launch_gemm (the prefill GEMM, column GEMM) on fp16 activations (fp16) or on "
                    "their act_q8k copy (int8; converted and quantized outside the timing), stream launches, checked "
                    "against gemm_ref / gemm_s8_ref; TFLOPS: TOPS for int8; GEMM s8/bN: cuda::launch_gemv_s8 (the int8 "
                    "tensor-core GEMV on act_q8k, quantized outside the timing; split gemv_s8_split(cols, N)), "
                    "timed as the GEMV, checked against gemv_s8_ref\n\n",
                    opt.reps, opt.graph ? "one CUDA graph per sample" : "stream launches", opt.rotate_bytes / 1048576.0, static_cast<long long>(CHECK_ROWS));
        std::printf("| type | matrix | rows | cols | n_tok | weight MB | copies | us / call | min .. max | GB/s | "
                    "%% of copy | check | TFLOPS | GEMM |\n");
        std::printf("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---|\n");
        for (const CaseResult& r : cases) {
            std::printf("| %s | %s | %lld | %lld | %d | %s | %d | %.2f | %.2f .. %.2f | %.1f | %.1f%% | %s %.1e | %.1f | %s |\n",
                        r.type.c_str(), r.shape.c_str(), static_cast<long long>(r.rows),
                        static_cast<long long>(r.cols), r.n_tok, human_mb(r.weight_bytes).c_str(), r.copies,
                        r.us_median, r.us_min, r.us_max, r.gbps, 100.0 * r.copy_share,
                        r.check_ok ? "ok" : "FAILED", r.rel_err, r.tflops, r.gemm.empty() ? "-" : r.gemm.c_str());
        }
        // The two GEMMs on the same matrix and token count: int8 TOPS over fp16 TFLOPS.
        bool ratio_head = false;
        for (const CaseResult& a : cases) {
            if (a.gemm != "int8") continue;
            for (const CaseResult& b : cases) {
                if (b.gemm != "fp16" || b.type != a.type || b.shape != a.shape || b.n_tok != a.n_tok) continue;
                if (!ratio_head) {
                    std::printf("\nPrefill GEMMs on the same matrix (int8 TOPS / fp16 TFLOPS):\n\n"
                                "| type | matrix | n_tok | int8 TOPS | fp16 TFLOPS | ratio |\n|---|---|---:|---:|---:|---:|\n");
                    ratio_head = true;
                }
                std::printf("| %s | %s | %d | %.1f | %.1f | %.2fx |\n", a.type.c_str(), a.shape.c_str(), a.n_tok,
                            a.tflops, b.tflops, a.tflops / b.tflops);
            }
        }
        if (est.ok) {
            std::printf("\nqwen3-4b q4_k_m, the matmuls of one decode token (n_tok 1, sum of the rows above): %.1f us "
                        "for %.1f MB = %.1f GB/s (%.1f%% of copy); a matmul-only bound of %.0f tok/s\n",
                        est.us, est.bytes / 1e6, est.bytes / (est.us * 1e-6) / 1e9,
                        100.0 * est.bytes / (est.us * 1e-6) / 1e9 / copy.best_gbps, 1e6 / est.us);
        }
        if (!sampling.empty()) {
            std::printf("\nSampling kernels over %lld logits (a graph of %d calls on the same logits, median of %d "
                        "samples; check: exact against argmax_ref / topk_ref):\n\n",
                        static_cast<long long>(SAMPLING_VOCAB), SAMPLING_CALLS, opt.reps);
            std::printf("| kernel | k | us / call | min .. max | check |\n|---|---:|---:|---:|---|\n");
            for (const SamplingResult& r : sampling) {
                std::printf("| %s | %d | %.2f | %.2f .. %.2f | %s |\n", r.kernel.c_str(), r.k, r.us_median, r.us_min,
                            r.us_max, r.check_ok ? "ok" : "FAILED");
            }
        }
        if (timeouts > 0) {
            std::printf("\nwarning: %d launch-gate timeouts: the host enqueued too slowly and those samples include "
                        "host time\n", timeouts);
        }
        if (failed > 0) std::printf("\n**%d case(s) FAILED the check against matmul_ref** (bound %.0e)\n", failed, CHECK_BOUND);

        // ---- JSON
        if (!json_path.empty()) {
            nlohmann::json j;
            j["program"] = "jllm-bench-kernels";
            j["version"] = JLLM_VERSION;
            j["commit"] = JLLM_GIT_COMMIT;
            j["date"] = date;
            j["command"] = command;
            j["launch"] = opt.graph ? "graph" : "stream";
            j["device"] = {{"name", dev.name},
                           {"compute_capability", std::to_string(dev.cc_major) + "." + std::to_string(dev.cc_minor)},
                           {"sm_count", dev.sm_count},
                           {"sm_clock_mhz", dev.sm_clock_khz / 1000},
                           {"mem_clock_mhz", dev.mem_clock_khz / 1000},
                           {"bus_width_bits", dev.bus_width_bits},
                           {"theoretical_gbps", dev.theoretical_gbps()},
                           {"l2_bytes", dev.l2_bytes},
                           {"total_bytes", dev.total_bytes},
                           {"cuda_driver", cuda::cuda_version_string(dev.driver_version)},
                           {"cuda_runtime", cuda::cuda_version_string(dev.runtime_version)}};
            j["copy"] = {{"bytes", copy.bytes},
                         {"counted_bytes", 2 * copy.bytes},
                         {"best_gbps", copy.best_gbps},
                         {"median_gbps", copy.median_gbps},
                         {"ms", copy.ms}};
            j["context"] = {{"stack_default_bytes", stack_default},
                            {"device_used_at_default", used_default},
                            {"stack_engine_bytes", stack_engine},
                            {"device_used_at_engine", used_engine}};
            j["rotate_bytes"] = opt.rotate_bytes;
            j["reps"] = opt.reps;
            j["check_bound"] = CHECK_BOUND;
            nlohmann::json arr = nlohmann::json::array();
            for (const CaseResult& r : cases) {
                arr.push_back({{"type", r.type},
                               {"matrix", r.shape},
                               {"rows", r.rows},
                               {"cols", r.cols},
                               {"n_tok", r.n_tok},
                               {"swiglu", r.swiglu},
                               {"gemm", r.gemm},
                               {"weight_bytes", r.weight_bytes},
                               {"copies", r.copies},
                               {"calls_per_sample", r.calls_per_sample},
                               {"us_median", r.us_median},
                               {"us_min", r.us_min},
                               {"us_max", r.us_max},
                               {"us_samples", r.us},
                               {"gbps", r.gbps},
                               {"copy_share", r.copy_share},
                               {"tflops", r.tflops},
                               {"rel_rms_err", std::isfinite(r.rel_err) ? nlohmann::json(r.rel_err) : nlohmann::json()},
                               {"check_ok", r.check_ok},
                               {"gate_timeouts", r.gate_timeouts}});
            }
            j["cases"] = arr;
            nlohmann::json sarr = nlohmann::json::array();
            for (const SamplingResult& r : sampling) {
                sarr.push_back({{"kernel", r.kernel},
                                {"k", r.k},
                                {"n", SAMPLING_VOCAB},
                                {"us_median", r.us_median},
                                {"us_min", r.us_min},
                                {"us_max", r.us_max},
                                {"check_ok", r.check_ok}});
            }
            j["sampling"] = sarr;
            if (est.ok) {
                j["qwen3_4b_q4_k_m_token_matmuls"] = {{"us", est.us},
                                                      {"bytes", est.bytes},
                                                      {"gbps", est.bytes / (est.us * 1e-6) / 1e9},
                                                      {"tok_s_bound", 1e6 / est.us}};
            }
            std::ofstream f(json_path);
            f << j.dump(2) << "\n";
            if (!f) throw jllm::JllmError("cannot write " + json_path);
        }
        return failed > 0 ? 2 : 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "jllm-bench-kernels: %s\n", e.what());
        return 1;
    }
}
