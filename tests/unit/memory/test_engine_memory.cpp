// tests/unit/memory/test_engine_memory.cpp — the memory model through the Engine on a tiny
// model: the context chosen or refused at load from fixture meminfo files, no heap allocation
// across 64 decode steps, the OOM guard tripping mid-generation, and the thermal policy.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <thread>

#include "alloc_counter.h"
#include "gguf/gguf.h"
#include "jetson/thermal_guard.h"
#include "jllm_engine.h"
#include "memory/oom_guard.h"
#include "test_paths.h"
#include "tiny_model.h"
#include "tokenizer/tokenizer.h"

namespace jllm {
namespace {

std::string fixture(const std::string& name) { return test::data_dir() + "/sysfs/" + name; }

EngineConfig tiny_config(const std::string& root) {
    EngineConfig c;
    c.model_path = test::tiny_model_path();
    c.device = DeviceKind::Cpu;
    c.n_threads = 2;
    c.sysfs_root = root;
    return c;
}

// Greedy, with every end-of-generation token banned so the loop runs to max_tokens.
GenerateRequest long_request(int max_tokens) {
    GenerateRequest r;
    r.prompt = "hello world";
    r.max_tokens = max_tokens;
    r.sampling.temperature = 0.0f;
    r.sampling.repeat_penalty = 1.0f;
    auto f = GgufFile::open(test::tiny_model_path());
    auto tok = Tokenizer::from_gguf(*f);
    for (int32_t id = 0; id < tok->n_vocab(); ++id) {
        if (tok->is_eog(id)) r.sampling.logit_bias.emplace_back(id, -1e30f);
    }
    return r;
}

std::string temp_root(const std::string& tag) {
    const std::string dir = std::string(JLLM_BINARY_DIR) + "/test_memory_roots/" + tag;
    const std::string cmd = "rm -rf '" + dir + "' && mkdir -p '" + dir + "' && cp -r '" +
                            fixture("orin_nano_super_r36") + "/.' '" + dir + "/'";
    EXPECT_EQ(std::system(cmd.c_str()), 0);
    return dir;
}

void replace_file(const std::string& path, const std::string& data) {
    std::ofstream(path + ".tmp", std::ios::binary) << data;
    std::rename((path + ".tmp").c_str(), path.c_str());
}

TEST(EngineMemory, LoadOnTheOrinFixtureTakesTheModelContextAndReportsTheBudget) {
    Engine e;
    Status st = e.load(tiny_config(fixture("orin_nano_super_r36")));
    ASSERT_TRUE(st.ok) << st.message;
    EXPECT_EQ(e.model_info().n_ctx, 512);  // the tiny model's context_length
    const MemoryReport r = e.memory_report();
    EXPECT_TRUE(r.known);
    EXPECT_EQ(r.total, 7802008LL * 1024);
    EXPECT_EQ(r.n_ctx, 512);
    EXPECT_GT(r.kv, 0);
    EXPECT_GT(r.scratch, 0);
    EXPECT_EQ(r.margin, 256 * MIB);
    EXPECT_EQ(r.total, r.os_and_others + r.runtime + r.model + r.kv + r.scratch + r.sessions + r.margin + r.free);
    // The default session cache: half of what the pools leave, at most 1 GiB.
    EXPECT_EQ(r.sessions, std::min<int64_t>(1024 * MIB, (r.free + r.sessions) / 2));
    EXPECT_EQ(r.oom_threshold, 128 * MIB);
    EXPECT_GE(r.oom_check_interval_ms, 10.0);
    EXPECT_EQ(r.rss_peak, 412340LL * 1024);  // the fixture's /proc/self/status

    GenerateResult g = e.generate(long_request(4), nullptr);
    ASSERT_NE(g.finish, FinishReason::Error) << g.error;
    EXPECT_EQ(g.stats.peak_memory_bytes, 412340LL * 1024);
    EXPECT_FLOAT_EQ(g.stats.peak_temperature_c, 47.25f);
    EXPECT_EQ(g.stats.oom_events, 0);
    EXPECT_EQ(g.stats.thermal_events, 0);
}

TEST(EngineMemory, ContextThatDoesNotFitIsRefusedAtLoad) {
    EngineConfig c = tiny_config(fixture("mem_tight"));
    c.mem_margin_mb = 342;  // more than the 341.8 MB available
    c.n_ctx = 256;
    Engine e;
    Status st = e.load(c);
    ASSERT_FALSE(st.ok);
    EXPECT_NE(st.message.find("context 256 does not fit"), std::string::npos) << st.message;
    EXPECT_NE(st.message.find("MemAvailable is 341.8 MB"), std::string::npos) << st.message;
    EXPECT_FALSE(e.loaded());
    c.n_ctx = 0;
    st = e.load(c);
    ASSERT_FALSE(st.ok);
    EXPECT_NE(st.message.find("fits"), std::string::npos) << st.message;
}

TEST(EngineMemory, MaxMemoryCapsTheEngine) {
    EngineConfig c = tiny_config(fixture("mem_tight"));  // no proc/self/status: runtime is what we add
    c.max_memory_mb = 1;
    c.n_ctx = 512;  // its 512-token batch scratch alone is over 1 MB
    Engine e;
    Status st = e.load(c);
    ASSERT_FALSE(st.ok);
    EXPECT_NE(st.message.find("--max-memory"), std::string::npos) << st.message;
    c.n_ctx = 0;  // auto: the largest that fits under the cap
    st = e.load(c);
    ASSERT_TRUE(st.ok) << st.message;
    EXPECT_EQ(e.model_info().n_ctx, 256);
    EXPECT_LE(e.memory_report().ours(), 1 * MIB);
}

// Allocations between streamed piece 2 and piece 2+64: the loop ran >= 64 forward passes,
// samples, detokenizations and guard checks in between.
int64_t allocations_over_64_decode_steps(int n_logprobs) {
    Engine e;
    EXPECT_TRUE(e.load(tiny_config(fixture("orin_nano_super_r36"))).ok);
    std::vector<int64_t> at;  // allocation count at each streamed piece
    at.reserve(1024);
    GenerateRequest req = long_request(100);
    req.n_logprobs = n_logprobs;
    GenerateResult g = e.generate(req, [&](const Piece&) {
        at.push_back(test::allocation_count());
        return true;
    });
    EXPECT_NE(g.finish, FinishReason::Error) << g.error;
    EXPECT_EQ(g.stats.completion_tokens, 100);
    EXPECT_GE(at.size(), 70u) << "too few pieces streamed to span 64 decode steps";
    return at.size() >= 70u ? at[2 + 64] - at[2] : -1;
}

TEST(EngineMemory, NoHeapAllocationAcross64DecodeSteps) {
    if (!test::allocation_counting()) GTEST_SKIP() << "allocation counting is off under AddressSanitizer";
    EXPECT_EQ(allocations_over_64_decode_steps(-1), 0) << "the decode loop allocated";
    EXPECT_EQ(allocations_over_64_decode_steps(0), 0) << "the decode loop allocated (chosen-token logprob)";
}

TEST(EngineMemory, GuardReadsAllocateNothing) {
    if (!test::allocation_counting()) GTEST_SKIP() << "allocation counting is off under AddressSanitizer";
    ThermalGuard t;
    ThermalConfig tc;
    tc.interval_ms = 0.0;  // read every zone on every step
    t.configure(fixture("orin_nano_super_r36"), tc);
    ASSERT_TRUE(t.enabled());
    OomGuard g;
    g.configure(fixture("orin_nano_super_r36"), 128 * MIB);
    g.set_interval_ms(0.0);
    const int64_t before = test::allocation_count();
    for (int i = 0; i < 100; ++i) {
        EXPECT_EQ(t.step(), ThermalAction::None);
        EXPECT_TRUE(g.check());
    }
    EXPECT_EQ(test::allocation_count() - before, 0);
    EXPECT_EQ(g.reads(), 100);
}

TEST(EngineMemory, OomGuardEndsTheGenerationMidway) {
    const std::string root = temp_root("guard_engine");
    Engine e;
    ASSERT_TRUE(e.load(tiny_config(root)).ok);
    const double interval = e.memory_report().oom_check_interval_ms;
    const std::string low = test::read_file(fixture("mem_low") + "/proc/meminfo");
    int pieces = 0;
    GenerateResult g = e.generate(long_request(200), [&](const Piece&) {
        if (++pieces == 8) {
            replace_file(root + "/proc/meminfo", low);
            std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int64_t>((interval + 5.0) * 1000.0)));
        }
        return true;
    });
    EXPECT_EQ(g.finish, FinishReason::Length);
    EXPECT_EQ(g.stats.oom_events, 1);
    EXPECT_GE(g.stats.completion_tokens, 8);
    EXPECT_LT(g.stats.completion_tokens, 200);
}

void set_all_temps(const std::string& root, int millideg) {
    for (int i = 0; i < 7; ++i) {
        const std::string p = root + "/sys/class/thermal/thermal_zone" + std::to_string(i) + "/temp";
        if (test::read_file(p).empty()) continue;  // the disabled zone stays disabled
        replace_file(p, std::to_string(millideg) + "\n");
    }
}

TEST(EngineThermal, HotBoardPacesDecode) {
    const std::string root = temp_root("thermal_pace");
    set_all_temps(root, 90000);  // above the 85 C pace temperature, below the 104.5 C critical trip
    Engine e;
    EngineConfig c = tiny_config(root);
    ASSERT_TRUE(e.load(c).ok);
    GenerateResult g = e.generate(long_request(5), nullptr);
    EXPECT_EQ(g.finish, FinishReason::Length);
    EXPECT_EQ(g.stats.completion_tokens, 5);
    EXPECT_EQ(g.stats.thermal_events, 5);
    EXPECT_FLOAT_EQ(g.stats.peak_temperature_c, 90.0f);
    // 5 pauses of 10 + 90 * (90 - 85) / (104.5 - 85) ms each.
    EXPECT_GE(g.stats.decode_ms, 5 * (10.0 + 90.0 * 5.0 / 19.5) * 0.9);
}

TEST(EngineThermal, AboveTheCriticalTripGenerationStopsCleanly) {
    const std::string root = temp_root("thermal_stop");
    set_all_temps(root, 106000);
    Engine e;
    ASSERT_TRUE(e.load(tiny_config(root)).ok);
    GenerateResult g = e.generate(long_request(50), nullptr);
    EXPECT_EQ(g.finish, FinishReason::Length);
    EXPECT_EQ(g.stats.completion_tokens, 0);
    EXPECT_EQ(g.stats.thermal_events, 1);
    EXPECT_FLOAT_EQ(g.stats.peak_temperature_c, 106.0f);
}

}  // namespace
}  // namespace jllm
