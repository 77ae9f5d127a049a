// tests/unit/tokenizer/test_smollm2.cpp — the `smollm` family on a real SmolLM2 GGUF (from
// models/, skipped when absent) against tests/data/tokenizer/smollm2.jsonl: HF `tokenizers` on
// the same vocabulary with SmolLM2's pre-tokenizer (see scripts/golden/gen_tokenizer_goldens.py).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "test_paths.h"
#include "tok_test_util.h"
#include "tokenizer/unicode_util.h"

namespace jllm::test {
namespace {

TEST(SmolLM2, CorpusExactIdsBothModes) {
    if (!file_exists(smollm2_path())) GTEST_SKIP() << smollm2_path() << " not found";
    auto f = GgufFile::open(smollm2_path());
    auto tok = Tokenizer::from_gguf(*f);
    EXPECT_EQ(tok->pre(), "smollm");
    EXPECT_EQ(tok->n_vocab(), 49152);
    EXPECT_TRUE(tok->is_eog(2));  // <|im_end|>
    std::ifstream in(data_dir() + "/tokenizer/smollm2.jsonl");
    std::string line;
    size_t n = 0, ok_plain = 0, ok_special = 0;
    while (std::getline(in, line)) {
        const auto j = nlohmann::json::parse(line);
        const std::string text = hex_to_bytes(j.at("hex").get<std::string>());
        const auto want_plain = j.at("smollm2").get<std::vector<int32_t>>();
        const auto want_special = j.at("smollm2_special").get<std::vector<int32_t>>();
        const auto got_plain = tok->encode(text, false, false);
        const auto got_special = tok->encode(text, false, true);
        const std::string name = j.at("name").get<std::string>();
        EXPECT_EQ(ids_to_string(got_plain), ids_to_string(want_plain)) << name;
        EXPECT_EQ(ids_to_string(got_special), ids_to_string(want_special)) << name << " (special)";
        ++n;
        ok_plain += got_plain == want_plain;
        ok_special += got_special == want_special;
        // SmolLM2 has no token for a few control bytes, so texts with them do not round-trip.
        bool all_bytes = true;
        for (char c : text) all_bytes &= tok->find_token(ByteUnicodeMap::get().byte_to_utf8[static_cast<uint8_t>(c)]) >= 0;
        if (utf8_is_valid(text) && all_bytes) {
            EXPECT_EQ(tok->decode(got_plain), text) << name;
        }
    }
    std::printf("[corpus] smollm2: plain %zu/%zu, parse_special %zu/%zu exact\n", ok_plain, n,
                ok_special, n);
    EXPECT_GE(n, 200u);
    EXPECT_EQ(ok_plain, n);
    EXPECT_EQ(ok_special, n);
}

}  // namespace
}  // namespace jllm::test
