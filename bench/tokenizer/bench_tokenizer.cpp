// bench/tokenizer/bench_tokenizer.cpp — jllm-bench-tokenizer: how long encoding a prompt takes
// on one thread (the target: a 1,000-token prompt in under 2 ms), plus decode and the
// streaming detokenizer. Loads the vocabulary the way the engine does (GGUF) or converts a
// Hugging Face folder in memory.
//   jllm-bench-tokenizer --gguf vocab.gguf | --hf DIR  [--prompt FILE] [--iters N]
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/timer.h"
#include "gguf/gguf.h"
#include "jllm_version.h"
#include "tokenizer/hf_import.h"
#include "tokenizer/streaming_detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace {

std::string cpu_model() {
    std::ifstream f("/proc/cpuinfo");
    std::string line;
    while (std::getline(f, line)) {
        if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
    }
    return "unknown";
}

struct Stats {
    double min_ms, median_ms;
};

template <typename F>
Stats time_it(int iters, F&& f) {
    std::vector<double> t;
    for (int i = 0; i < iters; ++i) {
        const double t0 = jllm::now_ms();
        f();
        t.push_back(jllm::now_ms() - t0);
    }
    std::sort(t.begin(), t.end());
    return {t.front(), t[t.size() / 2]};
}

}  // namespace

int main(int argc, char** argv) {
    std::string gguf, hf, prompt_path = "tests/data/tokenizer/bench_prompt.txt";
    int iters = 200;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
        if (a == "--gguf") gguf = next();
        else if (a == "--hf") hf = next();
        else if (a == "--prompt") prompt_path = next();
        else if (a == "--iters") iters = std::max(1, std::atoi(next().c_str()));
        else {
            std::fprintf(stderr,
                         "usage: %s --gguf FILE | --hf DIR [--prompt FILE] [--iters N]\n", argv[0]);
            return 2;
        }
    }
    if (gguf.empty() == hf.empty()) {
        std::fprintf(stderr, "give exactly one of --gguf FILE or --hf DIR\n");
        return 2;
    }
    try {
        std::unique_ptr<jllm::Tokenizer> tok;
        const double t_load0 = jllm::now_ms();
        if (!gguf.empty()) {
            auto f = jllm::GgufFile::open(gguf);
            tok = jllm::Tokenizer::from_gguf(*f);
        } else {
            tok = jllm::Tokenizer::from_vocab(
                jllm::hf_load_vocab(hf + "/tokenizer.json", hf + "/tokenizer_config.json"));
        }
        const double load_ms = jllm::now_ms() - t_load0;
        std::ifstream pf(prompt_path, std::ios::binary);
        if (!pf) {
            std::fprintf(stderr, "cannot read prompt %s\n", prompt_path.c_str());
            return 1;
        }
        std::stringstream ss;
        ss << pf.rdbuf();
        const std::string prompt = ss.str();

        std::vector<int32_t> ids;
        for (int i = 0; i < 5; ++i) ids = tok->encode(prompt, false, false);  // warm caches
        const Stats enc = time_it(iters, [&] { ids = tok->encode(prompt, false, false); });
        std::string text;
        const Stats dec = time_it(iters, [&] { text = tok->decode(ids); });
        jllm::StreamingDetokenizer sd(*tok);
        const Stats stream = time_it(iters, [&] {
            text.clear();
            for (int32_t id : ids) text += sd.push(id);
            text += sd.flush();
        });

        const double per_1000 = enc.median_ms * 1000.0 / static_cast<double>(ids.size());
        std::printf("jllm-bench-tokenizer %s (%s)\n", JLLM_VERSION, JLLM_GIT_COMMIT);
        std::printf("cpu: %s (1 thread)\n", cpu_model().c_str());
        std::printf("vocab: %s, model=%s pre=%s n_vocab=%d (load %.1f ms)\n",
                    gguf.empty() ? hf.c_str() : gguf.c_str(), tok->model().c_str(),
                    tok->pre().c_str(), tok->n_vocab(), load_ms);
        std::printf("prompt: %s, %zu bytes -> %zu tokens\n", prompt_path.c_str(), prompt.size(),
                    ids.size());
        std::printf("| op | median ms | min ms | tokens/s |\n|---|---|---|---|\n");
        auto row = [&](const char* name, const Stats& s) {
            std::printf("| %s | %.3f | %.3f | %.0f |\n", name, s.median_ms, s.min_ms,
                        static_cast<double>(ids.size()) / (s.median_ms / 1000.0));
        };
        row("encode", enc);
        row("decode", dec);
        row("stream detok", stream);
        std::printf("encode per 1,000 tokens: %.3f ms (target < 2 ms): %s\n", per_1000,
                    per_1000 < 2.0 ? "PASS" : "FAIL");
        return per_1000 < 2.0 ? 0 : 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "jllm-bench-tokenizer: %s\n", e.what());
        return 1;
    }
}
