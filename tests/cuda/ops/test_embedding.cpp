// tests/cuda/ops/test_embedding.cpp — the token embedding lookup against embed_ref on every weight
// type, in the file's layout and in the tiled Q4_K/Q6_K layout, with repeated and out-of-range ids.
#include <gtest/gtest.h>

#if JLLM_CUDA

#include <cmath>
#include <cstdint>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "op_test_util.h"

namespace jllm::test {
namespace {

// ---- error bounds
// Embedding: bit-exact (dequantization is exact, quant_ref.cpp); an out-of-range id's row NaN.

// Every type in the file's layout (37 rows), and Q4_K and Q6_K tiled (40 rows).
TEST(CudaOps, EmbeddingEveryTypeBitExact) {
    JLLM_REQUIRE_CUDA_DEVICE();
    std::mt19937 rng(42);
    std::vector<cuda::WeightFormat> fmts(std::begin(kAllTypes), std::end(kAllTypes));
    fmts.emplace_back(GgmlType::Q4_K, cuda::WeightLayout::Tiles);
    fmts.emplace_back(GgmlType::Q6_K, cuda::WeightLayout::Tiles);
    for (const cuda::WeightFormat& f : fmts) {
        const GgmlType t = f.type;
        SCOPED_TRACE(std::string(type_name(t)) + (f.tiled() ? " tiles" : ""));
        const int64_t n_vocab = f.tiled() ? 40 : 37, n_embd = cols_for(t, 1);
        const std::vector<uint8_t> table = random_matrix(t, n_vocab, n_embd, rng);
        const int32_t last = static_cast<int32_t>(n_vocab - 1);
        const std::vector<int32_t> ids = {0, last, 5, 5, 17, -1, last + 1, 2, 11};  // repeats; two out of range
        const int n_tok = static_cast<int>(ids.size());
        std::vector<float> ref(static_cast<size_t>(n_tok) * n_embd);
        cuda::embed_ref(t, table.data(), n_vocab, n_embd, ids.data(), n_tok, ref.data());
        DevBuf<uint8_t> dt(device_bytes(t, f.layout, table, n_vocab, n_embd));
        DevBuf<int32_t> did(ids);
        DevBuf<float> out(ref.size());
        out.poison(0x7F);  // a finite garbage pattern: the out-of-range rows must become NaN
        cuda::launch_embed(f, dt.get(), n_vocab, n_embd, did.get(), n_tok, out.get(), nullptr);
        const std::vector<float> got = out.download();
        for (size_t i = 0; i < ref.size(); ++i) {
            if (std::isnan(ref[i])) {
                ASSERT_TRUE(std::isnan(got[i])) << i;
            } else {
                ASSERT_EQ(got[i], ref[i]) << i;
            }
        }
    }
}

}  // namespace
}  // namespace jllm::test

#endif  // JLLM_CUDA
