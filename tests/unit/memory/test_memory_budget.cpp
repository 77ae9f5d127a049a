// tests/unit/memory/test_memory_budget.cpp — /proc/meminfo parsing on fixture files, the budget
// (fits, does not fit, auto context, hard cap, the table adds up), the pools and the OOM guard.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <thread>

#include "core/error.h"
#include "core/memory_pool.h"
#include "memory/memory_budget.h"
#include "memory/oom_guard.h"
#include "test_paths.h"

namespace jllm {
namespace {

std::string fixture(const std::string& name) { return test::data_dir() + "/sysfs/" + name; }

TEST(MemInfo, ParsesTheOrinFixture) {
    const MemInfo m = read_meminfo(fixture("orin_nano_super_r36"));
    ASSERT_TRUE(m.valid());
    EXPECT_EQ(m.total, 7802008LL * 1024);
    EXPECT_EQ(m.free, 3100000LL * 1024);
    EXPECT_EQ(m.available, 5400000LL * 1024);
    EXPECT_EQ(m.cma_total, 262144LL * 1024);
    EXPECT_EQ(m.cma_free, 253952LL * 1024);
}

TEST(MemInfo, KeysNeedALineStartAndMissingKeysAreUnknown) {
    const MemInfo m = parse_meminfo("XMemTotal: 5 kB\nMemTotal: 100 kB\nMemAvailable: 40 kB\n");
    EXPECT_EQ(m.total, 100 * 1024);
    EXPECT_EQ(m.available, 40 * 1024);
    EXPECT_EQ(m.cma_total, -1);
    EXPECT_EQ(m.free, -1);
}

TEST(MemInfo, MissingRootIsUnknownNotAnError) {
    const MemInfo m = read_meminfo("/nonexistent-root-for-test");
    EXPECT_FALSE(m.valid());
    const ProcessMemory pm = read_process_memory("/nonexistent-root-for-test");
    EXPECT_EQ(pm.rss_peak, -1);
    EXPECT_EQ(read_mem_available("/nonexistent-root-for-test/proc/meminfo"), -1);
}

TEST(MemInfo, FastReadAgreesWithTheParser) {
    const std::string p = fixture("orin_nano_super_r36") + "/proc/meminfo";
    EXPECT_EQ(read_mem_available(p.c_str()), 5400000LL * 1024);
}

TEST(MemInfo, ProcessStatusFixture) {
    const ProcessMemory pm = read_process_memory(fixture("orin_nano_super_r36"));
    EXPECT_EQ(pm.rss_peak, 412340LL * 1024);
    EXPECT_EQ(pm.rss, 398000LL * 1024);
    EXPECT_EQ(pm.rss_anon, 61200LL * 1024);
}

// A model with 1 MB of KV per 256 positions and a fixed 8 MB of scratch.
int64_t kv_of(int n) { return static_cast<int64_t>(n) * 4096; }
int64_t scratch_of(int) { return 8 * MIB; }

MemoryBudget budget_on(const std::string& root, int64_t margin_mb, int64_t cap_mb, int64_t model_mb) {
    MemoryBudget b(BudgetConfig{margin_mb * MIB, cap_mb * MIB, root});
    b.sample_system();
    b.set_model(model_mb * MIB, true);
    b.set_runtime_pending(1 * MIB);
    return b;
}

TEST(MemoryBudget, FitsTakesTheLimit) {
    MemoryBudget b = budget_on(fixture("orin_nano_super_r36"), 256, 0, 2500);
    EXPECT_EQ(b.choose_context(0, 4096, kv_of, scratch_of), 4096);
    const MemoryReport r = b.report();
    EXPECT_EQ(r.n_ctx, 4096);
    EXPECT_EQ(r.kv, kv_of(4096));
    EXPECT_EQ(r.scratch, 8 * MIB);
    EXPECT_GT(r.free, 0);
    // RssAnon of the fixture process is moved from "OS and others" to runtime.
    EXPECT_EQ(r.runtime, 61200LL * 1024 + MIB);
    EXPECT_EQ(r.os_and_others, (7802008LL - 5400000LL - 61200LL) * 1024);
}

TEST(MemoryBudget, ExplicitContextThatDoesNotFitIsRefusedWithTheNumbers) {
    // mem_tight: 341.8 MB available; 256 MB margin, a 70 MB model and 1 MB runtime leave 14.8 MB.
    MemoryBudget b = budget_on(fixture("mem_tight"), 256, 0, 70);
    try {
        b.choose_context(4096, 4096, kv_of, scratch_of);
        FAIL() << "expected a refusal";
    } catch (const JllmError& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("context 4096 does not fit"), std::string::npos) << msg;
        EXPECT_NE(msg.find("needs 24.0 MB"), std::string::npos) << msg;       // 16 MB KV + 8 MB scratch
        EXPECT_NE(msg.find("MemAvailable is 341.8 MB"), std::string::npos) << msg;
        EXPECT_NE(msg.find("Hint: -c 1536 (or -c 0) fits"), std::string::npos) << msg;
    }
    // 1536 positions = 6 MB KV + 8 MB scratch = 14 MB fits in 14.8 MB.
    MemoryBudget b2 = budget_on(fixture("mem_tight"), 256, 0, 70);
    EXPECT_EQ(b2.choose_context(1536, 4096, kv_of, scratch_of), 1536);
}

TEST(MemoryBudget, AutoPicksTheLargestMultipleOf256ThatFits) {
    MemoryBudget b = budget_on(fixture("mem_tight"), 256, 0, 70);  // ~14.8 MB for pools
    const int n = b.choose_context(0, 4096, kv_of, scratch_of);
    EXPECT_EQ(n % 256, 0);
    EXPECT_LE(kv_of(n) + 8 * MIB, 341.8 * MIB - 256 * MIB - 70 * MIB - MIB);
    EXPECT_GT(kv_of(n + 256) + 8 * MIB, static_cast<int64_t>(341.8 * MIB - 256 * MIB - 70 * MIB - MIB));
    EXPECT_EQ(n, 1536);
}

TEST(MemoryBudget, NothingFitsIsRefused) {
    MemoryBudget b = budget_on(fixture("mem_tight"), 300, 0, 60);
    EXPECT_THROW(b.choose_context(0, 4096, kv_of, scratch_of), JllmError);
}

TEST(MemoryBudget, HardCapIsNeverExceeded) {
    // Plenty available, but a 3000 MB cap with a 2900 MB model leaves 100 - runtime for pools.
    for (int cap : {2960, 2990, 3000, 3100}) {
        MemoryBudget b = budget_on(fixture("orin_nano_super_r36"), 256, cap, 2900);
        try {
            b.choose_context(0, 4096, kv_of, scratch_of);
        } catch (const JllmError& e) {
            EXPECT_NE(std::string(e.what()).find("--max-memory"), std::string::npos) << e.what();
            continue;
        }
        EXPECT_LE(b.report().ours(), static_cast<int64_t>(cap) * MIB) << cap;
    }
}

TEST(MemoryBudget, TableRowsAddUp) {
    MemoryBudget b = budget_on(fixture("orin_nano_super_r36"), 256, 0, 2500);
    b.choose_context(0, 4096, kv_of, scratch_of);
    const MemoryReport r = b.report();
    EXPECT_EQ(r.total, r.os_and_others + r.runtime + r.model + r.kv + r.scratch + r.margin + r.free);
    const std::string t = r.table();
    for (const char* row : {"total", "OS and others", "CMA", "runtime", "model", "KV", "scratch", "margin", "free"}) {
        EXPECT_NE(t.find(row), std::string::npos) << row << "\n" << t;
    }
}

TEST(MemoryBudget, UnknownMeminfoStillHonoursTheCap) {
    MemoryBudget b = budget_on("/nonexistent-root-for-test", 256, 100, 50);
    const int n = b.choose_context(0, 4096, kv_of, scratch_of);
    EXPECT_LE(b.report().ours(), 100 * MIB);
    EXPECT_GT(n, 0);
    EXPECT_FALSE(b.report().known);
}

// Copied weights were allocated before the system was sampled (the engine samples after
// bind_weights): on a unified board MemAvailable no longer holds them, so they are not taken from it
// again, and the table moves them out of "OS and others" into "model".
TEST(MemoryBudget, CopiedWeightsOnAUnifiedBoardAreCountedOnce) {
    // mem_tight: 341.8 MB available after a 70 MB copy; 256 MB margin and 1 MB runtime leave 84.8 MB.
    MemoryBudget mapped = budget_on(fixture("mem_tight"), 256, 0, 70);
    MemoryBudget copied = budget_on(fixture("mem_tight"), 256, 0, 70);
    copied.set_model(70 * MIB, false);
    DeviceMemoryInfo unified;  // unified by default
    mapped.set_device(unified);
    copied.set_device(unified);
    EXPECT_EQ(mapped.choose_context(0, 1 << 20, kv_of, scratch_of), 1536);  // 14.8 MB for the pools
    const int n = copied.choose_context(0, 1 << 20, kv_of, scratch_of);
    EXPECT_LE(kv_of(n) + 8 * MIB, static_cast<int64_t>(341.8 * MIB) - 256 * MIB - MIB);
    EXPECT_GT(kv_of(n + 256) + 8 * MIB, static_cast<int64_t>(341.8 * MIB) - 256 * MIB - MIB);
    const MemoryReport rm = mapped.report(), rc = copied.report();
    EXPECT_EQ(rc.os_and_others, rm.os_and_others - 70 * MIB);
    EXPECT_EQ(rc.total, rc.os_and_others + rc.runtime + rc.model + rc.kv + rc.scratch + rc.margin + rc.free);
    EXPECT_NE(rc.table().find("weights, copied"), std::string::npos);
    try {
        MemoryBudget b = budget_on(fixture("mem_tight"), 256, 0, 70);
        b.set_model(70 * MIB, false);
        b.choose_context(1 << 20, 1 << 20, kv_of, scratch_of);
        FAIL() << "expected a refusal";
    } catch (const JllmError& e) {
        EXPECT_NE(std::string(e.what()).find("with the model's 70.0 MB copied"), std::string::npos) << e.what();
    }
}

// On a discrete device the copied weights are out of its free memory when it is sampled.
TEST(MemoryBudget, CopiedWeightsOnADiscreteDeviceAreOutOfItsFreeMemory) {
    MemoryBudget b = budget_on(fixture("orin_nano_super_r36"), 256, 0, 2500);
    b.set_model(2500 * MIB, false);
    DeviceMemoryInfo d;
    d.unified = false;
    d.total = 8192 * MIB;
    d.free = 256 * MIB + 8 * MIB + kv_of(2048);  // after the weights' copy
    b.set_device(d);
    EXPECT_EQ(b.choose_context(0, 4096, kv_of, scratch_of), 2048);
    try {
        b.choose_context(4096, 4096, kv_of, scratch_of);
        FAIL() << "expected a refusal";
    } catch (const JllmError& e) {
        EXPECT_NE(std::string(e.what()).find("free after the weights"), std::string::npos) << e.what();
    }
}

TEST(MemoryPool, OneAlignedZeroedBlockWithMarkAndRewind) {
    ScratchPool p;
    p.reserve(1000);
    EXPECT_EQ(p.capacity(), 1024u);
    uint8_t* a = static_cast<uint8_t*>(p.take(10));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
    EXPECT_EQ(a, p.base());
    const size_t m = p.mark();
    float* f = p.take_array<float>(100);
    EXPECT_EQ(reinterpret_cast<uint8_t*>(f), p.base() + 64);
    for (int i = 0; i < 100; ++i) EXPECT_EQ(f[i], 0.0f);
    p.rewind(m);
    EXPECT_EQ(p.used(), 64u);
    EXPECT_EQ(p.take(1), static_cast<void*>(f));  // the same bytes again
}

TEST(MemoryPoolDeathTest, TakingMoreThanPlannedIsAnInvariantFailure) {
    KVCachePool p;
    p.reserve(128);
    p.take(64);
    EXPECT_DEATH(p.take(65), "memory pool exhausted");
}

TEST(PoolArray, BehavesLikeTheVectorItReplaces) {
    ScratchPool p;
    p.reserve(4096);
    PoolArray<float> a;
    a.bind(p, 10);
    EXPECT_EQ(a.size(), 10u);
    a[3] = 2.5f;
    EXPECT_EQ(a.data()[3], 2.5f);
}

std::string temp_root(const std::string& tag) {
    const std::string dir = std::string(JLLM_BINARY_DIR) + "/test_memory_roots/" + tag;
    std::string cmd = "mkdir -p '" + dir + "/proc'";
    EXPECT_EQ(std::system(cmd.c_str()), 0);
    return dir;
}

void copy_file(const std::string& from, const std::string& to) {
    const std::string data = test::read_file(from);
    std::ofstream(to + ".tmp", std::ios::binary) << data;
    std::rename((to + ".tmp").c_str(), to.c_str());  // atomic: a concurrent reader sees old or new
}

TEST(OomGuard, TripsWhenMemAvailableFallsBelowTheThreshold) {
    const std::string root = temp_root("guard_unit");
    copy_file(fixture("orin_nano_super_r36") + "/proc/meminfo", root + "/proc/meminfo");
    OomGuard g;
    g.configure(root, 128 * MIB);
    g.set_interval_ms(1000.0);  // long enough that a loaded machine cannot cross it by accident
    EXPECT_TRUE(g.check());
    EXPECT_EQ(g.last_available(), 5400000LL * 1024);
    copy_file(fixture("mem_low") + "/proc/meminfo", root + "/proc/meminfo");
    EXPECT_TRUE(g.check()) << "within the interval the file is not read again";
    g.set_interval_ms(5.0);
    std::this_thread::sleep_for(std::chrono::milliseconds(8));
    EXPECT_FALSE(g.check());
    EXPECT_EQ(g.last_available(), 90000LL * 1024);
    EXPECT_EQ(g.reads(), 2);
}

TEST(OomGuard, UnreadableMeminfoNeverStopsGeneration) {
    OomGuard g;
    g.configure("/nonexistent-root-for-test", 128 * MIB);
    EXPECT_TRUE(g.check());
}

TEST(OomGuard, CalibratedIntervalKeepsTheCostBelowATenthOfAPercent) {
    OomGuard g;
    g.configure("/", 128 * MIB);
    const double us = g.calibrate();
    EXPECT_GT(us, 0.0);
    EXPECT_GE(g.interval_ms(), 10.0);
    EXPECT_LE(g.interval_ms(), 250.0);
    if (us <= 250.0) {  // beyond, the 250 ms clamp wins
        EXPECT_LE(us / 1000.0 / g.interval_ms(), 0.001 + 1e-9);
    }
    std::printf("[ measure  ] one MemAvailable read: %.1f us; check interval %.1f ms (%.4f%% of wall time)\n", us,
                g.interval_ms(), 100.0 * us / 1000.0 / g.interval_ms());
    // The per-token cost between reads: one clock read and a compare.
    const int N = 200000;
    const auto t0 = std::chrono::steady_clock::now();
    int tripped = 0;
    for (int i = 0; i < N; ++i) tripped += g.check() ? 0 : 1;
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / N;
    EXPECT_EQ(tripped, 0);
    EXPECT_LT(ns, 50000.0);  // loose: a loaded machine may preempt the loop
    std::printf("[ measure  ] check() per token: %.1f ns on average (%lld file reads in %d calls)\n", ns,
                static_cast<long long>(g.reads()), N);
}

}  // namespace
}  // namespace jllm
