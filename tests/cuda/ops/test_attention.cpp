// tests/cuda/ops/test_attention.cpp — causal grouped-query attention over the INT8 and FP16 KV
// cache against attention_ref: the tensor-core prefill and the fp32 kernels, decode split over the
// KV length (graph mode: the position read on the device), the group-shared decode kernel (INT8
// and FP16) at 1, 2 and 4 warps, its heads per block (host), its 8-bit output, a verification's
// queries as decode steps in one launch (bit for bit against one step per query), and the Q/K/V
// post folded into the decode kernel bit for bit against the two kernels it replaces. The kernels a
// case may take (cuda::AttnChoice) travel in its AttentionParams.
#include <gtest/gtest.h>

#if JLLM_CUDA

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/rope.h"
#include "backend/kv_quant.h"
#include "model/model_config.h"
#include "op_test_util.h"

namespace jllm::test {
namespace {

// ---- error bounds (every tolerance of this file's tests), times max |v|
// The fp32 kernels only reorder sums: fp32 online softmax vs fp64 two-pass.
constexpr double ATTN_FP32 = 2e-4;
// The tensor-core INT8 decode (head_dim 128, 256) rounds only the probabilities to fp16 (Q in two
// fp16 parts).
constexpr double ATTN_DECODE_MMA = 1e-3;
// The tensor-core prefill rounds Q and the probabilities to fp16. Against the reference of the
// fp16-rounded queries only the probabilities' rounding is left: relative 2^-11 (the output moves
// by at most 2^-11 x max |v|), and below fp16's normal range steps of 2^-25 absolute per key,
// which with these tests' random signs add far less than 1e-3 x max |v|.
constexpr double ATTN_PREFILL_MMA = 2e-3;
// The 8-bit output: within half a quantization step (d) of the reference output, plus the bound
// above.
constexpr float ATTN_Q8_STEPS = 0.5001f;
// The decode kernel with the Q/K/V post folded in: bit for bit against the post and the attention
// launched one after the other.

struct AttnCase {
    KvType kv;
    int head_dim, n_head, n_head_kv, n_tok, pos0, max_split;
    bool pos_on_device = false;  // graph mode: pos0 read from device memory
    bool q8_out = false;         // also write the output as 8-bit activations
    bool decode_rows = false;    // the queries as decode steps in one launch (a verification)
};

// The buffers an attention reads and writes (host or device): queries, output, caches, scales.
void point_attention(cuda::AttentionParams& p, const float* q, float* out, const void* kc, const void* vc,
                     const Half* ks, const Half* vs) {
    p.q = q;
    p.out = out;
    p.k_cache = kc;
    p.v_cache = vc;
    p.k_scale = ks;
    p.v_scale = vs;
}

// The attention after the post pp: its projections as queries, its caches, tokens, position and
// heads; out: the output.
cuda::AttentionParams attention_after(const cuda::QkvPostParams& pp, float* out) {
    cuda::AttentionParams ap;
    point_attention(ap, pp.q, out, pp.k_cache, pp.v_cache, pp.k_scale, pp.v_scale);
    ap.kv_type = pp.kv_type;
    ap.n_tok = pp.n_tok;
    ap.pos0 = pp.pos0;
    ap.pos_dev = pp.pos_dev;
    ap.n_head = pp.n_head;
    ap.n_head_kv = pp.n_head_kv;
    ap.head_dim = pp.head_dim;
    return ap;
}

// choice: the kernels launch_attention may take (the bound follows the one it took).
void run_attn_case(const AttnCase& c, const cuda::AttnChoice& choice, std::mt19937& rng) {
    SCOPED_TRACE(std::string(c.kv == KvType::Int8 ? "int8" : "fp16") + " hd=" + std::to_string(c.head_dim) +
                 " heads=" + std::to_string(c.n_head) + "/" + std::to_string(c.n_head_kv) + " n_tok=" +
                 std::to_string(c.n_tok) + " pos0=" + std::to_string(c.pos0) + " split=" + std::to_string(c.max_split) +
                 (c.decode_rows ? " rows" : ""));
    const int hd = c.head_dim, KV = c.n_head_kv * hd, Q = c.n_head * hd;
    const int n_ctx = c.pos0 + c.n_tok + 5;  // a few unused positions at the end
    const size_t n_elem = static_cast<size_t>(n_ctx) * KV;
    std::vector<uint8_t> kc, vc;
    std::vector<Half> ks(static_cast<size_t>(n_ctx) * c.n_head_kv), vs(ks.size());
    float vmax = 0.0f;
    if (c.kv == KvType::Int8) {
        std::uniform_int_distribution<int> q8(-127, 127);
        std::uniform_real_distribution<float> sc(0.005f, 0.05f);
        kc.resize(n_elem);
        vc.resize(n_elem);
        for (auto& b : kc) b = static_cast<uint8_t>(static_cast<int8_t>(q8(rng)));
        for (auto& b : vc) b = static_cast<uint8_t>(static_cast<int8_t>(q8(rng)));
        for (auto& s : ks) s = to_half(sc(rng) * 4.0f);
        for (auto& s : vs) {
            s = to_half(sc(rng));
            vmax = std::max(vmax, 127.0f * to_f32(s));
        }
    } else {
        std::normal_distribution<float> nd(0.0f, 1.0f);
        kc.resize(n_elem * 2);
        vc.resize(n_elem * 2);
        Half* kh = reinterpret_cast<Half*>(kc.data());
        Half* vh = reinterpret_cast<Half*>(vc.data());
        for (size_t i = 0; i < n_elem; ++i) {
            kh[i] = to_half(2.0f * nd(rng));
            vh[i] = to_half(nd(rng));
            vmax = std::max(vmax, std::fabs(to_f32(vh[i])));
        }
    }
    const std::vector<float> q = randn(static_cast<size_t>(c.n_tok) * Q, rng);
    std::vector<float> ref(q.size());
    cuda::AttentionParams p;
    p.kv_type = c.kv;
    p.n_tok = c.n_tok;
    p.pos0 = c.pos0;
    p.n_head = c.n_head;
    p.n_head_kv = c.n_head_kv;
    p.head_dim = hd;
    p.choice = choice;
    cuda::AttentionParams hp = p;
    point_attention(hp, q.data(), ref.data(), kc.data(), vc.data(), ks.data(), vs.data());
    // The tensor-core prefill's queries as it rounds them (fp16; over the INT8 cache int8 per row at
    // max |q| / 127): its reference (it takes the prefill's path when p, as launched below, is
    // supported).
    std::vector<float> q16(q.size()), ref16(q.size());
    if (cuda::attention_mma_int8_queries(p)) {
        for (size_t r = 0; r < q.size() / static_cast<size_t>(hd); ++r) {
            const float* x = q.data() + r * hd;
            float amax = 0.0f;
            for (int d = 0; d < hd; ++d) amax = std::max(amax, std::fabs(x[d]));
            const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
            for (int d = 0; d < hd; ++d) q16[r * hd + d] = std::nearbyint(x[d] * inv) * (amax / 127.0f);
        }
    } else {
        for (size_t i = 0; i < q.size(); ++i) q16[i] = to_f32(to_half(q[i]));
    }
    cuda::AttentionParams hp16 = hp;
    point_attention(hp16, q16.data(), ref16.data(), kc.data(), vc.data(), ks.data(), vs.data());

    DevBuf<float> dq(q), dout(q.size());
    DevBuf<uint8_t> dkc(kc), dvc(vc);
    DevBuf<Half> dks(ks), dvs(vs);
    const size_t wf = cuda::attention_work_floats(c.n_tok, c.n_head, hd, std::max(1, c.max_split));
    DevBuf<float> work(wf);
    work.poison();
    dout.poison();
    cuda::AttentionParams dp = p;
    const bool int8 = c.kv == KvType::Int8;
    point_attention(dp, dq.get(), dout.get(), dkc.get(), dvc.get(), int8 ? dks.get() : nullptr,
                    int8 ? dvs.get() : nullptr);
    dp.work = work.get();
    dp.max_split = c.max_split;
    dp.work_floats = wf;
    dp.decode_rows = c.decode_rows;
    std::vector<int> positions(static_cast<size_t>(c.n_tok));  // graph mode's: one per query
    for (int t = 0; t < c.n_tok; ++t) positions[t] = c.pos0 + t;
    DevBuf<int> dpos(positions);
    if (c.pos_on_device) {
        dp.pos_dev = dpos.get();
        dp.pos0 = 0;  // must not be used
    }
    const size_t qb = cuda::act_q8_bytes(c.n_tok, Q);
    DevBuf<uint8_t> dq8(qb);
    dq8.poison();
    if (c.q8_out) dp.out_q8 = dq8.get();
    cuda::launch_attention(dp, nullptr);
    const std::vector<float> got = dout.download();
    const bool prefill_mma = choice.kernel == cuda::AttnKernel::Auto && cuda::attention_mma_supported(dp);
    const bool mma = prefill_mma || cuda::attention_decode_tensor_cores(dp);
    const double bound = (prefill_mma ? ATTN_PREFILL_MMA : mma ? ATTN_DECODE_MMA : ATTN_FP32) * vmax;
    if (prefill_mma) {
        cuda::attention_ref(hp16);
        ref = ref16;
    } else {
        cuda::attention_ref(hp);
    }
    for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(got[i], ref[i], bound) << i << (mma ? " (tensor cores)" : "");
    if (c.q8_out) {
        const std::vector<uint8_t> h = dq8.download();
        const int8_t* qv = reinterpret_cast<const int8_t*>(h.data());
        const float* sc = reinterpret_cast<const float*>(h.data() + cuda::act_q8_scale_offset(c.n_tok, Q));
        for (size_t i = 0; i < ref.size(); ++i) {
            const float d = sc[4 * (i / 32)];
            ASSERT_NEAR(d * static_cast<float>(qv[i]), ref[i], ATTN_Q8_STEPS * d + bound) << "q8 " << i;
        }
    }
}

// Decode shapes of the group-shared kernel (groups 1-8, head_dim 64/128/256; FP16 at 64 takes the
// generic one): several chunks per split, partial chunks, warps without keys, graph mode.
void run_decode_shapes(KvType kv, const cuda::AttnChoice& choice, std::mt19937& rng) {
    run_attn_case({kv, 128, 32, 8, 1, 4095, 33, true, true}, choice, rng);  // Qwen3-4B heads at depth 4096
    run_attn_case({kv, 64, 32, 8, 1, 4095, 33, true, true}, choice, rng);   // group 4 at head_dim 64 (fp32 path)
    run_attn_case({kv, 128, 32, 8, 1, 700, 2}, choice, rng);                // group 4: several chunks per split
    run_attn_case({kv, 64, 9, 3, 1, 300, 16, true, true}, choice, rng);     // group 3, last split short
    run_attn_case({kv, 128, 12, 2, 1, 45, 8}, choice, rng);                 // group 6, one partial chunk
    run_attn_case({kv, 256, 16, 2, 1, 1500, 8}, choice, rng);               // group 8, largest head
    run_attn_case({kv, 128, 4, 4, 1, 129, 1}, choice, rng);                 // group 1, no split, 2+ chunks
    run_attn_case({kv, 64, 10, 2, 1, 500, 4}, choice, rng);                 // group 5: the generic kernel
}

// The decode attention's heads per block (host code, no GPU): groups whose post folds in as they
// are (1, 2) keep the group; even groups halve to two heads per block (the post folds in), then,
// on a grid past two blocks per SM, double back to four (the post in two rounds), else halve to
// one while the grid stays within two blocks per SM (the post folds in where a block's heads, K
// and V take one round of four warps); odd groups keep theirs (the post separate).
TEST(CudaOps, AttentionHeadsPerBlockOnHost) {
    auto heads = [](int group, int n_head, int n_split, int sms) {
        const cuda::DecodeHeads d =
            cuda::attention_decode_heads(group, n_head, n_split, sms, cuda::ATTN_DECODE_WARPS_DEFAULT);
        return std::make_pair(d.per_block, d.folds_post);
    };
    using P = std::pair<int, bool>;
    EXPECT_EQ(heads(4, 32, 1, 132), P(1, true));
    EXPECT_EQ(heads(4, 32, 8, 132), P(1, true));
    EXPECT_EQ(heads(4, 32, 16, 132), P(2, true));   // 256 two-head blocks: two per SM
    EXPECT_EQ(heads(4, 32, 17, 132), P(4, true));   // past two per SM: four heads, two rounds
    EXPECT_EQ(heads(4, 32, 33, 132), P(4, true));   // qwen3-4b at depth 4096
    EXPECT_EQ(heads(2, 16, 1, 132), P(2, true));    // qwen3-0.6b: the post folds in
    EXPECT_EQ(heads(2, 16, 64, 132), P(2, true));
    EXPECT_EQ(heads(3, 24, 1, 132), P(3, false));   // odd group
    EXPECT_EQ(heads(6, 24, 1, 132), P(3, false));
    EXPECT_EQ(heads(8, 32, 2, 8), P(4, true));      // 8 SMs (the Orin Nano): 32 two-head blocks
    EXPECT_EQ(heads(8, 32, 1, 8), P(2, true));
    for (int group : {1, 2, 3, 4, 6, 8}) {
        for (int n_split : {1, 2, 4, 8, 16, 33, 64, 256}) {
            for (int sms : {8, 16, 132}) {
                const int n_head = 8 * group;
                const auto [hb, folds] = heads(group, n_head, n_split, sms);
                ASSERT_TRUE(hb >= 1 && hb <= 4 && group % hb == 0);
                int fold_hb = group;  // halved while even and its heads, K and V exceed four warps
                while (fold_hb % 2 == 0 && fold_hb + 2 > cuda::ATTN_DECODE_WARPS_DEFAULT) fold_hb /= 2;
                const int64_t grid = static_cast<int64_t>(n_head / fold_hb) * n_split;
                if (hb < fold_hb) {  // below the folding size only while the grid stays small
                    EXPECT_LE(static_cast<int64_t>(n_head / hb) * n_split, 2 * sms);
                    EXPECT_EQ(folds, hb + 2 <= cuda::ATTN_DECODE_WARPS_DEFAULT);
                } else if (hb > fold_hb) {  // twice the folding size only on a large grid
                    EXPECT_EQ(hb, 2 * fold_hb);
                    EXPECT_GT(grid, 2 * sms);
                    EXPECT_TRUE(folds);
                } else {
                    EXPECT_EQ(folds, fold_hb + 2 <= cuda::ATTN_DECODE_WARPS_DEFAULT);
                }
            }
        }
    }
}

// The tensor-core prefill's key splits (host code, no GPU): one wave of 128-row blocks, splits of
// at least 4 tiles of 64 keys, within max_split and the work buffer; what the combine's split_plan
// gives back.
TEST(CudaOps, AttentionPrefillSplitOnHost) {
    std::vector<float> dummy(1);
    auto split = [&](int n_tok, int pos0, int n_head, int n_head_kv, int sms, int max_split = 256,
                     size_t work = 0) {
        cuda::AttentionParams p;
        p.n_tok = n_tok;
        p.pos0 = pos0;
        p.n_head = n_head;
        p.n_head_kv = n_head_kv;
        p.head_dim = 128;
        p.work = dummy.data();
        p.max_split = max_split;
        p.work_floats = work > 0 ? work : cuda::attention_mma_work_floats(128, sms);
        return cuda::attention_mma_split(p, sms);
    };
    // qwen3-4b (32 / 8 heads: 4 heads x 32 tokens a block) on the H200's 132 SMs
    cuda::MmaSplit s = split(33, 4096, 32, 8, 132);
    EXPECT_EQ(s.n_split, 8);  // 16 blocks x 8
    EXPECT_EQ(s.per_split, 9 * 64);
    EXPECT_EQ(split(33, 16384, 32, 8, 132).n_split, 8);
    EXPECT_EQ(split(5, 4096, 32, 8, 132).n_split, 13);  // a 5-token verification: 8 blocks x 16 of 320 keys, 13 used
    EXPECT_EQ(split(512, 16384, 32, 8, 132).n_split, 1);  // 128 blocks: a wave already
    EXPECT_EQ(split(33, 0, 32, 8, 132).n_split, 1);       // one key tile
    EXPECT_EQ(split(33, 150, 32, 8, 132).n_split, 1);     // 3 tiles: fewer than 4 per split
    EXPECT_EQ(split(33, 4096, 32, 8, 8).n_split, 1);      // the Orin's 8 SMs: 16 blocks fill them
    EXPECT_EQ(split(33, 4096, 32, 8, 132, 3).n_split, 3);  // max_split (JLLM_CUDA_ATTN_SPLITS)
    EXPECT_EQ(split(33, 4096, 32, 8, 132, 1).n_split, 1);
    EXPECT_EQ(split(33, 4096, 32, 8, 132, 256, 33 * 32 * 130 * 2).n_split, 2);  // the work buffer
    for (int n_tok : {2, 5, 33, 64, 100, 300}) {
        for (int pos0 : {0, 100, 1000, 4095, 16384}) {
            for (int sms : {8, 132}) {
                for (int kv : {8, 2, 32}) {
                    const cuda::MmaSplit sp = split(n_tok, pos0, 32, kv, sms);
                    if (sp.n_split == 1) continue;
                    const int n_kv = pos0 + n_tok;
                    EXPECT_EQ(sp.per_split % 64, 0);
                    EXPECT_GE(sp.per_split, 4 * 64);
                    EXPECT_EQ(sp.n_split, (n_kv + sp.per_split - 1) / sp.per_split);
                    // the combine's split_plan(n_kv, n_split, per_split) gives them back: keys per
                    // split ceil(n_kv / n_split) in 32s, at least per_split
                    const int plan = std::max(((n_kv + sp.n_split - 1) / sp.n_split + 31) / 32 * 32, sp.per_split);
                    EXPECT_EQ(plan, sp.per_split);
                    EXPECT_LE(static_cast<size_t>(sp.n_split) * n_tok * 32 * 130, cuda::attention_mma_work_floats(128, sms));
                }
            }
        }
    }
}

TEST(CudaOps, AttentionDecodeWarps) {
    JLLM_REQUIRE_CUDA_DEVICE();
    std::mt19937 rng(4242);
    for (int warps : {1, 2, 4}) {
        SCOPED_TRACE("decode warps " + std::to_string(warps));
        const cuda::AttnChoice choice{cuda::AttnKernel::Auto, warps};
        for (KvType kv : {KvType::Int8, KvType::Fp16}) {
            run_decode_shapes(kv, choice, rng);
            run_attn_case({kv, 128, 16, 8, 1, 100, 32, true, true}, choice, rng);  // two short splits
            run_attn_case({kv, 64, 4, 2, 1, 2047, 3}, choice, rng);                // long splits
            run_attn_case({kv, 256, 8, 2, 1, 3000, 16, true, true}, choice, rng);  // group 4, largest head, depth
        }
    }
}

TEST(CudaOps, AttentionPrefillAndDecode) {
    JLLM_REQUIRE_CUDA_DEVICE();
    std::mt19937 rng(31337);
    for (cuda::AttnKernel mode : {cuda::AttnKernel::Auto, cuda::AttnKernel::Simt}) {
        const cuda::AttnChoice choice{mode, cuda::ATTN_DECODE_WARPS_DEFAULT};
        SCOPED_TRACE(mode == cuda::AttnKernel::Auto ? "tensor-core prefill" : "fp32 kernels only");
        for (KvType kv : {KvType::Int8, KvType::Fp16}) {
            run_attn_case({kv, 64, 4, 2, 1, 0, 1}, choice, rng);        // first token: one key
            run_attn_case({kv, 64, 8, 2, 37, 0, 1}, choice, rng);       // prefill from 0, GQA 4
            run_attn_case({kv, 128, 6, 6, 5, 61, 1}, choice, rng);      // prefill after a prefix, MHA
            run_attn_case({kv, 32, 8, 1, 3, 300, 1}, choice, rng);      // MQA, small head
            run_attn_case({kv, 256, 2, 1, 2, 9, 1}, choice, rng);       // largest head
            run_attn_case({kv, 128, 16, 8, 1, 30, 4}, choice, rng);     // decode, context < one split
            run_attn_case({kv, 128, 16, 8, 1, 1000, 8}, choice, rng);   // decode split over 4 ranges
            run_attn_case({kv, 64, 4, 2, 1, 2047, 3}, choice, rng);     // more ranges wanted than allowed
            run_attn_case({kv, 96, 4, 4, 1, 513, 64}, choice, rng);     // head_dim 96, split 3, last split short
            run_attn_case({kv, 64, 12, 4, 23, 40, 1}, choice, rng);     // group 3: 5 tokens per block, partial last tile
            run_attn_case({kv, 256, 32, 2, 3, 70, 1}, choice, rng);     // group 16, largest head: > 48 KB shared memory
            run_attn_case({kv, 128, 32, 1, 1, 700, 4}, choice, rng);    // group 32 (1024 threads), decode split
            // graph mode (position on the device, grid for max_split) and 8-bit output
            run_attn_case({kv, 128, 16, 8, 1, 0, 32, true, true}, choice, rng);     // first token, 31 idle splits
            run_attn_case({kv, 128, 16, 8, 1, 100, 32, true, true}, choice, rng);   // two splits of 64
            run_attn_case({kv, 128, 16, 8, 1, 4095, 32, true, true}, choice, rng);  // 32 splits of 128
            run_attn_case({kv, 64, 8, 2, 1, 777, 5, true, false}, choice, rng);     // uneven, fp32 out only
            run_attn_case({kv, 128, 8, 2, 3, 20, 1, false, true}, choice, rng);     // no split: separate quantization
            // tensor-core prefill shapes: several query tiles, several key tiles, a prefix, GQA 4
            run_attn_case({kv, 128, 8, 2, 130, 0, 1}, choice, rng);                 // 3 query tiles, last partial
            run_attn_case({kv, 128, 8, 2, 64, 200, 1, false, true}, choice, rng);   // after a prefix, 8-bit out
            run_attn_case({kv, 64, 9, 3, 77, 5, 1}, choice, rng);                   // SmolLM2-like heads, group 3
            // the prefill block's heads of one group: 2 heads x 64 tokens, 8 heads x 16 tokens
            run_attn_case({kv, 128, 4, 2, 70, 10, 1}, choice, rng);                 // group 2, 2 query tiles
            run_attn_case({kv, 64, 16, 2, 40, 90, 1}, choice, rng);                 // group 8, 3 query tiles
            run_attn_case({kv, 128, 32, 2, 19, 150, 1, false, true}, choice, rng);  // group 16: 2 blocks of 8
            // a short prefill at depth splits its keys across blocks (attention_mma_split on this
            // device's SMs): splits past some rows' last keys, a last split short, 8-bit output
            run_attn_case({kv, 128, 8, 2, 33, 1000, 64}, choice, rng);              // group 4, 2 token blocks
            run_attn_case({kv, 64, 16, 2, 7, 3000, 64, false, true}, choice, rng);  // group 8, one block per KV head
            run_attn_case({kv, 128, 6, 6, 40, 700, 8}, choice, rng);                // MHA, splits capped at 8
            run_attn_case({kv, 128, 2, 2, 600, 8, 8}, choice, rng);  // a split past whole blocks and warps' first rows
            // a verification's queries as decode steps in one launch (decode_rows): Qwen3-4B heads at
            // depth in graph mode, rows whose own plans use one split or several, no split at all,
            // head_dim 64 (fp32 path), group 6, group 5 (a decode launch per query)
            run_attn_case({kv, 128, 32, 8, 4, 4093, 33, true, true, true}, choice, rng);
            run_attn_case({kv, 128, 32, 8, 4, 126, 8, false, true, true}, choice, rng);  // 127-130 keys
            run_attn_case({kv, 128, 16, 8, 3, 20, 4, false, true, true}, choice, rng);   // one split each
            run_attn_case({kv, 64, 16, 4, 2, 700, 16, true, true, true}, choice, rng);
            run_attn_case({kv, 256, 12, 2, 4, 1000, 8, false, false, true}, choice, rng);
            run_attn_case({kv, 64, 10, 2, 4, 300, 4, true, true, true}, choice, rng);
            run_decode_shapes(kv, choice, rng);
        }
    }
}

// A verification's queries in one launch (AttentionParams::decode_rows) against each query decoded
// as a step at its position (n_tok 1, the same max_split), one after another: the output and its
// 8-bit rows bit for bit, so a verified token's logits are a plain step's, and with the Q/K/V post
// (folded in: 2 and 3 queries at one or two heads per block; its own kernel first: 4 queries, or
// where the step does not fold it) the caches and their scales too. Graph mode (every query over
// the grid's max_split) and host plans (queries whose own plan takes one split go through the
// combine; a split boundary between the new positions), the group-shared kernel's heads (1, 2 and 4
// per block, the fp32 path at head_dim 64, FP16 at 128), group 6 (three per block: the post by its
// own kernel) and group 5 (a decode launch per query).
TEST(CudaOps, AttentionDecodeRowsMatchSteps) {
    JLLM_REQUIRE_CUDA_DEVICE();
    std::mt19937 rng(5150);
    struct Case {
        KvType kv;
        int hd, n_head, n_head_kv, n_tok, pos0, max_split;
        bool pos_dev, post;
    };
    const Case cases[] = {
        {KvType::Int8, 128, 32, 8, 4, 4093, 33, true, true},   // Qwen3-4B heads at depth 4096, graph mode
        {KvType::Int8, 128, 32, 8, 4, 4093, 33, false, false}, // the same, plans made on the host, no post
        {KvType::Int8, 128, 32, 8, 4, 126, 33, false, true},   // 127-130 keys: a split boundary at 128
        {KvType::Int8, 128, 32, 8, 3, 20, 8, false, true},     // one split each: written by the kernel
        {KvType::Int8, 128, 32, 8, 2, 1500, 16, true, true},   // two heads per block
        {KvType::Int8, 64, 16, 8, 2, 700, 8, true, true},      // head_dim 64, the fp32 path (post folded)
        {KvType::Int8, 256, 8, 2, 4, 300, 4, false, true},     // the largest head, four per block
        {KvType::Fp16, 128, 32, 8, 3, 1000, 16, false, true},  // the FP16 cache (post folded)
        {KvType::Fp16, 128, 32, 8, 4, 1000, 16, false, true},  // the FP16 cache (post apart)
        {KvType::Fp16, 128, 16, 8, 4, 255, 8, true, false},    // the FP16 cache, graph mode, no post
        {KvType::Int8, 128, 12, 2, 4, 300, 4, true, true},     // group 6: the post by its own kernel
        {KvType::Int8, 64, 10, 2, 4, 300, 4, false, true},     // group 5: a decode launch per query
    };
    const cuda::AttnChoice choice;  // the engine's kernels
    for (const Case& c : cases) {
        SCOPED_TRACE(std::string(c.kv == KvType::Int8 ? "int8" : "fp16") + " hd=" + std::to_string(c.hd) +
                     " heads=" + std::to_string(c.n_head) + "/" + std::to_string(c.n_head_kv) + " n_tok=" +
                     std::to_string(c.n_tok) + " pos0=" + std::to_string(c.pos0) + " split=" +
                     std::to_string(c.max_split) + (c.pos_dev ? " graph" : "") + (c.post ? " post" : ""));
        const bool int8 = c.kv == KvType::Int8;
        const int hd = c.hd, Q = c.n_head * hd, KV = c.n_head_kv * hd, n_ctx = c.pos0 + c.n_tok + 3;
        // Earlier positions random; with the post, the new ones (and past them) poisoned (INT8
        // -128, FP16 all ones: a NaN), else random too (the queries read them as they are).
        const int filled = c.post ? c.pos0 : n_ctx;
        const size_t row_bytes = static_cast<size_t>(KV) * (int8 ? 1 : 2);
        std::vector<uint8_t> kc(static_cast<size_t>(n_ctx) * row_bytes, int8 ? 0x80 : 0xFF), vc(kc.size(), kc[0]);
        std::vector<Half> ks(static_cast<size_t>(n_ctx) * c.n_head_kv, Half{0xFFFF}), vs(ks.size(), Half{0xFFFF});
        std::uniform_int_distribution<int> q8(-127, 127);
        std::uniform_real_distribution<float> sc(0.005f, 0.05f);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        for (size_t i = 0; i < static_cast<size_t>(filled) * KV; ++i) {
            if (int8) {
                kc[i] = static_cast<uint8_t>(static_cast<int8_t>(q8(rng)));
                vc[i] = static_cast<uint8_t>(static_cast<int8_t>(q8(rng)));
            } else {
                reinterpret_cast<Half*>(kc.data())[i] = to_half(2.0f * nd(rng));
                reinterpret_cast<Half*>(vc.data())[i] = to_half(nd(rng));
            }
        }
        for (size_t i = 0; i < static_cast<size_t>(filled) * c.n_head_kv; ++i) {
            ks[i] = to_half(sc(rng) * 4.0f);
            vs[i] = to_half(sc(rng));
        }
        // The projections (the queries themselves without the post) and the post's weights.
        const std::vector<float> q = randn(static_cast<size_t>(c.n_tok) * Q, rng, 2.0f);
        const std::vector<float> k = randn(static_cast<size_t>(c.n_tok) * KV, rng, 2.0f);
        const std::vector<float> v = randn(static_cast<size_t>(c.n_tok) * KV, rng, 2.0f);
        const std::vector<float> qn = randn(hd, rng), kn = randn(hd, rng);
        ModelConfig mc;
        mc.n_rot = hd;
        mc.rope_freq_base = 1000000.0f;
        const std::vector<float> inv = rope_inv_freq(mc, nullptr);
        DevBuf<float> dqn(qn), dkn(kn), dinv(inv);
        std::vector<int> positions(static_cast<size_t>(c.n_tok));
        for (int t = 0; t < c.n_tok; ++t) positions[t] = c.pos0 + t;
        DevBuf<int> dpos(positions);
        struct Run {
            std::vector<float> out;
            std::vector<int8_t> codes;   // [n_tok][Q]
            std::vector<float> scales;   // [n_tok][Q / 32][4]
            std::vector<uint8_t> kc, vc;
            std::vector<Half> ks, vs;
        };
        auto run = [&](bool rows) {
            DevBuf<float> dq(q), dk(k), dv(v), out(q.size());
            DevBuf<uint8_t> dkc(kc), dvc(vc);
            DevBuf<Half> dks(ks), dvs(vs);
            out.poison();
            Run r;
            r.codes.resize(q.size());
            r.scales.resize(q.size() / 8);
            // queries t0 .. t0 + n - 1 in one launch (n > 1: decode_rows)
            auto launch = [&](int t0, int n) {
                const size_t wf = cuda::attention_work_floats(n, c.n_head, hd, c.max_split);
                DevBuf<float> work(wf);
                DevBuf<uint8_t> q8buf(cuda::act_q8_bytes(n, Q));
                work.poison();
                q8buf.poison();
                cuda::QkvPostParams pp;
                pp.kv_type = c.kv;
                point_post(pp,
                           {dq.get() + static_cast<size_t>(t0) * Q, dk.get() + static_cast<size_t>(t0) * KV,
                            dv.get() + static_cast<size_t>(t0) * KV, nullptr, nullptr, nullptr, dqn.get(), dkn.get(),
                            dinv.get(), dkc.get(), dvc.get(), dks.get(), dvs.get()},
                           false, true);
                pp.n_rot = hd;
                pp.neox = true;
                pp.n_tok = n;
                pp.pos0 = c.pos_dev ? 0 : c.pos0 + t0;
                pp.pos_dev = c.pos_dev ? dpos.get() + t0 : nullptr;
                pp.n_head = c.n_head;
                pp.n_head_kv = c.n_head_kv;
                pp.head_dim = hd;
                pp.eps = 1e-6f;
                pp.k_rot_scale = int8 ? kv_rotation_scale(hd) : 0.0f;
                cuda::AttentionParams ap = attention_after(pp, out.get() + static_cast<size_t>(t0) * Q);
                ap.work = work.get();
                ap.work_floats = wf;
                ap.max_split = c.max_split;
                ap.out_q8 = q8buf.get();
                ap.choice = choice;
                ap.decode_rows = n > 1;
                ap.post = c.post ? &pp : nullptr;
                cuda::launch_attention(ap, nullptr);
                const std::vector<uint8_t> h = q8buf.download();
                std::memcpy(r.codes.data() + static_cast<size_t>(t0) * Q, h.data(), static_cast<size_t>(n) * Q);
                std::memcpy(r.scales.data() + static_cast<size_t>(t0) * Q / 8, h.data() + cuda::act_q8_scale_offset(n, Q),
                            static_cast<size_t>(n) * Q / 8 * sizeof(float));
            };
            if (rows) {
                launch(0, c.n_tok);
            } else {
                for (int t = 0; t < c.n_tok; ++t) launch(t, 1);
            }
            r.out = out.download();
            r.kc = dkc.download();
            r.vc = dvc.download();
            r.ks = dks.download();
            r.vs = dvs.download();
            return r;
        };
        const Run want = run(false);
        const Run got = run(true);
        auto same = [](const auto& a, const auto& b) {
            return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(a[0])) == 0;
        };
        for (int t = 0; t < c.n_tok; ++t) {
            SCOPED_TRACE("query " + std::to_string(t));
            const size_t o = static_cast<size_t>(t) * Q;
            ASSERT_EQ(std::memcmp(got.out.data() + o, want.out.data() + o, Q * sizeof(float)), 0) << "output";
            ASSERT_EQ(std::memcmp(got.codes.data() + o, want.codes.data() + o, static_cast<size_t>(Q)), 0) << "8-bit codes";
            ASSERT_EQ(std::memcmp(got.scales.data() + o / 8, want.scales.data() + o / 8, Q / 8 * sizeof(float)), 0)
                << "8-bit scales";
        }
        for (float x : got.out) ASSERT_TRUE(std::isfinite(x));
        EXPECT_TRUE(same(got.kc, want.kc)) << "K cache";
        EXPECT_TRUE(same(got.vc, want.vc)) << "V cache";
        if (int8) {
            EXPECT_TRUE(same(got.ks, want.ks)) << "K scales";
            EXPECT_TRUE(same(got.vs, want.vs)) << "V scales";
        }
        if (c.post) {  // the new positions were stored
            for (int i = 0; i < c.n_tok * KV; ++i) {
                const size_t at = static_cast<size_t>(c.pos0) * KV + i;
                if (int8) ASSERT_NE(static_cast<int8_t>(got.kc[at]), -128) << i;
                else ASSERT_NE(reinterpret_cast<const Half*>(got.kc.data())[at].bits, 0xFFFF) << i;
            }
        }
    }
}

// The decode attention given the Q/K/V post (AttentionParams::post) against the two kernels it
// replaces (launch_qkv_post, then launch_attention): the output, its 8-bit copy (made in the
// kernel without a split) and both caches with their scales bit for bit, every other cache
// position untouched, the projections left as they were where the post is folded in. Folded
// (one or two query heads per block on four warps, or four in two rounds): Qwen3-0.6B heads
// (Q/K-norm) with and without splits and in graph mode, qwen2-like biases with neox off, head_dim
// 64 and 256, the first token, Qwen3-4B heads at four splits (one head per block: four blocks store
// each KV head's bytes), at 16 splits (two per block) and at depth 4096 (four per block; also at
// head_dim 64, the fp32 path); by its own kernel first: group 6 with biases (three heads per
// block). Each case over the INT8 cache and, at head_dim 128 and 256, the FP16 cache.
TEST(CudaOps, AttentionDecodeFoldsPost) {
    JLLM_REQUIRE_CUDA_DEVICE();
    std::mt19937 rng(9090);
    const cuda::AttnChoice choice;  // the engine's kernels
    struct Case {
        int hd, n_head, n_head_kv, pos, max_split;
        bool bias, qk_norm, neox, pos_dev;
    };
    const Case cases[] = {
        {128, 16, 8, 0, 1, false, true, true, true},       // Qwen3-0.6B heads, first token
        {128, 16, 8, 100, 1, false, true, true, false},    // one split: 8-bit output in the kernel
        {128, 16, 8, 1000, 8, false, true, true, true},    // splits, graph mode
        {128, 16, 8, 4095, 33, false, true, true, false},  // depth 4096
        {128, 14, 14, 300, 4, true, false, false, false},  // qwen2-like biases, group 1
        {64, 8, 4, 256, 2, true, true, false, true},       // head_dim 64, two splits
        {256, 4, 2, 77, 1, false, true, true, false},      // largest head
        {128, 32, 8, 700, 4, false, true, true, true},     // Qwen3-4B heads, one per block: folded
        {128, 32, 8, 4095, 33, false, true, true, false},  // Qwen3-4B at depth 4096: four per block
        {128, 32, 8, 1500, 16, false, true, true, true},   // Qwen3-4B at 16 splits: two per block
        {64, 32, 8, 4095, 33, true, true, false, false},   // head_dim 64 at depth: four per block, fp32 path
        {128, 12, 2, 50, 1, true, false, false, false},    // group 6 with biases: its own kernel
    };
    for (const KvType kv : {KvType::Int8, KvType::Fp16}) {
        for (const Case& c : cases) {
            // The FP16 cache takes the group-shared kernel at head_dim 128 and 256 only (the generic
            // kernel, which does not fold the post, at 64).
            if (kv == KvType::Fp16 && c.hd == 64) continue;
            const bool int8 = kv == KvType::Int8;
            SCOPED_TRACE(std::string(int8 ? "int8" : "fp16") + " hd=" + std::to_string(c.hd) + " heads=" +
                         std::to_string(c.n_head) + "/" + std::to_string(c.n_head_kv) + " pos=" +
                         std::to_string(c.pos) + " split=" + std::to_string(c.max_split));
            const int hd = c.hd, Q = c.n_head * hd, KV = c.n_head_kv * hd, n_ctx = c.pos + 9;
            const size_t row_bytes = static_cast<size_t>(KV) * (int8 ? 1 : 2);  // one position's K (or V)
            const std::vector<float> q = randn(Q, rng, 2.0f), k = randn(KV, rng, 2.0f), v = randn(KV, rng, 2.0f);
            const std::vector<float> bq = randn(Q, rng, 0.5f), bk = randn(KV, rng, 0.5f), bv = randn(KV, rng, 0.5f);
            const std::vector<float> qn = randn(hd, rng), kn = randn(hd, rng);
            ModelConfig mc;
            mc.n_rot = hd;
            mc.rope_freq_base = 1000000.0f;
            const std::vector<float> inv = rope_inv_freq(mc, nullptr);
            // A cache of earlier positions (random), the new position and past it poisoned (INT8
            // -128, FP16 all ones: a NaN).
            std::uniform_int_distribution<int> q8(-127, 127);
            std::uniform_real_distribution<float> sc(0.005f, 0.05f);
            std::normal_distribution<float> nd(0.0f, 2.0f);
            std::vector<uint8_t> kc(static_cast<size_t>(n_ctx) * row_bytes, int8 ? 0x80 : 0xFF), vc(kc.size(), kc[0]);
            std::vector<Half> ks(static_cast<size_t>(n_ctx) * c.n_head_kv, Half{0xFFFF}), vs(ks.size(), Half{0xFFFF});
            for (size_t i = 0; i < static_cast<size_t>(c.pos) * KV; ++i) {
                if (int8) {
                    kc[i] = static_cast<uint8_t>(static_cast<int8_t>(q8(rng)));
                    vc[i] = static_cast<uint8_t>(static_cast<int8_t>(q8(rng)));
                } else {
                    reinterpret_cast<Half*>(kc.data())[i] = to_half(nd(rng));
                    reinterpret_cast<Half*>(vc.data())[i] = to_half(nd(rng));
                }
            }
            for (size_t i = 0; i < static_cast<size_t>(c.pos) * c.n_head_kv; ++i) {
                ks[i] = to_half(sc(rng) * 4.0f);
                vs[i] = to_half(sc(rng));
            }
            DevBuf<float> dbq(bq), dbk(bk), dbv(bv), dqn(qn), dkn(kn), dinv(inv);
            DevBuf<int> dpos(std::vector<int>{c.pos});
            struct Run {
                std::vector<float> q, k, v, out;
                std::vector<uint8_t> out_q8, kc, vc;
                std::vector<Half> ks, vs;
            };
            auto run = [&](bool fold) {
                DevBuf<float> dq(q), dk(k), dv(v), dout(static_cast<size_t>(Q));
                DevBuf<uint8_t> dkc(kc), dvc(vc), dq8(cuda::act_q8_bytes(1, Q));
                DevBuf<Half> dks(ks), dvs(vs);
                DevBuf<float> work(cuda::attention_work_floats(1, c.n_head, hd, c.max_split));
                dout.poison();
                dq8.poison();
                work.poison();
                cuda::QkvPostParams pp;
                pp.kv_type = kv;
                // no scales for the FP16 cache (nothing may read them)
                point_post(pp,
                           {dq.get(), dk.get(), dv.get(), dbq.get(), dbk.get(), dbv.get(), dqn.get(), dkn.get(),
                            dinv.get(), dkc.get(), dvc.get(), int8 ? dks.get() : nullptr, int8 ? dvs.get() : nullptr},
                           c.bias, c.qk_norm);
                pp.n_rot = hd;
                pp.neox = c.neox;
                pp.n_tok = 1;
                pp.pos0 = c.pos_dev ? 0 : c.pos;
                pp.pos_dev = c.pos_dev ? dpos.get() : nullptr;
                pp.n_head = c.n_head;
                pp.n_head_kv = c.n_head_kv;
                pp.head_dim = hd;
                pp.eps = 1e-6f;
                pp.k_rot_scale = int8 ? kv_rotation_scale(hd) : 0.0f;  // INT8 keys rotated, as the engine stores them
                cuda::AttentionParams ap = attention_after(pp, dout.get());
                ap.work = work.get();
                ap.max_split = c.max_split;
                ap.out_q8 = dq8.get();
                ap.choice = choice;
                if (fold) {
                    ap.post = &pp;
                } else {
                    cuda::launch_qkv_post(pp, nullptr);
                }
                cuda::launch_attention(ap, nullptr);
                return Run{dq.download(), dk.download(), dv.download(), dout.download(), dq8.download(),
                           dkc.download(), dvc.download(), dks.download(), dvs.download()};
            };
            const Run ref = run(false);
            const Run got = run(true);
            // Query heads per block as launch_attention picks them (the grid's splits: max_split in
            // every case where the choice depends on them).
            const bool folded = cuda::attention_decode_heads(c.n_head / c.n_head_kv, c.n_head, c.max_split,
                                                             cuda::device_sm_count(), choice.decode_warps)
                                    .folds_post;
            auto same = [](const auto& a, const auto& b) {
                return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(a[0])) == 0;
            };
            EXPECT_TRUE(same(got.out, ref.out)) << "output";
            EXPECT_TRUE(same(got.kc, ref.kc)) << "K cache";
            EXPECT_TRUE(same(got.vc, ref.vc)) << "V cache";
            EXPECT_TRUE(same(got.ks, ref.ks)) << "K scales";
            EXPECT_TRUE(same(got.vs, ref.vs)) << "V scales";
            // The 8-bit output is the quantization of the fp32 output (the twin's, bit for bit).
            std::vector<uint8_t> q8ref(got.out_q8.size());
            cuda::quantize_act_ref(got.out.data(), 1, Q, q8ref.data());
            EXPECT_TRUE(same(got.out_q8, q8ref)) << "8-bit output";
            EXPECT_TRUE(same(ref.out_q8, q8ref)) << "8-bit output (reference)";
            // The post wrote the new position only; the projections stay as they were.
            for (size_t i = 0; i < kc.size(); ++i) {
                if (i / row_bytes == static_cast<size_t>(c.pos)) continue;
                ASSERT_EQ(got.kc[i], kc[i]) << "K cache changed at " << i;
                ASSERT_EQ(got.vc[i], vc[i]) << "V cache changed at " << i;
            }
            for (int i = 0; i < KV; ++i) {
                const size_t at = static_cast<size_t>(c.pos) * KV + i;
                if (int8) ASSERT_NE(static_cast<int8_t>(got.kc[at]), -128);
                else ASSERT_NE(reinterpret_cast<const Half*>(got.kc.data())[at].bits, 0xFFFF);
            }
            if (folded) EXPECT_TRUE(same(got.q, q) && same(got.k, k) && same(got.v, v)) << "projections changed";
            else EXPECT_TRUE(same(got.q, ref.q) && same(got.k, ref.k) && same(got.v, ref.v)) << "post";
        }
    }
}

}  // namespace
}  // namespace jllm::test

#endif  // JLLM_CUDA
