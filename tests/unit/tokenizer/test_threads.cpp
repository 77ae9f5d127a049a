// tests/unit/tokenizer/test_threads.cpp — encode/decode are const and share nothing mutable:
// four threads encoding the corpus at once get the same ids as one thread.
#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "test_paths.h"
#include "tok_test_util.h"

namespace jllm::test {
namespace {

TEST(TokenizerThreads, ConcurrentEncodeMatchesSerial) {
    const Tokenizer& tok = hf_tokenizer("qwen3");
    std::vector<std::string> texts;
    std::ifstream f(data_dir() + "/tokenizer/bench_prompt_multilingual.txt");
    std::string line;
    while (std::getline(f, line)) texts.push_back(line);
    texts.push_back(read_file(data_dir() + "/tokenizer/bench_prompt.txt"));
    ASSERT_GT(texts.size(), 10u);
    std::vector<std::vector<int32_t>> serial;
    for (const auto& t : texts) serial.push_back(tok.encode(t, false, true));

    std::vector<int> mismatches(4, 0);
    std::vector<std::thread> threads;
    for (int th = 0; th < 4; ++th) {
        threads.emplace_back([&, th] {
            for (int rep = 0; rep < 20; ++rep) {
                for (size_t i = 0; i < texts.size(); ++i) {
                    const size_t k = (i + th * 7) % texts.size();
                    if (tok.encode(texts[k], false, true) != serial[k]) ++mismatches[th];
                    if (tok.decode(serial[k]) != tok.decode(serial[k])) ++mismatches[th];
                }
            }
        });
    }
    for (auto& t : threads) t.join();
    for (int th = 0; th < 4; ++th) EXPECT_EQ(mismatches[th], 0) << "thread " << th;
}

}  // namespace
}  // namespace jllm::test
