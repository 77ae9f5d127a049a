// tests/common/session_checks.h — sessions through the Engine on a synthetic tiny Qwen3, for the
// CPU tests (tests/unit/sessions) and the CUDA set (tests/cuda/model/test_cuda_sessions.cpp): the
// model file, conversations of random tokens, one greedy turn with its checkpoint, and the
// interleaving check (A, B, A, B, C, A, A: after a session's first turn only its new tokens are
// prefilled, restored from RAM when another session ran last; the text equals a cache-less engine's).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "jllm_engine.h"
#include "persistence/kv_file.h"
#include "synth/synth_model.h"
#include "test_paths.h"
#include "tiny_qwen3.h"

namespace jllm::test {

inline std::string tiny_model() {
    static const std::string path = [] {
        // ctest runs these tests as processes at once: each writes its own copy and renames it
        // over the shared name (the same bytes), so no process reads a file being written.
        const std::string p = std::string(JLLM_BINARY_DIR) + "/sessions_tiny_qwen3_q8_0.gguf";
        const std::string tmp = p + "." + std::to_string(::getpid());
        SynthOptions opt;
        opt.preset = "tiny-qwen3";
        opt.recipe = QuantRecipe::Q8_0;
        opt.seed = 11;
        opt.tokenizer_dir = test::shared_dir() + "/testdata/tokenizers";
        write_synth_model(opt, tmp, 2);
        EXPECT_EQ(std::rename(tmp.c_str(), p.c_str()), 0);
        return p;
    }();
    return path;
}

inline EngineConfig config(int cache_ram_mb, const std::string& kv_dir = "", DeviceKind device = DeviceKind::Cpu) {
    EngineConfig c;
    c.model_path = tiny_model();
    c.device = device;
    c.n_ctx = 2048;
    c.n_threads = 2;
    c.cache_ram_mb = cache_ram_mb;
    c.kv_dir = kv_dir;
    return c;
}

inline std::vector<int32_t> random_tokens(uint32_t seed, int n) {
    std::mt19937 rng(seed);
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (int32_t& x : t) x = static_cast<int32_t>(1000 + rng() % 30000);
    return t;
}

// One conversation: a long system part of its own, then a user turn of 12 tokens per call.
struct Conversation {
    std::string id;
    std::vector<int32_t> tokens;
    int turns = 0;
    std::vector<int32_t> next_prompt() {
        const std::vector<int32_t> user = random_tokens(static_cast<uint32_t>(id[0]) * 100 + static_cast<uint32_t>(turns++), 12);
        tokens.insert(tokens.end(), user.begin(), user.end());
        return tokens;
    }
};

inline GenerateResult turn(Engine& e, const std::vector<int32_t>& prompt, const std::string& session) {
    GenerateRequest r;
    r.prompt_tokens = prompt;
    r.sampling.temperature = 0;
    r.sampling.repeat_penalty = 1;
    r.max_tokens = 4;
    r.split_thinking = false;
    r.session_id = session;
    GenerateResult res = e.generate(r, nullptr);
    EXPECT_NE(res.finish, FinishReason::Error) << res.error;
    e.checkpoint();
    return res;
}

inline std::string fresh_dir(const std::string& name) {
    const std::string d = std::string(JLLM_BINARY_DIR) + "/sessions_" + name;
    (void)std::system(("rm -rf '" + d + "'").c_str());
    return d;
}

inline void check_interleaved_sessions(DeviceKind device) {
    Engine e, plain;
    ASSERT_TRUE(e.load(config(-1, "", device)).ok);
    ASSERT_TRUE(plain.load(config(0, "", device)).ok);
    EXPECT_GT(e.session_stats().ram_budget, 0);
    std::map<std::string, Conversation> conv;
    for (const char* id : {"A", "B", "C"}) conv[id] = Conversation{id, random_tokens(id[0], 300), 0};
    std::map<std::string, size_t> last_prompt;
    std::string previous;
    for (const char* id : {"A", "B", "A", "B", "C", "A", "A"}) {
        const std::vector<int32_t> prompt = conv[id].next_prompt();
        const GenerateResult r = turn(e, prompt, id);
        const GenerateResult ref = turn(plain, prompt, "");
        EXPECT_EQ(r.text, ref.text) << "session " << id;
        const GenerateStats& st = r.stats;
        if (!last_prompt.count(id)) {
            EXPECT_EQ(st.reused_tokens, 0) << id;
            EXPECT_EQ(st.cache_source, CacheSource::None) << id;
        } else {
            EXPECT_EQ(st.reused_tokens, static_cast<int>(last_prompt[id])) << id;  // only the 12 new tokens
            EXPECT_EQ(st.prompt_tokens - st.reused_tokens, 12) << id;
            if (previous == id) {
                EXPECT_EQ(st.cache_source, CacheSource::Resident) << id;
                EXPECT_EQ(st.restored_tokens, 0);
            } else {
                EXPECT_EQ(st.cache_source, CacheSource::Ram) << id;
                EXPECT_EQ(st.restored_tokens, st.reused_tokens) << id;  // nothing in common with the last
                EXPECT_GT(st.restore_ms, 0.0);
            }
        }
        last_prompt[id] = prompt.size();
        previous = id;
    }
    const SessionCacheStats s = e.session_stats();
    EXPECT_EQ(s.ram_entries, 3);  // one per session: a session's later snapshot replaces its earlier
    EXPECT_EQ(s.hits_ram, 3u);
    EXPECT_EQ(s.hits_resident, 1u);
    EXPECT_EQ(s.misses, 3u);
    EXPECT_GT(s.bytes_restored, 0u);
}

// A snapshot of `a` after `prompt` through a file at `path` into the fresh backend `b`: both
// continue with bit-identical logits for `steps` tokens (a and b allocated alike, for kind kv).
inline void expect_file_round_trip(Backend& a, Backend& b, const TinyQwen3& m, KvType kv,
                                   const std::vector<int32_t>& prompt, const std::string& path, int steps) {
    const KvShape shape = kv_shape(*m.f, m.c, kv);
    const size_t V = static_cast<size_t>(m.c.n_vocab);
    std::vector<float> la(V), lb(V);
    a.forward(prompt.data(), static_cast<int>(prompt.size()), 0, LogitsMode::Last, la.data());
    KvSnapshot s;
    s.key = "s:roundtrip";
    s.session_id = "roundtrip";
    s.tokens = prompt;
    a.read_kv(0, static_cast<int>(prompt.size()), s.kv);
    std::string why;
    ASSERT_EQ(write_kv_file(path, s, shape, why), KvFileError::None) << why;
    KvSnapshot back;
    ASSERT_EQ(read_kv_file(path, shape, back, why), KvFileError::None) << why;
    EXPECT_EQ(back.tokens, s.tokens);
    EXPECT_EQ(back.session_id, s.session_id);
    EXPECT_EQ(back.kv.bytes, s.kv.bytes);
    b.write_kv(0, back.kv);
    for (int pos = static_cast<int>(prompt.size()); pos < static_cast<int>(prompt.size()) + steps; ++pos) {
        const int32_t t = 300 + pos;
        a.forward(&t, 1, pos, LogitsMode::Last, la.data());
        b.forward(&t, 1, pos, LogitsMode::Last, lb.data());
        EXPECT_EQ(la, lb) << (kv == KvType::Int8 ? "int8" : "fp16") << " pos " << pos;
    }
}

}  // namespace jllm::test
