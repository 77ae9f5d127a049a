// bench/cpu_kernels/bench_cpu_kernels.cpp — CPU matmul throughput in GB/s of weights read, per
// weight type, decode (1 token) and prefill (64 tokens) shapes, 1 and 2 threads. Weights rotate
// over enough copies (>= 256 MiB) that every call streams them from DRAM, as a real decode
// step does; BM_read_bandwidth is what the memory system gives a plain sum loop, for scale.
// JLLM_CPU_SIMD=scalar|avx2|avx512 picks the kernel level (backend/backend_options.h).
#include <benchmark/benchmark.h>

#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "engine/env_options.h"
#include "backend/cpu/matmul.h"
#include "core/thread_pool.h"
#include "quant/quant_blocks.h"

namespace {

using namespace jllm;

constexpr size_t ROTATE_BYTES = size_t{256} << 20;

// The kernels' SIMD level: JLLM_CPU_SIMD's, read once as the engine reads it.
SimdLevel level() {
    static const SimdLevel l = backend_options_from_env().cpu.simd;
    return l;
}

ThreadPool& pool_for(int threads) {
    static std::map<int, std::unique_ptr<ThreadPool>> pools;
    auto& p = pools[threads];
    if (!p) p = std::make_unique<ThreadPool>(threads);
    return *p;
}

// Random bytes with every fp16 scale field set to a small finite value.
std::vector<uint8_t> random_weights(GgmlType type, int64_t n_in, int64_t n_out, std::mt19937& rng) {
    const size_t rb = row_size(type, n_in);
    std::vector<uint8_t> buf(rb * static_cast<size_t>(n_out));
    for (size_t i = 0; i + 4 <= buf.size(); i += 4) {
        const uint32_t r = rng();
        std::memcpy(&buf[i], &r, 4);
    }
    const TypeTraits& tt = type_traits(type);
    const Half h = to_half(0.01f);
    for (size_t off = 0; off < buf.size(); off += tt.type_size) {
        uint8_t* b = &buf[off];
        switch (type) {
            case GgmlType::Q4_K: reinterpret_cast<BlockQ4_K*>(b)->d = h; reinterpret_cast<BlockQ4_K*>(b)->dmin = h; break;
            case GgmlType::Q6_K: reinterpret_cast<BlockQ6_K*>(b)->d = h; break;
            case GgmlType::Q8_0: reinterpret_cast<BlockQ8_0*>(b)->d = h; break;
            case GgmlType::Q4_1: reinterpret_cast<BlockQ4_1*>(b)->d = h; reinterpret_cast<BlockQ4_1*>(b)->m = h; break;
            case GgmlType::Q4_0: reinterpret_cast<BlockQ4_0*>(b)->d = h; break;
            case GgmlType::Q5_K: reinterpret_cast<BlockQ5_K*>(b)->d = h; reinterpret_cast<BlockQ5_K*>(b)->dmin = h; break;
            default: break;
        }
    }
    return buf;
}

// args: type id, n_in, n_out, n_tokens, threads
void BM_matmul(benchmark::State& state) {
    const GgmlType type = static_cast<GgmlType>(state.range(0));
    const int64_t n_in = state.range(1), n_out = state.range(2), n_tokens = state.range(3);
    ThreadPool& pool = pool_for(static_cast<int>(state.range(4)));
    std::mt19937 rng(42);
    const std::vector<uint8_t> proto = random_weights(type, n_in, n_out, rng);
    const size_t wbytes = proto.size();
    const size_t copies = std::max<size_t>(1, ROTATE_BYTES / wbytes);
    std::vector<uint8_t> all(wbytes * copies);  // [copies][n_out][row bytes]
    for (size_t c = 0; c < copies; c++) std::memcpy(all.data() + c * wbytes, proto.data(), wbytes);
    std::vector<float> x(static_cast<size_t>(n_in * n_tokens));  // [n_tokens, n_in]
    std::normal_distribution<float> nd;
    for (float& v : x) v = nd(rng);
    std::vector<float> y(static_cast<size_t>(n_out * n_tokens));  // [n_tokens, n_out]
    std::vector<uint8_t> scratch(matmul_scratch_size(type, n_in, n_tokens) + 64);
    size_t c = 0;
    for (auto _ : state) {
        const MatmulWeight w{all.data() + c * wbytes, type, n_in, n_out};
        matmul_cpu(pool, w, x.data(), n_tokens, y.data(), scratch.data(), scratch.size(), level());
        benchmark::DoNotOptimize(y.data());
        c = (c + 1) % copies;
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(wbytes));
    state.counters["tok/s"] = benchmark::Counter(static_cast<double>(state.iterations() * n_tokens),
                                                 benchmark::Counter::kIsRate);
    state.counters["GMAC/s"] = benchmark::Counter(
        static_cast<double>(state.iterations()) * static_cast<double>(n_in * n_out * n_tokens) * 1e-9,
        benchmark::Counter::kIsRate);
    state.SetLabel(std::string(type_name(type)) + " " + simd_level_name(level()));
}

// Plain read bandwidth: sum of a 256 MiB buffer split over the pool.
void BM_read_bandwidth(benchmark::State& state) {
    ThreadPool& pool = pool_for(static_cast<int>(state.range(0)));
    const size_t n = ROTATE_BYTES / sizeof(uint64_t);
    std::vector<uint64_t> buf(n, 1);
    std::vector<uint64_t> part(static_cast<size_t>(pool.n_threads()) * 8);
    for (auto _ : state) {
        pool.parallel_for(
            pool.n_threads(),
            [&](int64_t b, int64_t e, int) {
                for (int64_t t = b; t < e; t++) {
                    const size_t lo = n * static_cast<size_t>(t) / static_cast<size_t>(pool.n_threads());
                    const size_t hi = n * static_cast<size_t>(t + 1) / static_cast<size_t>(pool.n_threads());
                    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
                    for (size_t i = lo; i + 4 <= hi; i += 4) {
                        s0 += buf[i];
                        s1 += buf[i + 1];
                        s2 += buf[i + 2];
                        s3 += buf[i + 3];
                    }
                    part[static_cast<size_t>(t) * 8] = s0 + s1 + s2 + s3;
                }
            },
            1);
        benchmark::DoNotOptimize(part.data());
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(ROTATE_BYTES));
}

// Every matmul of one forward pass of qwen3-0.6b Q4_K_M (n_embd 1024, 28 layers, 16 / 8 heads
// of 128, n_ff 3072, tied Q6_K output [151936, 1024]; attn_v and ffn_down Q6_K in every other
// layer), Q/K/V and gate/up fused, logits for the last token only. Everything else of the
// forward pass (norms, RoPE, attention, SwiGLU) is left out, so this is an upper bound on
// the engine's tok/s at these thread counts. args: n_tokens, threads
void BM_qwen3_0p6b_matmuls(benchmark::State& state) {
    const int64_t n_tokens = state.range(0);
    ThreadPool& pool = pool_for(static_cast<int>(state.range(1)));
    constexpr int64_t n_embd = 1024, n_q = 2048, n_kv = 1024, n_ff = 3072, n_vocab = 151936, n_layer = 28;
    std::mt19937 rng(7);
    struct Layer {
        std::vector<uint8_t> q, k, v, o, gate, up, down;
        MatmulWeight wq, wk, wv, wo, wg, wu, wd;
    };
    auto make = [&](std::vector<uint8_t>& buf, GgmlType t, int64_t n_in, int64_t n_out) {
        buf = random_weights(t, n_in, n_out, rng);
        return MatmulWeight{buf.data(), t, n_in, n_out};
    };
    static std::vector<Layer> layers;  // built once (~395 MB), shared by all runs
    static std::vector<uint8_t> out_buf;
    static MatmulWeight w_out;
    if (layers.empty()) {
        layers.resize(n_layer);
        for (int il = 0; il < n_layer; il++) {
            Layer& L = layers[static_cast<size_t>(il)];
            const GgmlType more = il % 2 == 0 ? GgmlType::Q6_K : GgmlType::Q4_K;
            L.wq = make(L.q, GgmlType::Q4_K, n_embd, n_q);
            L.wk = make(L.k, GgmlType::Q4_K, n_embd, n_kv);
            L.wv = make(L.v, more, n_embd, n_kv);
            L.wo = make(L.o, GgmlType::Q4_K, n_q, n_embd);
            L.wg = make(L.gate, GgmlType::Q4_K, n_embd, n_ff);
            L.wu = make(L.up, GgmlType::Q4_K, n_embd, n_ff);
            L.wd = make(L.down, more, n_ff, n_embd);
        }
        w_out = make(out_buf, GgmlType::Q6_K, n_embd, n_vocab);
    }
    size_t weight_bytes = out_buf.size();
    for (const Layer& L : layers)
        weight_bytes += L.q.size() + L.k.size() + L.v.size() + L.o.size() + L.gate.size() + L.up.size() + L.down.size();
    std::normal_distribution<float> nd;
    std::vector<float> x(static_cast<size_t>(n_tokens * n_ff));  // [n_tokens, <= n_ff] inputs
    for (float& v : x) v = nd(rng);
    std::vector<float> yq(static_cast<size_t>(n_tokens * n_q)), yk(static_cast<size_t>(n_tokens * n_kv)),
        yv(static_cast<size_t>(n_tokens * n_kv)), yo(static_cast<size_t>(n_tokens * n_embd)),
        yg(static_cast<size_t>(n_tokens * n_ff)), yu(static_cast<size_t>(n_tokens * n_ff)),
        yd(static_cast<size_t>(n_tokens * n_embd)), logits(static_cast<size_t>(n_vocab));
    std::vector<uint8_t> scratch(matmul_scratch_size(GgmlType::Q4_K, n_ff, n_tokens) + 64);
    for (auto _ : state) {
        for (const Layer& L : layers) {
            const MatmulWeight qkv[3] = {L.wq, L.wk, L.wv};
            float* const yqkv[3] = {yq.data(), yk.data(), yv.data()};
            matmul_multi_cpu(pool, qkv, 3, x.data(), n_tokens, yqkv, scratch.data(), scratch.size(), level());
            matmul_cpu(pool, L.wo, x.data(), n_tokens, yo.data(), scratch.data(), scratch.size(), level());
            const MatmulWeight gu[2] = {L.wg, L.wu};
            float* const ygu[2] = {yg.data(), yu.data()};
            matmul_multi_cpu(pool, gu, 2, x.data(), n_tokens, ygu, scratch.data(), scratch.size(), level());
            matmul_cpu(pool, L.wd, x.data(), n_tokens, yd.data(), scratch.data(), scratch.size(), level());
        }
        matmul_cpu(pool, w_out, x.data(), 1, logits.data(), scratch.data(), scratch.size(), level());
        benchmark::DoNotOptimize(logits.data());
    }
    state.counters["tok/s"] = benchmark::Counter(static_cast<double>(state.iterations() * n_tokens),
                                                 benchmark::Counter::kIsRate);
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(weight_bytes));
    state.SetLabel(std::string("matmuls only, ") + simd_level_name(level()));
}

void matmul_args(benchmark::internal::Benchmark* b) {
    const GgmlType types[] = {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0, GgmlType::Q4_1, GgmlType::Q5_K};
    struct Shape {
        int64_t n_in, n_out, n_tokens;
    };
    // Decode shapes (qwen3-0.6b: n_embd 1024, n_ff 3072; 4B: n_embd 2560, n_ff 9728) and prefill.
    const Shape shapes[] = {{1024, 1024, 1}, {4096, 4096, 1}, {1024, 3072, 1}, {1024, 1024, 64}, {4096, 4096, 64}};
    for (GgmlType t : types)
        for (const Shape& s : shapes)
            for (int threads : {1, 2}) b->Args({static_cast<int64_t>(t), s.n_in, s.n_out, s.n_tokens, threads});
    // Q5_0: Qwen2.5-0.5B's gate/up (n_embd 896, n_ff 4864), decode and prefill
    for (int64_t n_tok : {1, 8, 33, 512})
        for (int threads : {1, 2}) b->Args({static_cast<int64_t>(GgmlType::Q5_0), 896, 4864, n_tok, threads});
    // Speculative decoding's verification batches (2-5 tokens) on Qwen2.5-1.5B's gate/up
    // (n_embd 1536, n_ff 8960): where the few-token dot products hand over to the gemm path.
    for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q6_K})
        for (int64_t n_tok : {1, 2, 3, 4, 5})
            for (int threads : {1, 2}) b->Args({static_cast<int64_t>(t), 1536, 8960, n_tok, threads});
    b->ArgNames({"type", "n_in", "n_out", "n_tok", "thr"});
}

}  // namespace

// On the shared build machines run with --benchmark_repetitions=N and summarize.py, which
// keeps the fastest repetition (the least disturbed by other jobs).
BENCHMARK(BM_read_bandwidth)->Arg(1)->Arg(2)->ArgName("thr")->UseRealTime()->MinTime(0.3);
BENCHMARK(BM_matmul)->Apply(matmul_args)->UseRealTime()->MinTime(0.2);
BENCHMARK(BM_qwen3_0p6b_matmuls)
    ->ArgsProduct({{1, 33, 512}, {1, 2}})
    ->ArgNames({"n_tok", "thr"})
    ->UseRealTime()
    ->MinTime(0.5)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
