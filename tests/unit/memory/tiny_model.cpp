// tests/unit/memory/tiny_model.cpp — see tiny_model.h.
#include "tiny_model.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <random>
#include <vector>

#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "quant/quant_blocks.h"
#include "quant/quant_ref.h"
#include "test_paths.h"
#include "tokenizer/hf_import.h"

namespace jllm::test {

namespace {

constexpr int64_t N_EMBD = 64, N_FF = 128, N_HEAD = 4, N_HEAD_KV = 2, N_LAYER = 2, N_CTX = 512;

std::vector<uint8_t> q8_matrix(int64_t cols, int64_t rows, std::mt19937& rng) {
    std::normal_distribution<float> nd(0.0f, 0.5f);
    std::vector<float> row(static_cast<size_t>(cols));
    const size_t row_bytes = static_cast<size_t>(cols / 32) * sizeof(BlockQ8_0);
    std::vector<uint8_t> out(row_bytes * static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
        for (float& v : row) v = nd(rng);
        quantize_row_q8_0_ref(row.data(), reinterpret_cast<BlockQ8_0*>(out.data() + r * row_bytes), cols);
    }
    return out;
}

std::vector<uint8_t> ones_f32(int64_t n) {
    std::vector<float> v(static_cast<size_t>(n), 1.0f);
    const uint8_t* p = reinterpret_cast<const uint8_t*>(v.data());
    return std::vector<uint8_t>(p, p + v.size() * sizeof(float));
}

}  // namespace

std::string tiny_model_path() {
    static std::once_flag once;
    // One file per process: ctest runs test cases as parallel processes.
    static std::string path =
        std::string(JLLM_BINARY_DIR) + "/test_memory_tiny." + std::to_string(::getpid()) + ".gguf";
    std::call_once(once, [] {
        GgufWriter w;
        w.set_string("general.architecture", "llama");
        w.set_string("general.name", "tiny-memory-test");
        const std::string dir = data_dir() + "/tokenizer/tiny_bpe";
        TokenizerVocab vocab = hf_tokenizer_to_gguf(dir + "/tokenizer.json", dir + "/tokenizer_config.json", w);
        const int64_t V = static_cast<int64_t>(vocab.tokens.size());
        w.set_u32("llama.block_count", N_LAYER);
        w.set_u32("llama.embedding_length", N_EMBD);
        w.set_u32("llama.feed_forward_length", N_FF);
        w.set_u32("llama.attention.head_count", N_HEAD);
        w.set_u32("llama.attention.head_count_kv", N_HEAD_KV);
        w.set_u32("llama.context_length", N_CTX);
        w.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
        std::mt19937 rng(1234);
        const int64_t hd = N_EMBD / N_HEAD, KV = N_HEAD_KV * hd;
        w.add_tensor("token_embd.weight", GgmlType::Q8_0, {N_EMBD, V}, q8_matrix(N_EMBD, V, rng));
        w.add_tensor("output_norm.weight", GgmlType::F32, {N_EMBD}, ones_f32(N_EMBD));
        w.add_tensor("output.weight", GgmlType::Q8_0, {N_EMBD, V}, q8_matrix(N_EMBD, V, rng));
        for (int64_t il = 0; il < N_LAYER; ++il) {
            const std::string p = "blk." + std::to_string(il) + ".";
            w.add_tensor(p + "attn_norm.weight", GgmlType::F32, {N_EMBD}, ones_f32(N_EMBD));
            w.add_tensor(p + "attn_q.weight", GgmlType::Q8_0, {N_EMBD, N_EMBD}, q8_matrix(N_EMBD, N_EMBD, rng));
            w.add_tensor(p + "attn_k.weight", GgmlType::Q8_0, {N_EMBD, KV}, q8_matrix(N_EMBD, KV, rng));
            w.add_tensor(p + "attn_v.weight", GgmlType::Q8_0, {N_EMBD, KV}, q8_matrix(N_EMBD, KV, rng));
            w.add_tensor(p + "attn_output.weight", GgmlType::Q8_0, {N_EMBD, N_EMBD}, q8_matrix(N_EMBD, N_EMBD, rng));
            w.add_tensor(p + "ffn_norm.weight", GgmlType::F32, {N_EMBD}, ones_f32(N_EMBD));
            w.add_tensor(p + "ffn_gate.weight", GgmlType::Q8_0, {N_EMBD, N_FF}, q8_matrix(N_EMBD, N_FF, rng));
            w.add_tensor(p + "ffn_up.weight", GgmlType::Q8_0, {N_EMBD, N_FF}, q8_matrix(N_EMBD, N_FF, rng));
            w.add_tensor(p + "ffn_down.weight", GgmlType::Q8_0, {N_FF, N_EMBD}, q8_matrix(N_FF, N_EMBD, rng));
        }
        w.write_file(path);
        std::atexit([] { std::remove(path.c_str()); });
    });
    return path;
}

}  // namespace jllm::test
