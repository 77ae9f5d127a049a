// tests/cuda/model/test_cuda_model.cpp — the whole CUDA forward pass against the CPU backend on
// tiny synthetic models (llama, qwen2, qwen3 shapes; Q4_K / Q6_K / Q8_0 weights written with
// GgufWriter and the reference quantizers, or every matrix F16), teacher-forced over 64
// positions: a 40-token prefill (GEMM, prefill attention), a 3-token batch (multi-token GEMV),
// then single-token decodes (GEMV, decode attention). Bounds (check_logits):
//   - relative RMS error of the logits <= 2% over all positions, 3% at any one (quantized
//     weights: both sides quantize activations to 8 bits for their dot products, the CPU in
//     blocks of 256 for k-quants, the GPU's decode GEMV in blocks of 32, its prefill GEMM not at
//     all); with F16 weights <= 5e-3 overall and 1e-2 at any position (the prefill GEMM
//     rounds activations to fp16; the decode GEMV multiplies in fp32);
//   - same top-1 token wherever the CPU's top-1/top-2 gap exceeds 10% of its logits' std;
//   - the on-GPU argmax equals the argmax of the GPU's logits, the on-GPU top-k their k best;
//   - the KV snapshot (read_kv) has the canonical size and round-trips through write_kv.
// Without a GPU, the CUDA backend's step sequence run with the kernels' CPU twins (cuda_ops.h
// _ref) is checked against the CPU backend by the same bounds and the same schedule, so the op
// order and the twins are exercised in CI too, and its errors predict the GPU test's.
// Debug mode: JLLM_CUDA_MODEL_DUMP=1 prints every named per-layer activation's relative error
// (both backends' taps), pinning a divergence to one layer; the per-layer test always checks
// them against a bound.
#include <gtest/gtest.h>

#if JLLM_CUDA

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/rope.h"
#include "backend/kv_quant.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_ops.h"
#include "cuda_test_seams.h"
#include "../ops/cuda_test_util.h"
#include "core/error.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "quant/quant_types.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"

namespace jllm::test {
namespace {

// Fails the program if a kernel outgrew the per-thread stack (cuda_test_util.h).
::testing::Environment* const g_stack_env = ::testing::AddGlobalTestEnvironment(new ThreadStackEnv);

bool have_gpu() {
    static const bool have = cuda_device_available();
    return have;
}

#define REQUIRE_GPU()                                               \
    do {                                                            \
        if (!have_gpu()) GTEST_SKIP() << "no CUDA device";          \
    } while (0)

constexpr int64_t N_EMBD = 256, N_FF = 512, N_HEAD = 4, N_HEAD_KV = 2, HEAD_DIM = 64, N_LAYER = 2, N_VOCAB = 300;

struct TinyModel {
    std::vector<uint8_t> bytes;
    std::unique_ptr<GgufFile> file;
    ModelConfig config;
    ModelWeights weights;
};

bool g_f16_weights = false;  // make_model's float-weights mode: every matrix F16

void add_matrix(GgufWriter& w, const std::string& name, GgmlType type, int64_t cols, int64_t rows, float sd,
                std::mt19937& rng) {
    if (g_f16_weights) type = GgmlType::F16;
    std::normal_distribution<float> nd(0.0f, sd);
    std::vector<float> v(static_cast<size_t>(cols * rows));
    for (float& x : v) x = nd(rng);
    std::vector<uint8_t> q(row_size(type, cols) * static_cast<size_t>(rows));
    type_traits(type).from_float(v.data(), q.data(), cols * rows);
    w.add_tensor(name, type, {cols, rows}, std::move(q));
}

void add_vector(GgufWriter& w, const std::string& name, int64_t n, float mean, float sd, std::mt19937& rng) {
    std::normal_distribution<float> nd(mean, sd);
    std::vector<uint8_t> b(static_cast<size_t>(n) * 4);
    for (int64_t i = 0; i < n; ++i) {
        const float x = nd(rng);
        std::memcpy(b.data() + i * 4, &x, 4);
    }
    w.add_tensor(name, GgmlType::F32, {n}, std::move(b));
}

std::unique_ptr<TinyModel> make_model(const std::string& arch, uint32_t seed, bool f16_weights = false,
                                      int64_t n_vocab = N_VOCAB) {
    std::mt19937 rng(seed);
    g_f16_weights = f16_weights;
    GgufWriter w;
    const std::string p = arch + ".";
    w.set_string("general.architecture", arch);
    w.set_string("general.name", "tiny-" + arch);
    w.set_u32(p + "block_count", N_LAYER);
    w.set_u32(p + "embedding_length", N_EMBD);
    w.set_u32(p + "feed_forward_length", N_FF);
    w.set_u32(p + "attention.head_count", N_HEAD);
    w.set_u32(p + "attention.head_count_kv", N_HEAD_KV);
    w.set_u32(p + "attention.key_length", HEAD_DIM);
    w.set_u32(p + "attention.value_length", HEAD_DIM);
    w.set_u32(p + "context_length", 512);
    w.set_f32(p + "attention.layer_norm_rms_epsilon", 1e-6f);
    w.set_f32(p + "rope.freq_base", arch == "llama" ? 10000.0f : 1000000.0f);
    const bool qwen3 = arch == "qwen3", qwen2 = arch == "qwen2";
    const GgmlType emb_type = arch == "llama" ? GgmlType::Q8_0 : GgmlType::Q4_K;
    add_matrix(w, "token_embd.weight", emb_type, N_EMBD, n_vocab, 1.0f, rng);
    add_vector(w, "output_norm.weight", N_EMBD, 1.0f, 0.1f, rng);
    if (!qwen3) add_matrix(w, "output.weight", GgmlType::Q6_K, N_EMBD, n_vocab, 0.08f, rng);  // qwen3: tied
    const int64_t Q = N_HEAD * HEAD_DIM, KV = N_HEAD_KV * HEAD_DIM;
    const float s_in = 1.0f / std::sqrt(static_cast<float>(N_EMBD)), s_ff = 1.0f / std::sqrt(static_cast<float>(N_FF));
    for (int il = 0; il < N_LAYER; ++il) {
        const std::string b = "blk." + std::to_string(il) + ".";
        add_vector(w, b + "attn_norm.weight", N_EMBD, 1.0f, 0.1f, rng);
        add_matrix(w, b + "attn_q.weight", GgmlType::Q4_K, N_EMBD, Q, s_in, rng);
        add_matrix(w, b + "attn_k.weight", arch == "llama" ? GgmlType::Q8_0 : GgmlType::Q4_K, N_EMBD, KV,
                   s_in, rng);
        add_matrix(w, b + "attn_v.weight", GgmlType::Q6_K, N_EMBD, KV, s_in, rng);
        add_matrix(w, b + "attn_output.weight", GgmlType::Q4_K, Q, N_EMBD, s_in, rng);
        if (qwen2) {
            add_vector(w, b + "attn_q.bias", Q, 0.0f, 0.2f, rng);
            add_vector(w, b + "attn_k.bias", KV, 0.0f, 0.2f, rng);
            add_vector(w, b + "attn_v.bias", KV, 0.0f, 0.2f, rng);
        }
        if (qwen3) {
            add_vector(w, b + "attn_q_norm.weight", HEAD_DIM, 1.0f, 0.1f, rng);
            add_vector(w, b + "attn_k_norm.weight", HEAD_DIM, 1.0f, 0.1f, rng);
        }
        add_vector(w, b + "ffn_norm.weight", N_EMBD, 1.0f, 0.1f, rng);
        add_matrix(w, b + "ffn_gate.weight", GgmlType::Q4_K, N_EMBD, N_FF, s_in, rng);
        add_matrix(w, b + "ffn_up.weight", arch == "qwen2" ? GgmlType::Q8_0 : GgmlType::Q4_K, N_EMBD, N_FF, s_in, rng);
        add_matrix(w, b + "ffn_down.weight", GgmlType::Q6_K, N_FF, N_EMBD, s_ff, rng);
    }
    auto m = std::make_unique<TinyModel>();
    m->bytes = w.write_to_memory();
    m->file = GgufFile::from_memory(m->bytes.data(), m->bytes.size(), "tiny-" + arch);
    m->config = load_model_config(*m->file);
    m->weights = bind_model_weights(*m->file, m->config);
    return m;
}

struct Stats {
    double rel_rms = 0.0;
    bool top1_checked = false, top1_same = true;
};

Stats compare_logits(const float* cpu, const float* gpu, int64_t n) {
    double se = 0.0, sr = 0.0, mean = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        se += (static_cast<double>(gpu[i]) - cpu[i]) * (static_cast<double>(gpu[i]) - cpu[i]);
        sr += static_cast<double>(cpu[i]) * cpu[i];
        mean += cpu[i];
    }
    mean /= static_cast<double>(n);
    double var = 0.0;
    for (int64_t i = 0; i < n; ++i) var += (cpu[i] - mean) * (cpu[i] - mean);
    const double sd = std::sqrt(var / static_cast<double>(n));
    Stats s;
    s.rel_rms = std::sqrt(se / std::max(sr, 1e-30));
    std::vector<int64_t> idx(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) idx[static_cast<size_t>(i)] = i;
    std::partial_sort(idx.begin(), idx.begin() + 2, idx.end(), [&](int64_t a, int64_t b) { return cpu[a] > cpu[b]; });
    if (cpu[idx[0]] - cpu[idx[1]] > 0.1 * sd) {
        s.top1_checked = true;
        const int64_t g = std::max_element(gpu, gpu + n) - gpu;
        s.top1_same = g == idx[0];
    }
    return s;
}

// Compares teacher-forced logits [n_pos][n_vocab] of a backend under test against the CPU
// backend's. Quantized weights: the CPU quantizes activations to 8 bits for its dot products
// (about 0.7% relative error per product), so the bound is 2% relative RMS over all positions
// and 3% at any one position. F16 weights: the CPU multiplies in float; the GPU's prefill GEMM
// rounds activations to fp16 (2^-11 relative per input, through every layer), so the bound is
// 5e-3 overall and 1e-2 at any position (measured: 0.16% overall, 0.45% worst position).
// exact (optional): fp32 logits of the same model; positions where the CPU backend's own top-1
// differs from exact's are left out of the top-1 criterion (the CPU's 8-bit activations, not the
// backend under test, decide those) and counted in the summary line.
void check_logits(const std::vector<float>& cpu, const std::vector<float>& got, int n_pos, int64_t V, bool f16_weights,
                  const std::string& label, double pos_bound = -1.0, double total_bound = -1.0,
                  const std::vector<float>* exact = nullptr) {
    if (pos_bound < 0) pos_bound = f16_weights ? 1e-2 : 0.03;
    if (total_bound < 0) total_bound = f16_weights ? 5e-3 : 0.02;
    int checked = 0, agree = 0, cpu_off = 0;
    double worst = 0.0, se = 0.0, sr = 0.0;
    for (int p = 0; p < n_pos; ++p) {
        Stats s = compare_logits(cpu.data() + p * V, got.data() + p * V, V);
        if (exact && s.top1_checked) {
            const float* e = exact->data() + p * V;
            const float* c = cpu.data() + p * V;
            if (std::max_element(e, e + V) - e != std::max_element(c, c + V) - c) {
                s.top1_checked = false;
                ++cpu_off;
            }
        }
        worst = std::max(worst, s.rel_rms);
        for (int64_t i = 0; i < V; ++i) {
            const double c = cpu[p * V + i], g = got[p * V + i];
            se += (g - c) * (g - c);
            sr += c * c;
        }
        EXPECT_LE(s.rel_rms, pos_bound) << label << ": position " << p;
        if (s.top1_checked) {
            ++checked;
            agree += s.top1_same;
            EXPECT_TRUE(s.top1_same) << label << ": top-1 differs at position " << p;
        }
    }
    const double total = std::sqrt(se / std::max(sr, 1e-30));
    EXPECT_LE(total, total_bound) << label;
    std::printf("[%s] relative RMS error %.5f overall, %.5f worst position; top-1 agreement %d/%d%s\n", label.c_str(),
                total, worst, agree, checked,
                exact ? (" (" + std::to_string(cpu_off) + " left out: the CPU's top-1 not exact's)").c_str() : "");
    EXPECT_GT(checked, n_pos / 2) << label << ": the top-1 criterion must be exercised";
}

// The teacher-forcing schedule both the GPU test and the twin test run: a 40-token prefill
// (GEMM, prefill attention, logits in two passes), one 3-token batch (the multi-token GEMV),
// then single-token decodes (GEMV, decode attention) up to 64 positions. `fwd(tokens, n, pos0,
// logits)` writes the logits of all n tokens.
constexpr int TF_POS = 64, TF_PREFILL = 40, TF_SMALL = 3, TF_CTX = 128, TF_BATCH = 48;

// n token ids uniform in [0, n_vocab), from `seed`.
std::vector<int32_t> random_tokens(int64_t n_vocab, int n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(n_vocab - 1));
    std::vector<int32_t> tokens(static_cast<size_t>(n));
    for (int32_t& t : tokens) t = tok(rng);
    return tokens;
}

std::vector<int32_t> schedule_tokens(int64_t n_vocab) { return random_tokens(n_vocab, TF_POS, 99); }

// A CUDA backend with copied weights and an INT8 cache, with graphs or with every kernel launched
// on the stream (CudaOptions::graphs false), and optionally one warp per block of the INT8 decode
// attention (32 keys per decode split).
std::unique_ptr<Backend> graph_test_backend(const TinyModel& m, int n_ctx, int n_batch, bool graphs,
                                            bool one_warp_splits = false) {
    CudaOptions o;
    o.graphs = graphs;
    if (one_warp_splits) o.attention.decode_warps = 1;
    auto b = create_cuda_backend(m.config, o);
    b->bind_weights(m.weights, WeightPlacement::Copy);
    b->allocate(n_ctx, n_batch, KvType::Int8);
    return b;
}

template <typename Fwd>
std::vector<float> run_schedule(const std::vector<int32_t>& tokens, int64_t V, Fwd&& fwd) {
    std::vector<float> logits(static_cast<size_t>(TF_POS) * V, NAN);
    fwd(tokens.data(), TF_PREFILL, 0, logits.data());
    fwd(&tokens[TF_PREFILL], TF_SMALL, TF_PREFILL, logits.data() + TF_PREFILL * V);
    for (int p = TF_PREFILL + TF_SMALL; p < TF_POS; ++p) fwd(&tokens[p], 1, p, logits.data() + p * V);
    return logits;
}

auto backend_fwd(Backend& b) {
    return [&b](const int32_t* t, int n, int pos0, float* out) {
        b.forward(t, n, pos0, n == 1 ? LogitsMode::Last : LogitsMode::All, out);
    };
}

// The decode step's on-device selections through Backend::forward_select.
int32_t forward_argmax(Backend& b, int32_t token, int pos) {
    int32_t id = -1;
    float val = 0.0f;
    EXPECT_TRUE(b.forward_select(token, pos, TokenSelection{1}, &id, &val));
    return id;
}
void forward_topk(Backend& b, int32_t token, int pos, int k, int32_t* ids, float* vals) {
    EXPECT_TRUE(b.forward_select(token, pos, TokenSelection{k}, ids, vals));
}

struct ModelCase {
    const char* arch;
    KvType kv;
    WeightPlacement placement;
    bool f16_weights;
};

class CudaModel : public ::testing::TestWithParam<ModelCase> {};

TEST_P(CudaModel, TeacherForcedLogitsMatchCpu) {
    REQUIRE_GPU();
    const ModelCase mc = GetParam();
    const auto m = make_model(mc.arch, 17, mc.f16_weights);
    const int n_ctx = TF_CTX, n_batch = TF_BATCH, n_pos = TF_POS;
    const int64_t V = m->config.n_vocab;
    auto cpu = create_cpu_backend(m->config, CpuOptions{2});
    auto gpu = create_cuda_backend(m->config);
    cpu->bind_weights(m->weights, WeightPlacement::Auto);
    try {
        gpu->bind_weights(m->weights, mc.placement);
    } catch (const JllmError& e) {
        // Some container runtimes refuse cudaHostRegister; that is the platform, not the kernels.
        if (mc.placement == WeightPlacement::Mapped && std::string(e.what()).find("cannot be mapped") != std::string::npos) {
            GTEST_SKIP() << e.what();
        }
        throw;
    }
    cpu->allocate(n_ctx, n_batch, mc.kv);
    gpu->allocate(n_ctx, n_batch, mc.kv);

    const std::vector<int32_t> tokens = schedule_tokens(V);
    const std::vector<float> lc = run_schedule(tokens, V, backend_fwd(*cpu));
    const std::vector<float> lg = run_schedule(tokens, V, backend_fwd(*gpu));
    check_logits(lc, lg, n_pos, V, mc.f16_weights,
                 std::string(mc.arch) + (mc.kv == KvType::Int8 ? " int8" : " fp16") +
                     (mc.placement == WeightPlacement::Mapped ? " mapped" : " copy") +
                     (mc.f16_weights ? " f16-weights" : ""));

    // KV snapshot: canonical size, and a round trip through write_kv is the identity.
    KvBlob bc, bg, bg2;
    cpu->read_kv(0, n_pos, bc);
    gpu->read_kv(0, n_pos, bg);
    EXPECT_EQ(bg.bytes.size(), bc.bytes.size());
    EXPECT_EQ(static_cast<int64_t>(bg.bytes.size()),
              Backend::kv_bytes_for(m->config, n_pos, mc.kv));
    gpu->write_kv(0, bg);
    gpu->read_kv(0, n_pos, bg2);
    EXPECT_EQ(bg.bytes, bg2.bytes);

    // Greedy fast path: continue decoding; the on-GPU argmax equals the argmax of the logits.
    auto gpu2 = create_cuda_backend(m->config);
    gpu2->bind_weights(m->weights, mc.placement);
    gpu2->allocate(n_ctx, n_batch, mc.kv);
    gpu2->write_kv(0, bg);
    std::vector<float> row(static_cast<size_t>(V));
    for (int p = n_pos; p < n_pos + 8; ++p) {
        const int32_t t = tokens[static_cast<size_t>(p - n_pos)];
        const int32_t id = forward_argmax(*gpu2, t, p);
        gpu->forward(&t, 1, p, LogitsMode::Last, row.data());
        EXPECT_EQ(id, std::max_element(row.begin(), row.end()) - row.begin()) << "position " << p;
    }
    // The top-k path: the same step on a third backend returns the k best of those logits.
    auto gpu3 = create_cuda_backend(m->config);
    gpu3->bind_weights(m->weights, mc.placement);
    gpu3->allocate(n_ctx, n_batch, mc.kv);
    gpu3->write_kv(0, bg);
    const int k = static_cast<int>(std::min<int64_t>(40, V));
    std::vector<int32_t> ids(static_cast<size_t>(k)), ref_ids(static_cast<size_t>(k));
    std::vector<float> vals(static_cast<size_t>(k)), ref_vals(static_cast<size_t>(k));
    for (int p = n_pos; p < n_pos + 8; ++p) {
        const int32_t t = tokens[static_cast<size_t>(p - n_pos)];
        forward_topk(*gpu3, t, p, k, ids.data(), vals.data());
        gpu2->forward(&t, 1, p, LogitsMode::Last, row.data());
        cuda::topk_ref(row.data(), V, k, ref_vals.data(), ref_ids.data());
        EXPECT_EQ(ids, ref_ids) << "position " << p;
        EXPECT_EQ(vals, ref_vals) << "position " << p;
    }
}

INSTANTIATE_TEST_SUITE_P(Archs, CudaModel,
                         ::testing::Values(ModelCase{"llama", KvType::Int8, WeightPlacement::Copy, false},
                                           ModelCase{"llama", KvType::Fp16, WeightPlacement::Copy, false},
                                           ModelCase{"llama", KvType::Int8, WeightPlacement::Copy, true},
                                           ModelCase{"qwen2", KvType::Int8, WeightPlacement::Copy, false},
                                           ModelCase{"qwen2", KvType::Fp16, WeightPlacement::Mapped, false},
                                           ModelCase{"qwen2", KvType::Fp16, WeightPlacement::Copy, true},
                                           ModelCase{"qwen3", KvType::Int8, WeightPlacement::Mapped, false},
                                           ModelCase{"qwen3", KvType::Fp16, WeightPlacement::Copy, false},
                                           ModelCase{"qwen3", KvType::Int8, WeightPlacement::Mapped, true}),
                         [](const ::testing::TestParamInfo<ModelCase>& i) {
                             return std::string(i.param.arch) + (i.param.kv == KvType::Int8 ? "_int8" : "_fp16") +
                                    (i.param.placement == WeightPlacement::Mapped ? "_mapped" : "_copy") +
                                    (i.param.f16_weights ? "_f16weights" : "");
                         });

// ---- the CUDA backend's step sequence on the CPU twins (runs without a GPU) ----

class TwinForward {
public:
    // exact: every product in fp32 on unrounded activations (the reference the GPU path's own
    // rounding is measured against); otherwise the GPU's roundings (8-bit GEMV, fp16 GEMM).
    TwinForward(const TinyModel& m, int n_ctx, KvType kv, bool exact = false)
        : m_(m), c_(m.config), kv_type_(kv), n_ctx_(n_ctx), exact_(exact) {
        const size_t elt = kv == KvType::Int8 ? 1 : 2;
        for (int il = 0; il < c_.n_layer; ++il) {
            k_.emplace_back(static_cast<size_t>(n_ctx) * c_.kv_dim() * elt);
            v_.emplace_back(static_cast<size_t>(n_ctx) * c_.kv_dim() * elt);
            ks_.emplace_back(static_cast<size_t>(n_ctx) * c_.n_head_kv);
            vs_.emplace_back(static_cast<size_t>(n_ctx) * c_.n_head_kv);
        }
        inv_freq_ = rope_inv_freq(c_, nullptr);
    }

    // logits: [n_tok][n_vocab]
    void forward(const int32_t* tokens, int n_tok, int pos0, float* logits) {
        using cuda::MatOut;
        const int64_t E = c_.n_embd, Q = c_.q_dim(), KV = c_.kv_dim(), F = c_.n_ff;
        const ModelWeights& w = m_.weights;
        std::vector<float> x(n_tok * E), h(n_tok * E), q(n_tok * Q), k(n_tok * KV), v(n_tok * KV), att(n_tok * Q),
            g(n_tok * F), u(n_tok * F);
        cuda::embed_ref(w.token_embd.type, w.token_embd.data, w.token_embd.rows, E, tokens, n_tok, x.data());
        auto f32 = [](const WeightTensor& t) { return t.present() ? reinterpret_cast<const float*>(t.data) : nullptr; };
        // Batches of up to GEMV_MAX_TOKENS run the dp4a GEMV on 8-bit activations when every
        // matrix has one (as CudaBackend::q8_path); larger ones multiply fp32 activations.
        bool q8 = n_tok <= cuda::GEMV_MAX_TOKENS && cuda::gemv_q8_type_supported(w.output.type);
        for (const LayerWeights& L : w.layers) {
            for (const WeightTensor* t : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) {
                q8 = q8 && cuda::gemv_q8_type_supported(t->type);
            }
        }
        std::vector<uint8_t> xq;
        auto tiles = [](const WeightTensor& t) {
            return cuda::WeightFormat(t.type, cuda::tiles_fit(t.type, t.rows, t.cols) ? cuda::WeightLayout::Tiles
                                                                                   : cuda::WeightLayout::Rows);
        };
        // halves: the input quantized by halves (W_down's, where the backend's SwiGLU product makes it so)
        auto mm = [&](const WeightTensor& t, const float* in, float* out, MatOut mode, const WeightTensor* t2 = nullptr,
                      bool halves = false) {
            if (exact_) {
                cuda::matmul_ref(t.type, t.data, t2 ? t2->data : nullptr, t.rows, t.cols, in, n_tok, out, mode);
            } else if (q8) {
                xq.assign(cuda::act_q8_bytes(n_tok, t.cols), 0);
                cuda::quantize_act_ref(in, n_tok, t.cols, xq.data(), halves);
                cuda::gemv_q8_ref(t.type, t.data, t2 ? t2->data : nullptr, t.rows, t.cols, xq.data(), n_tok, out, mode);
            } else {  // the tensor-core GEMM on the copied matrices (tiled where they fit)
                cuda::gemm_ref(tiles(t), t.data, t2 ? t2->data : nullptr, t.rows, t.cols, in, n_tok, out, mode);
            }
        };
        for (int il = 0; il < c_.n_layer; ++il) {
            const LayerWeights& L = w.layers[static_cast<size_t>(il)];
            cuda::rmsnorm_ref(x.data(), f32(L.attn_norm), h.data(), n_tok, E, c_.rms_eps);
            mm(L.wq, h.data(), q.data(), MatOut::Store);
            mm(L.wk, h.data(), k.data(), MatOut::Store);
            mm(L.wv, h.data(), v.data(), MatOut::Store);
            cuda::QkvPostParams p;
            p.q = q.data();
            p.k = k.data();
            p.v = v.data();
            p.bq = f32(L.bq);
            p.bk = f32(L.bk);
            p.bv = f32(L.bv);
            p.q_norm = f32(L.q_norm);
            p.k_norm = f32(L.k_norm);
            p.inv_freq = inv_freq_.data();
            p.n_rot = static_cast<int>(c_.n_rot);
            p.neox = c_.recipe->rope_style == RopeStyle::NeoX;
            p.n_tok = n_tok;
            p.pos0 = pos0;
            p.n_head = static_cast<int>(c_.n_head);
            p.n_head_kv = static_cast<int>(c_.n_head_kv);
            p.head_dim = static_cast<int>(c_.head_dim);
            p.eps = c_.rms_eps;
            p.kv_type = kv_type_;
            p.k_rot_scale = kv_k_rotated(kv_type_, c_.head_dim) ? kv_rotation_scale(c_.head_dim) : 0.0f;
            p.k_cache = k_[il].data();
            p.v_cache = v_[il].data();
            p.k_scale = ks_[il].data();
            p.v_scale = vs_[il].data();
            cuda::qkv_post_ref(p);
            cuda::AttentionParams a;
            a.q = q.data();
            a.out = att.data();
            a.k_cache = k_[il].data();
            a.v_cache = v_[il].data();
            a.k_scale = ks_[il].data();
            a.v_scale = vs_[il].data();
            a.kv_type = kv_type_;
            a.n_tok = n_tok;
            a.pos0 = pos0;
            a.n_head = p.n_head;
            a.n_head_kv = p.n_head_kv;
            a.head_dim = p.head_dim;
            cuda::attention_ref(a);
            mm(L.wo, att.data(), x.data(), MatOut::Add);
            cuda::rmsnorm_ref(x.data(), f32(L.ffn_norm), h.data(), n_tok, E, c_.rms_eps);
            if (L.w_gate.type == L.w_up.type) {
                mm(L.w_gate, h.data(), g.data(), MatOut::SwiGLU, &L.w_up);
            } else {
                mm(L.w_gate, h.data(), g.data(), MatOut::Store);
                mm(L.w_up, h.data(), u.data(), MatOut::Store);
                cuda::swiglu_ref(g.data(), u.data(), g.data(), n_tok * F);
            }
            const bool halves = n_tok == 1 && L.w_gate.type == L.w_up.type && tiles(L.w_down).tiled() &&
                                cuda::gemv_q8_yq_by_halves(tiles(L.w_gate), L.w_gate.rows, L.w_gate.cols);
            mm(L.w_down, g.data(), x.data(), MatOut::Add, nullptr, halves);
        }
        cuda::rmsnorm_ref(x.data(), f32(w.output_norm), h.data(), n_tok, E, c_.rms_eps);
        mm(w.output, h.data(), logits, MatOut::Store);
    }

private:
    const TinyModel& m_;
    const ModelConfig& c_;
    KvType kv_type_;
    int n_ctx_;
    bool exact_ = false;
    std::vector<float> inv_freq_;
    std::vector<std::vector<uint8_t>> k_, v_;   // [n_ctx][n_head_kv][head_dim] int8 / fp16
    std::vector<std::vector<Half>> ks_, vs_;    // [n_ctx][n_head_kv]
};

// With LogitsMode::Last (or None) the last layer runs past its attention for the last row only
// (none): the KV cache it leaves is bit for bit that of LogitsMode::All, and the last row's
// logits agree with All's within the prefill bound (All takes the GEMM with fp16-rounded
// activations for 40 rows and the dp4a GEMV for 3; the single row takes the fp32 GEMV).
TEST(CudaModel, LastLayerRowsOnlyForRequestedLogits) {
    REQUIRE_GPU();
    const auto m = make_model("qwen3", 17);
    const int64_t V = m->config.n_vocab;
    const std::vector<int32_t> tokens = schedule_tokens(V);
    for (int n : {TF_PREFILL, TF_SMALL}) {
        SCOPED_TRACE("n_tokens " + std::to_string(n));
        std::vector<std::unique_ptr<Backend>> b;
        for (int i = 0; i < 3; ++i) {
            b.push_back(create_cuda_backend(m->config));
            b.back()->bind_weights(m->weights, WeightPlacement::Copy);
            b.back()->allocate(TF_CTX, TF_BATCH, KvType::Int8);
        }
        std::vector<float> all(static_cast<size_t>(n) * V), last(static_cast<size_t>(V), NAN);
        b[0]->forward(tokens.data(), n, 0, LogitsMode::All, all.data());
        b[1]->forward(tokens.data(), n, 0, LogitsMode::Last, last.data());
        b[2]->forward(tokens.data(), n, 0, LogitsMode::None, nullptr);
        double se = 0.0, sr = 0.0;
        for (int64_t i = 0; i < V; ++i) {
            const double r = all[static_cast<size_t>((n - 1) * V + i)], d = last[static_cast<size_t>(i)] - r;
            se += d * d;
            sr += r * r;
        }
        EXPECT_LE(std::sqrt(se / sr), 0.03);
        KvBlob k0, k1, k2;
        b[0]->read_kv(0, n, k0);
        b[1]->read_kv(0, n, k1);
        b[2]->read_kv(0, n, k2);
        EXPECT_EQ(k0.bytes, k1.bytes);
        EXPECT_EQ(k0.bytes, k2.bytes);
    }
}

// Rss (kB) of this process's mappings of `path`, from /proc/self/smaps; -1 without smaps.
int64_t mapping_rss_kb(const std::string& path) {
    std::FILE* f = std::fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    char line[4096];
    bool ours = false;
    int64_t kb = 0;
    while (std::fgets(line, sizeof line, f)) {
        long long v = 0;
        if (std::strchr(line, '-') == line + std::strspn(line, "0123456789abcdef")) {  // a mapping's first line
            const std::string l(line);
            ours = l.size() > path.size() && l.compare(l.size() - 1 - path.size(), path.size(), path) == 0;
        } else if (ours && std::sscanf(line, "Rss: %lld kB", &v) == 1) {
            kb += v;
        }
    }
    std::fclose(f);
    return kb;
}

// Weights copied from a mapped file (the default placement on every GPU): the device gets the bytes a
// caller's buffer gives (the logits bit for bit), and the file's pages leave the process as the copy
// goes (its mapping's Rss falls to about the header's pages), so the weights are held once.
TEST(CudaModel, CopyFromTheFileDropsItsPages) {
    REQUIRE_GPU();
    const auto m = make_model("qwen3", 17, false, 4096);
    const std::string path = std::string(JLLM_BINARY_DIR) + "/cuda_copy_drops_pages.gguf";
    {
        std::FILE* out = std::fopen(path.c_str(), "wb");
        ASSERT_NE(out, nullptr);
        ASSERT_EQ(std::fwrite(m->bytes.data(), 1, m->bytes.size(), out), m->bytes.size());
        std::fclose(out);
    }
    auto f = GgufFile::open(path);
    ModelWeights fw = bind_model_weights(*f, m->config);
    ASSERT_NE(fw.mapping, nullptr);
    ASSERT_EQ(m->weights.mapping, nullptr);  // from_memory: nothing to drop
    uint64_t sum = 0;                        // every page in, as a loader that read the weights
    for (size_t i = 0; i < f->file_size(); i += 4096) sum += f->base()[i];
    const int64_t before = mapping_rss_kb(path);
    if (before < 0) GTEST_SKIP() << "no /proc/self/smaps";
    EXPECT_GE(before * 1024, static_cast<int64_t>(f->file_size()) - 65536) << sum;
    std::unique_ptr<Backend> b[2];
    for (int i = 0; i < 2; ++i) {
        b[i] = create_cuda_backend(m->config);
        b[i]->bind_weights(i == 0 ? fw : m->weights, WeightPlacement::Auto);
        b[i]->allocate(TF_CTX, TF_BATCH, KvType::Int8);
    }
    const int64_t after = mapping_rss_kb(path);
    EXPECT_LE(after * 1024, static_cast<int64_t>(f->data_offset()) + 2 * 65536) << "before: " << before << " kB";
    const int64_t V = m->config.n_vocab;
    const std::vector<int32_t> tokens = schedule_tokens(V);
    std::vector<float> l0(static_cast<size_t>(TF_PREFILL) * V), l1(l0.size());
    b[0]->forward(tokens.data(), TF_PREFILL, 0, LogitsMode::All, l0.data());
    b[1]->forward(tokens.data(), TF_PREFILL, 0, LogitsMode::All, l1.data());
    EXPECT_EQ(std::memcmp(l0.data(), l1.data(), l0.size() * sizeof(float)), 0);
    b[0]->forward(&tokens[TF_PREFILL], 1, TF_PREFILL, LogitsMode::Last, l0.data());
    b[1]->forward(&tokens[TF_PREFILL], 1, TF_PREFILL, LogitsMode::Last, l1.data());
    EXPECT_EQ(std::memcmp(l0.data(), l1.data(), static_cast<size_t>(V) * sizeof(float)), 0);
    std::remove(path.c_str());
}

// Decode graphs: one per attention split count (the splits a position needs, rounded up to a
// power of two), each captured on first use. With 32 keys per split (JLLM_CUDA_ATTN_WARPS=1)
// 170 single-token steps cross the graphs of 1, 2, 4 and 7 splits; every step's logits match the
// CPU backend's.
TEST(CudaModel, DecodeGraphPerSplitCount) {
    REQUIRE_GPU();
    const auto m = make_model("qwen3", 17);
    const int64_t V = m->config.n_vocab;
    constexpr int n_ctx = 200, n_prefill = 20, n_pos = 190;
    const std::vector<int32_t> tokens = random_tokens(V, n_pos, 5);
    auto run = [&](Backend& b) {
        std::vector<float> logits(static_cast<size_t>(n_pos) * V, NAN);
        b.forward(tokens.data(), n_prefill, 0, LogitsMode::All, logits.data());
        for (int p = n_prefill; p < n_pos; ++p) b.forward(&tokens[p], 1, p, LogitsMode::Last, logits.data() + p * V);
        return logits;
    };
    auto cpu = create_cpu_backend(m->config, CpuOptions{2});
    cpu->bind_weights(m->weights, WeightPlacement::Auto);
    cpu->allocate(n_ctx, n_prefill, KvType::Int8);
    const std::vector<float> lc = run(*cpu);
    CudaOptions one_warp;
    one_warp.attention.decode_warps = 1;
    auto gpu = create_cuda_backend(m->config, one_warp);
    gpu->bind_weights(m->weights, WeightPlacement::Copy);
    gpu->allocate(n_ctx, n_prefill, KvType::Int8);
    const std::vector<float> lg = run(*gpu);
    check_logits(lc, lg, n_pos, V, false, "decode graphs per split count");
}

// Every forward runs as CUDA graphs (prefills captured per call, one graph per layer, each
// executable updated in place or instantiated per shape; decode steps with their argmax or top-k
// tail): a schedule of every
// kind of call — LogitsMode All over two logits passes, Last, None, single tokens, the sampling
// tails, a shape seen before at a new position — gives bit for bit the logits, samples and KV
// cache of the same calls launched kernel by kernel (JLLM_CUDA_GRAPH=0).
TEST(CudaModel, GraphRunsMatchDirectLaunches) {
    REQUIRE_GPU();
    const auto m = make_model("qwen3", 23);
    const int64_t V = m->config.n_vocab;
    constexpr int n_ctx = 128, n_batch = 48;
    const std::vector<int32_t> tokens = random_tokens(V, n_ctx, 11);
    struct Out {
        std::vector<float> logits;
        std::vector<int32_t> ids;
        std::vector<float> vals;
        KvBlob kv;
    };
    // The graph run's logits land in a pinned buffer (pin_host_buffer), the other's in pageable
    // memory; both buffers outlive their backends.
    std::vector<float> buf_with(static_cast<size_t>(n_batch) * V, NAN), buf_without = buf_with;
    auto run = [&](Backend& b, std::vector<float>& buf) {
        Out o;
        auto keep = [&](int rows) { o.logits.insert(o.logits.end(), buf.begin(), buf.begin() + rows * V); };
        int pos = 0;
        auto fwd = [&](int n, LogitsMode mode) {
            b.forward(&tokens[static_cast<size_t>(pos)], n, pos, mode, mode == LogitsMode::None ? nullptr : buf.data());
            if (mode != LogitsMode::None) keep(mode == LogitsMode::All ? n : 1);
            pos += n;
        };
        fwd(40, LogitsMode::All);   // the GEMM path; logits in two passes (32 + 8 rows)
        fwd(5, LogitsMode::Last);   // the multi-token GEMV path
        fwd(3, LogitsMode::None);
        fwd(1, LogitsMode::None);   // one token without logits: not the decode graph
        for (int i = 0; i < 4; ++i) fwd(1, LogitsMode::Last);
        for (int i = 0; i < 3; ++i, ++pos) o.ids.push_back(forward_argmax(b, tokens[static_cast<size_t>(pos)], pos));
        std::vector<int32_t> ids(8);
        std::vector<float> vals(8);
        for (int k : {8, 5}) {
            forward_topk(b, tokens[static_cast<size_t>(pos)], pos, k, ids.data(), vals.data());
            ++pos;
            o.ids.insert(o.ids.end(), ids.begin(), ids.begin() + k);
            o.vals.insert(o.vals.end(), vals.begin(), vals.begin() + k);
        }
        fwd(20, LogitsMode::Last);  // a new shape
        fwd(5, LogitsMode::Last);   // a shape seen before, at a new position
        fwd(40, LogitsMode::All);
        b.read_kv(0, pos, o.kv);
        return o;
    };
    auto make = [&](bool graphs) { return graph_test_backend(*m, n_ctx, n_batch, graphs); };
    auto with = make(true), without = make(false);
    with->pin_host_buffer(buf_with.data(), buf_with.size() * sizeof(float));
    const Out a = run(*with, buf_with), d = run(*without, buf_without);
    // decode graphs (logits, argmax, two top-k) and forward graphs (several shapes) held
    EXPECT_GE(cuda_backend_graph_count(*with), 8);
    EXPECT_EQ(cuda_backend_graph_count(*without), 0);
    ASSERT_EQ(a.logits.size(), d.logits.size());
    EXPECT_TRUE(std::all_of(a.logits.begin(), a.logits.end(), [](float x) { return std::isfinite(x); }));
    EXPECT_EQ(0, std::memcmp(a.logits.data(), d.logits.data(), a.logits.size() * sizeof(float)));
    EXPECT_EQ(a.ids, d.ids);
    EXPECT_EQ(a.vals, d.vals);
    EXPECT_EQ(a.kv.bytes, d.kv.bytes);
}

// A decode step's logits reach the host in two copies where the vocabulary is large (the first
// three quarters while the GPU computes the rest): every row as the same steps launched kernel by
// kernel (one product, one copy), bit for bit, pinned or not.
TEST(CudaModel, DecodeLogitsInTwoCopies) {
    REQUIRE_GPU();
    const auto m = make_model("qwen3", 31, false, 65536);
    const int64_t V = m->config.n_vocab;
    constexpr int n_ctx = 64, n_steps = 6;
    const std::vector<int32_t> tokens = random_tokens(V, n_ctx, 5);
    auto run = [&](Backend& b, bool pin) {
        std::vector<float> buf(static_cast<size_t>(V), NAN), out;
        if (pin) b.pin_host_buffer(buf.data(), buf.size() * sizeof(float));
        b.forward(tokens.data(), 8, 0, LogitsMode::None, nullptr);
        for (int i = 0; i < n_steps; ++i) {
            b.forward(&tokens[static_cast<size_t>(8 + i)], 1, 8 + i, LogitsMode::Last, buf.data());
            out.insert(out.end(), buf.begin(), buf.end());
        }
        return out;
    };
    auto with = graph_test_backend(*m, n_ctx, 8, true), without = graph_test_backend(*m, n_ctx, 8, false);
    EXPECT_EQ(cuda_backend_logits_head(*with), 49152);
    const std::vector<float> a = run(*with, true), d = run(*without, false);
    auto with2 = graph_test_backend(*m, n_ctx, 8, true);
    const std::vector<float> a2 = run(*with2, false);
    ASSERT_EQ(a.size(), d.size());
    EXPECT_TRUE(std::all_of(a.begin(), a.end(), [](float x) { return std::isfinite(x); }));
    EXPECT_EQ(0, std::memcmp(a.data(), d.data(), a.size() * sizeof(float)));
    EXPECT_EQ(0, std::memcmp(a2.data(), d.data(), a2.size() * sizeof(float)));
}

// Decode graphs are keyed by split count and tail (logits, argmax, top-k with k rounded up to a
// power of two) and kept at most 32: 130 steps crossing four split counts (32 keys per split)
// with nine tails in turn (36 combinations) restart the cache, and every step's logits, argmax
// and top k still match the same calls launched kernel by kernel, k = 3 taken from its bucket 4.
TEST(CudaModel, DecodeGraphCacheIsBounded) {
    REQUIRE_GPU();
    const auto m = make_model("qwen3", 29);
    const int64_t V = m->config.n_vocab;
    constexpr int n_ctx = 200, n_prefill = 20, n_end = 150;
    const std::vector<int32_t> tokens = random_tokens(V, n_end, 3);
    const int ks[] = {0, 1, 2, 3, 5, 9, 17, 33, 100};  // 0: logits, 1: argmax, else top-k
    struct Out {
        std::vector<float> logits, vals;
        std::vector<int32_t> ids;
    };
    auto run = [&](Backend& b) {
        Out o;
        std::vector<float> row(static_cast<size_t>(V));
        b.forward(tokens.data(), n_prefill, 0, LogitsMode::Last, row.data());
        std::vector<int32_t> ids(128);
        std::vector<float> vals(128);
        for (int p = n_prefill, i = 0; p < n_end; ++p, ++i) {
            const int k = ks[i % 9];
            const int32_t t = tokens[static_cast<size_t>(p)];
            if (k == 0) {
                b.forward(&t, 1, p, LogitsMode::Last, row.data());
                o.logits.insert(o.logits.end(), row.begin(), row.end());
            } else if (k == 1) {
                o.ids.push_back(forward_argmax(b, t, p));
            } else {
                forward_topk(b, t, p, k, ids.data(), vals.data());
                o.ids.insert(o.ids.end(), ids.begin(), ids.begin() + k);
                o.vals.insert(o.vals.end(), vals.begin(), vals.begin() + k);
            }
        }
        return o;
    };
    auto make = [&](bool graphs) { return graph_test_backend(*m, n_ctx, n_prefill, graphs, true); };
    auto with = make(true);
    const Out a = run(*with);
    auto without = make(false);
    const Out d = run(*without);
    EXPECT_LE(cuda_backend_graph_count(*with), 32 + 2);  // + the prefill's two layer graphs
    EXPECT_GE(cuda_backend_graph_count(*with), 3);
    ASSERT_EQ(a.logits.size(), d.logits.size());
    EXPECT_EQ(0, std::memcmp(a.logits.data(), d.logits.data(), a.logits.size() * sizeof(float)));
    EXPECT_EQ(a.ids, d.ids);
    EXPECT_EQ(a.vals, d.vals);
    // k = 3 (from bucket 4) against the host reference on the logits of the same step
    auto ref = make(false);
    std::vector<float> row(static_cast<size_t>(V));
    ref->forward(tokens.data(), n_prefill, 0, LogitsMode::Last, row.data());
    ref->forward(&tokens[n_prefill], 1, n_prefill, LogitsMode::Last, row.data());
    std::vector<int32_t> ids(3), ref_ids(3);
    std::vector<float> vals(3), ref_vals(3);
    cuda::topk_ref(row.data(), V, 3, ref_vals.data(), ref_ids.data());
    auto top = make(true);
    top->forward(tokens.data(), n_prefill, 0, LogitsMode::Last, row.data());
    forward_topk(*top, tokens[n_prefill], n_prefill, 3, ids.data(), vals.data());
    EXPECT_EQ(ids, ref_ids);
    EXPECT_EQ(vals, ref_vals);
}

TEST(CudaModelTwins, TwinSequenceMatchesCpuBackend) {
    for (const char* arch : {"llama", "qwen2", "qwen3"}) {
      for (bool f16w : {false, true}) {
        for (KvType kv : {KvType::Int8, KvType::Fp16}) {
            SCOPED_TRACE(std::string(arch) + (kv == KvType::Int8 ? " int8" : " fp16") + (f16w ? " f16-weights" : ""));
            const auto m = make_model(arch, 17, f16w);
            const int64_t V = m->config.n_vocab;
            auto cpu = create_cpu_backend(m->config, CpuOptions{2});
            cpu->bind_weights(m->weights, WeightPlacement::Auto);
            cpu->allocate(TF_CTX, TF_BATCH, kv);
            TwinForward twin(*m, TF_CTX, kv);
            const std::vector<int32_t> tokens = schedule_tokens(V);
            const std::vector<float> lc = run_schedule(tokens, V, backend_fwd(*cpu));
            const std::vector<float> lt = run_schedule(
                tokens, V, [&](const int32_t* t, int n, int pos0, float* out) { twin.forward(t, n, pos0, out); });
            const int n_pos = TF_POS;
            check_logits(lc, lt, n_pos, V, f16w,
                         std::string("twin ") + arch + (kv == KvType::Int8 ? " int8" : " fp16") +
                             (f16w ? " f16-weights" : ""));
        }
      }
    }
}

// The GPU's step sequence on the real SmolLM2 (30 layers, Q4_1; models/, fetched by
// scripts/test.sh) over public-domain text, run with the kernels' twins (which the op tests hold
// the GPU kernels to), needing no GPU. This model is unusually sensitive to 8-bit activations:
// measured here, the CPU backend is 3.8% (FP16 KV) / 5.0% (INT8 KV) from the exact fp32 sequence
// and the GPU path's twins 1.9% / 3.0%; GPU twins vs the CPU backend 4.3% / 5.2%, top-1 100%
// under the margin rule. Bounds: 4% vs exact and 8% vs the CPU overall (no per-position bound,
// which single low-variance positions dominate), top-1 agreement under the margin rule.
TEST(CudaModelTwins, RealModelTwinSequence) {
    const std::string path = test::smollm2_path();
    if (!test::file_exists(path)) {
        if (std::getenv("JLLM_REQUIRE_MODELS")) FAIL() << "model missing: " << path << " (scripts/fetch_model.sh)";
        GTEST_SKIP() << "no " << path << " (scripts/fetch_model.sh)";
    }
    TinyModel m;
    m.file = GgufFile::open(path);
    m.config = load_model_config(*m.file);
    m.weights = bind_model_weights(*m.file, m.config);
    const int64_t V = m.config.n_vocab;
    const auto tok = Tokenizer::from_gguf(*m.file);
    std::vector<int32_t> tokens = tok->encode(test::read_file(test::data_dir() + "/text/public_domain.txt"), false, false);
    ASSERT_GE(tokens.size(), static_cast<size_t>(TF_POS));
    tokens.resize(TF_POS);
    auto twin_run = [&](TwinForward& t) {
        return run_schedule(tokens, V, [&](const int32_t* ids, int n, int pos0, float* out) { t.forward(ids, n, pos0, out); });
    };
    for (KvType kv : {KvType::Fp16, KvType::Int8}) {
        const std::string k = kv == KvType::Int8 ? "int8" : "fp16";
        auto cpu = create_cpu_backend(m.config, CpuOptions{2});
        cpu->bind_weights(m.weights, WeightPlacement::Auto);
        cpu->allocate(TF_CTX, TF_BATCH, kv);
        TwinForward gpu_twin(m, TF_CTX, kv), exact(m, TF_CTX, kv, true);
        const std::vector<float> lc = run_schedule(tokens, V, backend_fwd(*cpu));
        const std::vector<float> lg = twin_run(gpu_twin);
        const std::vector<float> le = twin_run(exact);
        check_logits(le, lg, TF_POS, V, false, "SmolLM2 GPU twins vs exact, " + k, 1.0, 0.04);
        // The CPU backend is the farther from exact (its 8-bit activations; measured per position,
        // mean relative RMS: CPU 4.2% FP16 / 5.0% INT8 KV, the twins 1.5% / 2.3%), so its own
        // top-1 misses are left out of the top-1 criterion here.
        check_logits(lc, lg, TF_POS, V, false, "SmolLM2 GPU twins vs CPU backend, " + k, 1.0, 0.08, &le);
    }
}

// ---- debug mode: named per-layer activations from both backends ----

using Dump = std::map<std::string, std::vector<float>>;

void record(void* ctx, const char* name, const float* data, int64_t n_tokens, int64_t width) {
    static_cast<Dump*>(ctx)->operator[](name).assign(data, data + n_tokens * width);
}

double rel_rms(const std::vector<float>& ref, const std::vector<float>& got) {
    double se = 0.0, sr = 0.0;
    for (size_t i = 0; i < ref.size(); ++i) {
        se += (static_cast<double>(got[i]) - ref[i]) * (static_cast<double>(got[i]) - ref[i]);
        sr += static_cast<double>(ref[i]) * ref[i];
    }
    return std::sqrt(se / std::max(sr, 1e-30));
}

// F16 weights: the CPU multiplies in float, so every tap must agree to 1e-3 (relative RMS);
// quantized weights: the CPU's 8-bit activations allow a few percent, and 10% catches a broken
// step. FP16 KV, so no INT8 rounding tie enters.
TEST(CudaModelDebug, PerLayerActivationsMatchCpu) {
    REQUIRE_GPU();
    const bool dump = std::getenv("JLLM_CUDA_MODEL_DUMP") != nullptr;
    for (const char* arch : {"llama", "qwen2", "qwen3"}) {
        for (bool f16w : {true, false}) {
            const std::string label = std::string(arch) + (f16w ? " f16-weights" : " quantized");
            SCOPED_TRACE(label);
            const auto m = make_model(arch, 23, f16w);
            auto cpu = create_cpu_backend(m->config, CpuOptions{2});
            auto gpu = create_cuda_backend(m->config);
            cpu->bind_weights(m->weights, WeightPlacement::Auto);
            gpu->bind_weights(m->weights, WeightPlacement::Copy);
            cpu->allocate(64, 16, KvType::Fp16);
            gpu->allocate(64, 16, KvType::Fp16);
            Dump dc, dg;
            cpu->set_tap(record, &dc);
            gpu->set_tap(record, &dg);
            std::vector<int32_t> tokens = {1, 7, 42, 299, 0, 150, 3, 3, 77, 12, 5, 200};
            const int n = static_cast<int>(tokens.size());
            std::vector<float> lc(static_cast<size_t>(n) * m->config.n_vocab), lg(lc.size());
            cpu->forward(tokens.data(), n, 0, LogitsMode::All, lc.data());
            gpu->forward(tokens.data(), n, 0, LogitsMode::All, lg.data());
            // and one decode step (the GEMV path)
            cpu->forward(&tokens[0], 1, n, LogitsMode::Last, lc.data());
            gpu->forward(&tokens[0], 1, n, LogitsMode::Last, lg.data());
            ASSERT_EQ(dc.size(), dg.size());
            if (dump) std::printf("  %s (last forward: one decode step)\n", label.c_str());
            for (const auto& kv : dc) {
                const auto it = dg.find(kv.first);
                ASSERT_NE(it, dg.end()) << "GPU did not report " << kv.first;
                ASSERT_EQ(it->second.size(), kv.second.size()) << kv.first;
                const double e = rel_rms(kv.second, it->second);
                if (dump) std::printf("    %-14s rel RMS %.6f\n", kv.first.c_str(), e);
                EXPECT_LE(e, f16w ? 1e-3 : 0.10) << kv.first;
            }
            cpu->set_tap(nullptr, nullptr);
            gpu->set_tap(nullptr, nullptr);
        }
    }
}

}  // namespace
}  // namespace jllm::test

#else

TEST(CudaModel, NotBuilt) { GTEST_SKIP() << "built without the CUDA backend"; }

#endif
