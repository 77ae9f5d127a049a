// tests/unit/sessions/test_engine_sessions.cpp — sessions through the Engine on the CPU backend
// (a synthetic tiny Qwen3): interleaved sessions prefill only their new tokens, the RAM budget
// evicts the least recently used, a restart restores from the KV folder with the same greedy
// output as no cache at all, a corrupt file is prefilled instead, and a --cache-ram that does not
// fit is refused with numbers.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "jllm_engine.h"
#include "session_checks.h"

namespace jllm {
namespace {

using namespace jllm::test;

TEST(EngineSessions, InterleavedSessionsPrefillOnlyTheirNewTokens) { check_interleaved_sessions(DeviceKind::Cpu); }

// Without session ids the longest common prefix finds the snapshot; a shared system part is
// reused by a new conversation.
TEST(EngineSessions, WithoutIdsTheLongestCommonPrefixIsFound) {
    Engine e;
    ASSERT_TRUE(e.load(config(-1)).ok);
    const std::vector<int32_t> sys = random_tokens(5, 200);
    std::vector<int32_t> a = sys, b = random_tokens(6, 150), c = sys;
    const std::vector<int32_t> ua = random_tokens(7, 10), uc = random_tokens(8, 10);
    a.insert(a.end(), ua.begin(), ua.end());
    c.insert(c.end(), uc.begin(), uc.end());
    turn(e, a, "");
    turn(e, b, "");
    const GenerateResult r = turn(e, c, "");  // shares the 200 system tokens with a's snapshot
    EXPECT_EQ(r.stats.cache_source, CacheSource::Ram);
    EXPECT_EQ(r.stats.reused_tokens, 200);
}

// A budget of about two snapshots: after A, B, C the least recently used (A) is gone.
TEST(EngineSessions, TheRamBudgetEvictsTheLeastRecentlyUsed) {
    Engine probe;
    ASSERT_TRUE(probe.load(config(-1)).ok);
    const std::vector<int32_t> big = random_tokens(1, 1500);
    turn(probe, big, "probe");
    const int64_t snap = probe.session_stats().ram_bytes;  // ~1,500 positions
    ASSERT_GT(snap, 0);
    probe.unload();
    Engine e;
    const int mb = static_cast<int>((2 * snap + snap / 2) / MIB) + 1;
    ASSERT_LT(static_cast<int64_t>(mb) * MIB, 3 * snap) << "the model's snapshot is too small for this test";
    ASSERT_TRUE(e.load(config(mb)).ok);
    std::map<std::string, std::vector<int32_t>> p;
    for (const char* id : {"A", "B", "C"}) {
        p[id] = random_tokens(id[0], 1500);
        turn(e, p[id], id);
    }
    EXPECT_EQ(e.session_stats().ram_evictions, 1u);
    EXPECT_EQ(e.session_stats().ram_entries, 2);
    for (auto& [id, tokens] : p) tokens.push_back(42);
    EXPECT_EQ(turn(e, p["B"], "B").stats.cache_source, CacheSource::Ram);
    EXPECT_EQ(turn(e, p["A"], "A").stats.cache_source, CacheSource::None);  // evicted
}

// A restart on the same KV folder: the session's next turn is restored from disk, and its text
// is what an engine without a cache writes.
TEST(EngineSessions, ARestartRestoresFromDiskWithTheSameGreedyText) {
    const std::string dir = fresh_dir("restart");
    Conversation a{"A", random_tokens(3, 400), 0};
    std::vector<int32_t> first = a.next_prompt();
    {
        Engine e;
        ASSERT_TRUE(e.load(config(-1, dir)).ok);
        turn(e, first, "A");
    }  // unload finishes the write
    const std::vector<int32_t> second = a.next_prompt();
    Engine plain;
    ASSERT_TRUE(plain.load(config(0)).ok);
    const GenerateResult ref = turn(plain, second, "");
    {
        Engine e;
        ASSERT_TRUE(e.load(config(-1, dir)).ok);
        EXPECT_EQ(e.session_stats().disk_entries, 1);
        const GenerateResult r = turn(e, second, "A");
        EXPECT_EQ(r.stats.cache_source, CacheSource::Disk);
        EXPECT_EQ(r.stats.reused_tokens, static_cast<int>(first.size()));
        EXPECT_EQ(r.text, ref.text);
        EXPECT_EQ(e.session_stats().hits_disk, 1u);
    }
    // The file of a corrupted session is ignored (and removed); the prompt is prefilled.
    {
        std::FILE* f = nullptr;
        for (int i = 0; i < 1 && !f; ++i) {
            const std::string cmd = "ls " + dir + "/*.jkv";
            std::FILE* ls = ::popen(cmd.c_str(), "r");
            char buf[512] = {0};
            ASSERT_TRUE(std::fgets(buf, sizeof buf, ls));
            ::pclose(ls);
            std::string path(buf);
            path.erase(path.find_last_not_of("\n") + 1);
            f = std::fopen(path.c_str(), "r+b");
            ASSERT_TRUE(f);
            std::fseek(f, -100, SEEK_END);
            std::fputc(0x5A ^ std::fgetc(f), f);
            std::fclose(f);
        }
        const std::vector<int32_t> third = a.next_prompt();
        const GenerateResult ref3 = turn(plain, third, "");
        Engine e;
        ASSERT_TRUE(e.load(config(-1, dir)).ok);
        const GenerateResult r = turn(e, third, "A");
        EXPECT_EQ(r.stats.cache_source, CacheSource::None);
        EXPECT_EQ(r.text, ref3.text);
        EXPECT_EQ(e.session_stats().disk_rejected, 1u);
    }
}

// The resident sequence through a named file (the server's slot save / restore).
TEST(EngineSessions, SaveAndRestoreTheSequenceThroughAFile) {
    const std::string dir = fresh_dir("slots");
    ASSERT_EQ(std::system(("mkdir -p '" + dir + "'").c_str()), 0);
    Engine e;
    ASSERT_TRUE(e.load(config(0)).ok);
    const std::vector<int32_t> p = random_tokens(9, 100);
    const GenerateResult r1 = turn(e, p, "");
    int n = 0;
    int64_t bytes = 0;
    ASSERT_TRUE(e.save_sequence(dir + "/slot.bin", &n, &bytes).ok);
    EXPECT_EQ(n, static_cast<int>(e.resident_tokens().size()));
    EXPECT_GT(bytes, 0);
    e.clear_cache();
    int n2 = 0;
    ASSERT_TRUE(e.restore_sequence(dir + "/slot.bin", &n2, &bytes).ok);
    EXPECT_EQ(n2, n);
    const GenerateResult r2 = turn(e, p, "");
    EXPECT_EQ(r2.stats.cache_source, CacheSource::Resident);
    EXPECT_EQ(r2.stats.reused_tokens, static_cast<int>(p.size()) - 1);
    EXPECT_EQ(r2.text, r1.text);
    EXPECT_FALSE(e.restore_sequence(dir + "/missing.bin", &n2, &bytes).ok);
    {
        std::ofstream f(dir + "/junk.bin");
        f << "not a snapshot, but long enough to hold a header of fifty-six bytes";
    }
    const Status bad = e.restore_sequence(dir + "/junk.bin", &n2, &bytes);
    EXPECT_FALSE(bad.ok);
    EXPECT_NE(bad.message.find("magic"), std::string::npos) << bad.message;
    EXPECT_EQ(e.resident_tokens().size(), static_cast<size_t>(n));  // a refused file changes nothing
}

// An explicit --cache-ram that leaves no room for the context is refused with the numbers.
TEST(EngineSessions, ACacheRamThatDoesNotFitIsRefusedWithNumbers) {
    EngineConfig c = config(1 << 19);  // 512 GiB
    Engine e;
    const Status st = e.load(c);
    ASSERT_FALSE(st.ok);
    EXPECT_NE(st.message.find("--cache-ram"), std::string::npos) << st.message;
    EXPECT_NE(st.message.find("MB"), std::string::npos) << st.message;
}

}  // namespace
}  // namespace jllm

namespace jllm {
namespace {

using namespace jllm::test;

// --cache-reuse: an early edit (a clock line near the top, one token longer) leaves the rest of
// the prompt reusable: its chunk is moved one position on and only the edit and the new turn
// are prefilled.
TEST(EngineSessions, CacheReuseMovesTheChunksAfterAnEarlyEdit) {
    for (int reuse : {0, 16}) {
        EngineConfig c = config(-1);
        c.cache_reuse = reuse;
        Engine e;
        ASSERT_TRUE(e.load(c).ok);
        const std::vector<int32_t> head = random_tokens(21, 20), rest = random_tokens(22, 300), user1 = random_tokens(23, 10),
                                   user2 = random_tokens(24, 10);
        auto cat = [](std::initializer_list<std::vector<int32_t>> parts) {
            std::vector<int32_t> v;
            for (const auto& p : parts) v.insert(v.end(), p.begin(), p.end());
            return v;
        };
        const std::vector<int32_t> t1 = cat({head, {5001, 5002, 5003, 5004, 5005}, rest, user1});
        const std::vector<int32_t> t2 = cat({head, {5001, 5002, 6003, 6004, 6005, 6006}, rest, user1, user2});
        turn(e, t1, "A");
        const GenerateResult r = turn(e, t2, "A");
        EXPECT_NE(r.finish, FinishReason::Error) << r.error;
        if (reuse == 0) {
            EXPECT_EQ(r.stats.reused_tokens, 22);
            EXPECT_EQ(r.stats.shifted_tokens, 0);
        } else {
            EXPECT_EQ(r.stats.shifted_tokens, 310);  // rest + user1, one position on
            EXPECT_EQ(r.stats.reused_tokens, 22 + 310);
            EXPECT_EQ(r.stats.prompt_tokens - r.stats.reused_tokens, 4 + 10);
        }
        // The sequence now in the cache continues like any other.
        std::vector<int32_t> t3 = t2;
        t3.push_back(77);
        EXPECT_EQ(turn(e, t3, "A").stats.reused_tokens, static_cast<int>(t2.size()));
    }
}

}  // namespace
}  // namespace jllm
