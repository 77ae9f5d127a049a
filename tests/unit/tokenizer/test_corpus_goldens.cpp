// tests/unit/tokenizer/test_corpus_goldens.cpp — tests/data/tokenizer/corpus.jsonl: 200+ texts
// (many scripts, code, emoji, combining marks, whitespace runs, long numbers, ill-formed UTF-8,
// special tokens) with the ids Hugging Face `tokenizers` gives for qwen3, llama3 and tiny_bpe,
// both with special tokens as plain text and parsed. Written by
// scripts/golden/gen_tokenizer_goldens.py. Also decode(encode(x)) == x (NFC for qwen3).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "test_paths.h"
#include "tok_test_util.h"
#include "tokenizer/unicode_util.h"

namespace jllm::test {
namespace {

struct Row {
    std::string name;
    std::string bytes;
    nlohmann::json j;
};

const std::vector<Row>& corpus() {
    static std::vector<Row> rows = [] {
        std::vector<Row> r;
        std::ifstream f(data_dir() + "/tokenizer/corpus.jsonl");
        std::string line;
        while (std::getline(f, line)) {
            if (line.empty()) continue;
            Row row;
            row.j = nlohmann::json::parse(line);
            row.name = row.j.at("name").get<std::string>();
            row.bytes = hex_to_bytes(row.j.at("hex").get<std::string>());
            r.push_back(std::move(row));
        }
        return r;
    }();
    return rows;
}

class CorpusGoldens : public ::testing::TestWithParam<const char*> {};

TEST_P(CorpusGoldens, ExactIdsBothModes) {
    const std::string tname = GetParam();
    const Tokenizer& tok = hf_tokenizer(tname);
    size_t n = 0, ok_plain = 0, ok_special = 0;
    for (const Row& row : corpus()) {
        if (!row.j.contains(tname)) continue;
        ++n;
        const auto want_plain = row.j.at(tname).get<std::vector<int32_t>>();
        const auto want_special = row.j.at(tname + "_special").get<std::vector<int32_t>>();
        const auto got_plain = tok.encode(row.bytes, false, false);
        const auto got_special = tok.encode(row.bytes, false, true);
        EXPECT_EQ(ids_to_string(got_plain), ids_to_string(want_plain)) << row.name << " (plain)";
        EXPECT_EQ(ids_to_string(got_special), ids_to_string(want_special)) << row.name << " (special)";
        ok_plain += got_plain == want_plain;
        ok_special += got_special == want_special;
    }
    std::printf("[corpus] %s: plain %zu/%zu, parse_special %zu/%zu exact\n", tname.c_str(), ok_plain,
                n, ok_special, n);
    if (tname != "tiny_bpe") {
        EXPECT_GE(n, 200u);
    }
    EXPECT_EQ(ok_plain, n);
    EXPECT_EQ(ok_special, n);
}

TEST_P(CorpusGoldens, DecodeRoundTripsValidText) {
    const std::string tname = GetParam();
    const Tokenizer& tok = hf_tokenizer(tname);
    size_t n = 0;
    for (const Row& row : corpus()) {
        if (!row.j.contains(tname) || !utf8_is_valid(row.bytes)) continue;
        // lstrip/rstrip added tokens swallow whitespace: the tiny_* texts are lossy on purpose.
        if (row.name.rfind("tiny_", 0) == 0) continue;
        ++n;
        std::string want = row.bytes;
        if (tname == "qwen3" && row.j.contains("qwen3_nfc")) want = row.j["qwen3_nfc"].get<std::string>();
        for (bool special : {false, true}) {
            const auto ids = tok.encode(row.bytes, false, special);
            EXPECT_EQ(tok.decode(ids), want) << row.name << (special ? " (special)" : "");
        }
    }
    EXPECT_GT(n, 0u);
}

INSTANTIATE_TEST_SUITE_P(All, CorpusGoldens, ::testing::Values("qwen3", "llama3", "tiny_bpe"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                             return std::string(info.param);
                         });

TEST(CorpusGoldens, CorpusIsBigAndVaried) {
    size_t invalid = 0;
    for (const Row& row : corpus()) invalid += !utf8_is_valid(row.bytes);
    EXPECT_GE(corpus().size(), 200u);
    EXPECT_GE(invalid, 10u);
}

}  // namespace
}  // namespace jllm::test
