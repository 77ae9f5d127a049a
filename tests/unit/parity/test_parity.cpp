// tests/unit/parity/test_parity_smollm2.cpp — the CPU engine against an independent
// implementation on a real model: teacher-forced logits vs llama.cpp goldens
// (scripts/golden/gen_logit_goldens.py), INT8-vs-FP16 KV perplexity, and a greedy chat answer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "core/fp16.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "quant/quant_types.h"
#include "engine/chat_template.h"
#include "jllm_engine.h"
#include "synth/synth_model.h"
#include "test_paths.h"

using namespace jllm;

// The gate for quantized weights is 2% relative RMS; measured here 2.5% (see the Q4_1
// test). This bound catches regressions without claiming the gate; the F32-weight test below is
// the tight check of the forward pass itself.
constexpr double PARITY_Q41_BOUND = 0.03;

namespace {

struct GoldenPos {
    float lse, mean, std;
    std::vector<int32_t> top_ids;
    std::vector<float> top_logits;
    std::vector<float> sample_logits;
};
struct GoldenPrompt {
    std::vector<int32_t> tokens;
    std::vector<GoldenPos> pos;
};
struct Golden {
    uint32_t n_vocab = 0;
    std::vector<int32_t> sample_ids;
    std::vector<GoldenPrompt> prompts;
};

template <typename T>
void rd(std::ifstream& f, T* p, size_t n) {
    f.read(reinterpret_cast<char*>(p), static_cast<std::streamsize>(n * sizeof(T)));
    if (!f) throw std::runtime_error("golden file truncated");
}

Golden load_golden(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("cannot open " + path);
    char magic[8];
    rd(f, magic, 8);
    if (std::memcmp(magic, "JLLMLGT1", 8) != 0) throw std::runtime_error("bad golden magic");
    uint32_t hdr[4];
    rd(f, hdr, 4);
    Golden g;
    g.n_vocab = hdr[0];
    const uint32_t n_prompts = hdr[1], n_sample = hdr[2], n_top = hdr[3];
    g.sample_ids.resize(n_sample);
    rd(f, g.sample_ids.data(), n_sample);
    for (uint32_t p = 0; p < n_prompts; ++p) {
        GoldenPrompt gp;
        uint32_t n;
        rd(f, &n, 1);
        gp.tokens.resize(n);
        rd(f, gp.tokens.data(), n);
        for (uint32_t i = 0; i < n; ++i) {
            GoldenPos pos;
            float s[3];
            rd(f, s, 3);
            pos.lse = s[0];
            pos.mean = s[1];
            pos.std = s[2];
            pos.top_ids.resize(n_top);
            pos.top_logits.resize(n_top);
            rd(f, pos.top_ids.data(), n_top);
            rd(f, pos.top_logits.data(), n_top);
            std::vector<uint16_t> h(n_sample);
            rd(f, h.data(), n_sample);
            pos.sample_logits.resize(n_sample);
            for (uint32_t k = 0; k < n_sample; ++k) pos.sample_logits[k] = fp16_to_f32(h[k]);
            gp.pos.push_back(std::move(pos));
        }
        g.prompts.push_back(std::move(gp));
    }
    return g;
}

std::string model_or_skip() {
    const std::string path = test::smollm2_path();
    if (!test::file_exists(path)) {
        if (std::getenv("JLLM_REQUIRE_MODELS")) throw std::runtime_error("model missing: " + path);
        return "";
    }
    return path;
}


// SmolLM2 with every tensor dequantized to F32 (written with our reader, dequantizers and
// writer): the forward pass without quantized-activation noise on either side.
std::string make_f32_copy(const std::string& model) {
    const std::string out = std::string(JLLM_BINARY_DIR) + "/smollm2_f32.gguf";
    if (test::file_exists(out)) return out;
    auto src = GgufFile::open(model);
    GgufWriter w;
    for (const GgufKV& kv : src->kvs()) w.copy_kv(kv);
    w.set_u32("general.file_type", 0);
    for (const GgufTensorInfo& t : src->tensors()) {
        std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
        const GgufTensorInfo* tp = &t;
        w.add_tensor_lazy(t.name, GgmlType::F32, ne, [tp](uint8_t* dst) {
            type_traits(tp->type).to_float(tp->data, reinterpret_cast<float*>(dst), tp->n_elements());
        });
    }
    w.write_file(out);
    return out;
}

struct ParityResult {
    double rel = 0, rel_centred = 0, kl = 0;
    double rel_sample = 0;  // over the fixed sample of vocabulary ids only (no top-k entries)
    size_t n_pos = 0, n_checked = 0, n_agree = 0;
};

ParityResult run_parity(const std::string& model, const std::string& golden_path, const char* label);

// Relative RMS distance of golden `a` from golden `b` over their common sample of ids (the
// goldens of one prompt set share tokens and sample ids).
double golden_sample_distance(const std::string& path_a, const std::string& path_b) {
    const Golden a = load_golden(path_a), b = load_golden(path_b);
    EXPECT_EQ(a.sample_ids, b.sample_ids);
    EXPECT_EQ(a.prompts.size(), b.prompts.size());
    double se = 0, sr = 0;
    for (size_t p = 0; p < std::min(a.prompts.size(), b.prompts.size()); ++p) {
        EXPECT_EQ(a.prompts[p].tokens, b.prompts[p].tokens);
        for (size_t i = 0; i < std::min(a.prompts[p].pos.size(), b.prompts[p].pos.size()); ++i) {
            const std::vector<float>& x = a.prompts[p].pos[i].sample_logits;
            const std::vector<float>& y = b.prompts[p].pos[i].sample_logits;
            for (size_t k = 0; k < std::min(x.size(), y.size()); ++k) {
                const double d = static_cast<double>(x[k]) - y[k];
                se += d * d;
                sr += static_cast<double>(y[k]) * y[k];
            }
        }
    }
    return std::sqrt(se / sr);
}

}  // namespace

// Q4_1 weights, 8-bit quantized activations on both sides. Measured 2026-11-29: 2.5% relative
// RMS, top-1 agreement 99.8% under the margin rule. For scale: llama.cpp's own flash-attention
// on vs off differs by 3.4% on this model, and llama.cpp Q4_1 vs the exact F32 copy by 2.9%
// (activation quantization noise); with F32 weights the two engines agree to 0.05%.
TEST(ParitySmolLM2, TeacherForcedLogitsMatchLlamaCpp) {
    const std::string model = model_or_skip();
    if (model.empty()) GTEST_SKIP() << "SmolLM2 not downloaded (scripts/fetch_model.sh)";
    const ParityResult r = run_parity(model, test::data_dir() + "/parity/smollm2_logits.bin", "SmolLM2 Q4_1");
    EXPECT_GE(r.n_pos, 8u * 256u);
    EXPECT_LE(r.rel, PARITY_Q41_BOUND);
    EXPECT_GE(static_cast<double>(r.n_agree), 0.995 * r.n_checked);
}

// What bounds the Q4_1 comparison: both engines quantize activations to 8 bits, and each lands
// about 2.9% (sample ids) from the exact computation — the reference's F32 golden, which our F32
// path matches to 0.05%. Our Q4_1 logits must be about as close to that exact reference as
// llama.cpp's Q4_1 logits are, within 10% of its distance (measured 2026-11-30, sample ids:
// llama.cpp 2.89%; ours 2.95% avx512, 3.01% avx2, 2.99% scalar; ours vs llama.cpp Q4_1 2.88%). An exact engine would therefore sit ~2.9% from the Q4_1 golden:
// the 2% gate of the Q4_1 test is below the reference's own quantization noise.
TEST(ParitySmolLM2, QuantizedActivationNoiseNoWorseThanReference) {
    const std::string model = model_or_skip();
    if (model.empty()) GTEST_SKIP() << "SmolLM2 not downloaded (scripts/fetch_model.sh)";
    const std::string q41 = test::data_dir() + "/parity/smollm2_logits.bin";
    const std::string f32 = test::data_dir() + "/parity/smollm2_f32_logits.bin";
    const double ref_noise = golden_sample_distance(q41, f32);
    const ParityResult ours = run_parity(model, f32, "SmolLM2 Q4_1 vs the exact (F32-weight) golden");
    std::printf("[parity] llama.cpp Q4_1 vs the same exact golden: %.4f%% (sample ids); ours %.4f%%\n",
                100 * ref_noise, 100 * ours.rel_sample);
    EXPECT_GT(ref_noise, 0.02);  // the premise: the reference's own noise exceeds the 2% gate
    EXPECT_LE(ours.rel_sample, ref_noise * 1.10);
}

// The same model dequantized to F32: no activation quantization anywhere, so the two
// implementations must agree to float rounding.
TEST(ParitySmolLM2, TeacherForcedLogitsMatchLlamaCppF32Weights) {
    const std::string model = model_or_skip();
    if (model.empty()) GTEST_SKIP() << "SmolLM2 not downloaded (scripts/fetch_model.sh)";
    const std::string f32 = make_f32_copy(model);
    const ParityResult r = run_parity(f32, test::data_dir() + "/parity/smollm2_f32_logits.bin", "SmolLM2 F32");
    EXPECT_GE(r.n_pos, 8u * 256u);
    EXPECT_LE(r.rel, 0.002);
    EXPECT_EQ(r.n_agree, r.n_checked);
}

namespace {
ParityResult run_parity(const std::string& model, const std::string& golden_path, const char* label) {
    ParityResult out;
    const Golden g = load_golden(golden_path);
    Engine e;
    EngineConfig cfg;
    cfg.model_path = model;
    cfg.device = DeviceKind::Cpu;
    cfg.kv_type = KvType::Fp16;  // the reference runs an FP16 KV cache
    cfg.n_ctx = 1280;
    Status st = e.load(cfg);
    EXPECT_TRUE(st.ok) << st.message;
    if (!st.ok) return out;
    EXPECT_EQ(static_cast<uint32_t>(e.model_info().n_vocab), g.n_vocab);
    const size_t V = g.n_vocab;

    double se = 0, sr = 0, sr_c = 0;  // squared error, squared ref, squared centred ref
    double se_s = 0, sr_s = 0;        // the same over the sample ids only
    double kl_sum = 0;
    size_t n_pos = 0, n_checked = 0, n_agree = 0, n_all_agree = 0;
    double mass_min = 1.0;
    for (size_t p = 0; p < g.prompts.size(); ++p) {
        const GoldenPrompt& gp = g.prompts[p];
        std::vector<float> logits;
        st = e.eval_all_logits(gp.tokens, logits);
        EXPECT_TRUE(st.ok) << st.message;
        if (!st.ok) return out;
        for (size_t i = 0; i < gp.pos.size(); ++i) {
            const GoldenPos& ref = gp.pos[i];
            const float* ours = logits.data() + i * V;
            auto acc = [&](int32_t id, float r) {
                const double d = static_cast<double>(ours[id]) - r;
                se += d * d;
                sr += static_cast<double>(r) * r;
                sr_c += (static_cast<double>(r) - ref.mean) * (static_cast<double>(r) - ref.mean);
            };
            for (size_t k = 0; k < g.sample_ids.size(); ++k) {
                acc(g.sample_ids[k], ref.sample_logits[k]);
                const double d = static_cast<double>(ours[g.sample_ids[k]]) - ref.sample_logits[k];
                se_s += d * d;
                sr_s += static_cast<double>(ref.sample_logits[k]) * ref.sample_logits[k];
            }
            for (size_t k = 0; k < ref.top_ids.size(); ++k) acc(ref.top_ids[k], ref.top_logits[k]);
            // our log-sum-exp over the whole row
            float mx = ours[0];
            for (size_t v = 1; v < V; ++v) mx = std::max(mx, ours[v]);
            double s = 0;
            for (size_t v = 0; v < V; ++v) s += std::exp(static_cast<double>(ours[v] - mx));
            const double lse = mx + std::log(s);
            double mass = 0;
            for (size_t k = 0; k < ref.top_ids.size(); ++k) {
                const double lp_ref = ref.top_logits[k] - ref.lse;
                const double lp_our = ours[ref.top_ids[k]] - lse;
                kl_sum += std::exp(lp_ref) * (lp_ref - lp_our);
                mass += std::exp(lp_ref);
            }
            mass_min = std::min(mass_min, mass);
            size_t argmax = 0;
            for (size_t v = 1; v < V; ++v) if (ours[v] > ours[argmax]) argmax = v;
            const bool agree = static_cast<int32_t>(argmax) == ref.top_ids[0];
            n_all_agree += agree;
            if (ref.top_logits[0] - ref.top_logits[1] > 0.1f * ref.std) {
                n_checked++;
                n_agree += agree;
            }
            n_pos++;
        }
    }
    const double rel = std::sqrt(se / sr), rel_c = std::sqrt(se / sr_c);
    std::printf("[parity] %s, FP16 KV, %zu positions in %zu prompts\n", label, n_pos, g.prompts.size());
    std::printf("[parity] relative RMS error %.4f%% (vs centred reference %.4f%%; sample ids only %.4f%%)\n",
                rel * 100, rel_c * 100, 100 * std::sqrt(se_s / sr_s));
    std::printf("[parity] top-1 agreement %zu/%zu under the margin rule, %zu/%zu overall\n", n_agree, n_checked,
                n_all_agree, n_pos);
    std::printf("[parity] mean KL(ref||ours) over the reference top-%zu %.3g nats (min covered mass %.3f)\n",
                g.prompts[0].pos[0].top_ids.size(), kl_sum / n_pos, mass_min);
    out.rel = rel;
    out.rel_centred = rel_c;
    out.rel_sample = std::sqrt(se_s / sr_s);
    out.kl = kl_sum / n_pos;
    out.n_pos = n_pos;
    out.n_checked = n_checked;
    out.n_agree = n_agree;
    return out;
}
}  // namespace

TEST(ParitySmolLM2, Int8KvPerplexityWithinOnePercentOfFp16) {
    const std::string model = model_or_skip();
    if (model.empty()) GTEST_SKIP() << "SmolLM2 not downloaded (scripts/fetch_model.sh)";
    const std::string text = test::read_file(test::data_dir() + "/text/public_domain.txt");
    auto ppl = [&](KvType kv) {
        Engine e;
        EngineConfig cfg;
        cfg.model_path = model;
        cfg.device = DeviceKind::Cpu;
        cfg.kv_type = kv;
        cfg.n_ctx = 2560;
        Status st = e.load(cfg);
        EXPECT_TRUE(st.ok) << st.message;
        std::vector<int32_t> ids = e.tokenize(text, false, false);
        ids.resize(std::min<size_t>(ids.size(), 2400));
        std::vector<float> logits;
        st = e.eval_all_logits(ids, logits);
        EXPECT_TRUE(st.ok) << st.message;
        const size_t V = static_cast<size_t>(e.model_info().n_vocab);
        double nll = 0;
        for (size_t i = 0; i + 1 < ids.size(); ++i) {
            const float* row = logits.data() + i * V;
            float mx = row[0];
            for (size_t v = 1; v < V; ++v) mx = std::max(mx, row[v]);
            double s = 0;
            for (size_t v = 0; v < V; ++v) s += std::exp(static_cast<double>(row[v] - mx));
            nll -= row[ids[i + 1]] - mx - std::log(s);
        }
        return std::make_pair(std::exp(nll / (ids.size() - 1)), ids.size());
    };
    const auto [p16, n16] = ppl(KvType::Fp16);
    const auto [p8, n8] = ppl(KvType::Int8);
    ASSERT_GE(n16, 2000u);
    const double diff = std::fabs(p8 - p16) / p16;
    std::printf("[parity] perplexity over %zu tokens: FP16 KV %.4f, INT8 KV %.4f (%.3f%% apart)\n", n16, p16, p8,
                diff * 100);
    EXPECT_LE(diff, 0.01);
}

TEST(ParitySmolLM2, GreedyChatAnswersParis) {
    const std::string model = model_or_skip();
    if (model.empty()) GTEST_SKIP() << "SmolLM2 not downloaded (scripts/fetch_model.sh)";
    Engine e;
    EngineConfig cfg;
    cfg.model_path = model;
    cfg.device = DeviceKind::Cpu;
    cfg.n_ctx = 512;
    ASSERT_TRUE(e.load(cfg).ok);
    std::vector<ChatMessage> msgs(1);
    msgs[0].role = "user";
    msgs[0].content = "What is the capital of France?";
    ChatRenderOptions opt;
    GenerateRequest req;
    // The answer is begun for the model: left to itself, SmolLM2-135M opens with "L'Étoile" in
    // every arithmetic (our scalar, AVX2 and AVX-512 levels, and llama.cpp: llama-cpp-python
    // 0.3.36 greedy gives "L'Étoile, la Cité, la Nation, ..." with no Paris in 32 tokens), and
    // whether "Paris" followed within 32 tokens turned on summation order alone.
    req.prompt = e.render_chat(msgs, opt) + "The capital of France is";
    req.parse_special = true;
    req.add_bos = false;
    req.sampling.temperature = 0.0f;
    req.max_tokens = 8;
    GenerateResult r = e.generate(req, nullptr);
    ASSERT_NE(r.finish, FinishReason::Error) << r.error;
    std::printf("[parity] answer: %s\n", r.text.c_str());
    EXPECT_NE(r.text.find("Paris"), std::string::npos) << r.text;
}

// Synthetic Qwen2 / Qwen3 models of the test shapes with the real Qwen vocabulary (jllm-synth,
// seed 42; the bytes are deterministic, so the files written here are the ones the goldens were
// made from), Q8_0 and Q4_K_M, against llama.cpp. Random weights give small, flat logits, so the
// relative error is dominated by activation-quantization noise on both sides. Measured
// 2026-11-29: 0.58% / 1.18% (qwen3 q8_0 / q4_k_m), 0.42% / 0.65% (qwen2), top-1 agreement 100%.
struct SynthCase {
    const char* preset;
    const char* recipe;
    QuantRecipe q;
};

class ParitySynth : public ::testing::TestWithParam<SynthCase> {};

TEST_P(ParitySynth, TeacherForcedLogitsMatchLlamaCpp) {
    const SynthCase c = GetParam();
    const std::string name = std::string(c.preset) + "-" + c.recipe;
    const std::string path = std::string(JLLM_BINARY_DIR) + "/parity_" + name + ".gguf";
    SynthOptions opt;
    opt.preset = c.preset;
    opt.recipe = c.q;
    opt.seed = 42;
    opt.tokenizer_dir = test::shared_dir() + "/testdata/tokenizers";
    write_synth_model(opt, path, 2);
    const ParityResult r = run_parity(path, test::data_dir() + "/parity/" + name + "_logits.bin", name.c_str());
    EXPECT_GE(r.n_pos, 8u * 256u);
    EXPECT_LE(r.rel, 0.02);  // the gate
    EXPECT_EQ(r.n_agree, r.n_checked);
}

INSTANTIATE_TEST_SUITE_P(Qwen, ParitySynth,
                         ::testing::Values(SynthCase{"tiny-qwen3", "q8_0", QuantRecipe::Q8_0},
                                           SynthCase{"tiny-qwen3", "q4_k_m", QuantRecipe::Q4_K_M},
                                           SynthCase{"tiny-qwen2", "q8_0", QuantRecipe::Q8_0},
                                           SynthCase{"tiny-qwen2", "q4_k_m", QuantRecipe::Q4_K_M}),
                         [](const auto& info) {
                             std::string n = std::string(info.param.preset) + "_" + info.param.recipe;
                             for (char& ch : n) if (ch == '-') ch = '_';
                             return n;
                         });
