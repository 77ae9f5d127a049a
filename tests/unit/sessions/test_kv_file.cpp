// tests/unit/sessions/test_kv_file.cpp — session KV files (persistence/kv_file.h) and the KV
// folder (persistence/kv_store.h): a snapshot through a file continues bit for bit; every mutated
// byte and every truncation is refused or loads identical; foreign files are left alone; the
// folder's LRU survives restarts; interrupted writes are cleaned up.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <thread>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/rope.h"
#include "core/fp16.h"
#include "core/error.h"
#include "persistence/kv_file.h"
#include "persistence/kv_store.h"
#include "test_paths.h"
#include "session_checks.h"
#include "tiny_qwen3.h"

namespace jllm {
namespace {

using test::tiny_qwen3;
using test::TinyQwen3;

std::string fresh_dir(const std::string& name) {
    const std::string d = std::string(JLLM_BINARY_DIR) + "/kvfile_" + name;
    (void)std::system(("rm -rf '" + d + "'").c_str());
    return d;
}

// A snapshot of `n` tokens for a small made-up shape, its bytes from `seed`.
KvSnapshot made_up(const KvShape& shape, const std::string& key, int n, uint32_t seed) {
    KvSnapshot s;
    s.key = key;
    s.tokens.resize(static_cast<size_t>(n));
    std::mt19937 rng(seed);
    for (int32_t& t : s.tokens) t = static_cast<int32_t>(rng() % 1000);
    s.kv.type = shape.type;
    s.kv.n_pos = n;
    const size_t row = shape.n_head_kv * shape.head_dim * (shape.type == KvType::Int8 ? 1 : 2);
    const size_t scale = shape.type == KvType::Int8 ? shape.n_head_kv * 2 : 0;
    s.kv.bytes.resize(2 * static_cast<size_t>(n) * (row + scale) * shape.n_layer);
    for (uint8_t& b : s.kv.bytes) b = static_cast<uint8_t>(rng());
    return s;
}

KvShape small_shape() {
    KvShape s;
    s.fingerprint = 0x1234567890abcdefull;
    s.type = KvType::Int8;
    s.n_layer = 2;
    s.n_head_kv = 1;
    s.head_dim = 8;
    return s;
}

bool same(const KvSnapshot& a, const KvSnapshot& b) {
    return a.key == b.key && a.session_id == b.session_id && a.tokens == b.tokens && a.kv.type == b.kv.type &&
           a.kv.n_pos == b.kv.n_pos && a.kv.bytes == b.kv.bytes;
}

// read_kv -> file -> write_kv into a fresh backend: the next tokens' logits are bit-identical.
TEST(KvFile, RoundTripThroughAFileContinuesBitIdentical) {
    const TinyQwen3 m = tiny_qwen3("kvfile_tiny_qwen3_q8_0.gguf", 7);
    const std::string dir = fresh_dir("roundtrip");
    ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
    for (KvType kv : {KvType::Int8, KvType::Fp16}) {
        auto a = create_cpu_backend(m.c, CpuOptions{2});
        auto b = create_cpu_backend(m.c, CpuOptions{2});
        for (auto* be : {a.get(), b.get()}) {
            be->bind_weights(m.w, WeightPlacement::Auto);
            be->allocate(64, 16, kv);
        }
        const std::vector<int32_t> prompt = {2, 40, 900, 31, 7, 11, 5000, 123, 77};
        test::expect_file_round_trip(*a, *b, m, kv, prompt, dir + (kv == KvType::Int8 ? "/int8.jkv" : "/fp16.jkv"), 4);
        // A slice of the blob is what read_kv gives for that range.
        KvBlob all, part;
        a->read_kv(0, 9, all);
        a->read_kv(3, 4, part);
        EXPECT_EQ(kv_blob_slice(all, m.c, 3, 7).bytes, part.bytes);
    }
}

// Every byte of a small file changed (two ways) and every truncation: refused, or identical.
TEST(KvFile, EveryMutatedByteAndEveryTruncationIsRefusedOrIdentical) {
    const KvShape shape = small_shape();
    KvSnapshot s = made_up(shape, "s:mutate", 5, 3);
    s.session_id = "mutate";
    const std::vector<uint8_t> file = encode_kv_file(s, shape);
    ASSERT_GT(file.size(), 100u);
    KvSnapshot out;
    std::string why;
    ASSERT_EQ(decode_kv_file(file.data(), file.size(), shape, out, why), KvFileError::None) << why;
    ASSERT_TRUE(same(s, out));
    int refused = 0, identical = 0;
    for (size_t i = 0; i < file.size(); ++i) {
        for (uint8_t x : {uint8_t{0x01}, uint8_t{0xFF}}) {
            std::vector<uint8_t> bad = file;
            bad[i] ^= x;
            KvSnapshot got;
            const KvFileError e = decode_kv_file(bad.data(), bad.size(), shape, got, why);
            if (e == KvFileError::None) {
                EXPECT_TRUE(same(s, got)) << "byte " << i << " ^ " << int(x) << " loaded different data";
                identical++;
            } else {
                refused++;
            }
        }
    }
    EXPECT_EQ(refused, static_cast<int>(2 * file.size()));  // every field and body byte is covered
    for (size_t n = 0; n < file.size(); ++n) {
        KvSnapshot got;
        EXPECT_NE(decode_kv_file(file.data(), n, shape, got, why), KvFileError::None) << "truncated at " << n;
    }
    std::vector<uint8_t> longer = file;
    longer.push_back(0);
    KvSnapshot got;
    EXPECT_EQ(decode_kv_file(longer.data(), longer.size(), shape, got, why), KvFileError::Corrupt);
    (void)identical;
}

TEST(KvFile, OtherModelKvTypeOrShapeIsForeign) {
    const KvShape shape = small_shape();
    const KvSnapshot s = made_up(shape, "p:1", 3, 1);
    const std::vector<uint8_t> file = encode_kv_file(s, shape);
    KvShape other = shape;
    other.fingerprint ^= 1;
    KvSnapshot out;
    std::string why;
    EXPECT_EQ(decode_kv_file(file.data(), file.size(), other, out, why), KvFileError::Foreign);
    EXPECT_NE(why.find("another model"), std::string::npos) << why;
    other = shape;
    other.type = KvType::Fp16;
    EXPECT_EQ(decode_kv_file(file.data(), file.size(), other, out, why), KvFileError::Foreign);
    EXPECT_NE(why.find("KV type"), std::string::npos) << why;
    other = shape;
    other.head_dim = 16;
    EXPECT_EQ(decode_kv_file(file.data(), file.size(), other, out, why), KvFileError::Foreign);
}

// A version-2 file (an older build's: INT8 keys unrotated) is refused, its version named.
TEST(KvFile, AnOlderFormatVersionIsRefusedByName) {
    const KvShape shape = small_shape();
    std::vector<uint8_t> file = encode_kv_file(made_up(shape, "p:1", 3, 1), shape);
    ASSERT_EQ(file[8], 3) << "the version field (little-endian u32 after the magic)";
    file[8] = 2;
    KvSnapshot out;
    std::string why;
    EXPECT_EQ(decode_kv_file(file.data(), file.size(), shape, out, why), KvFileError::Corrupt);
    EXPECT_NE(why.find("format version 2 (this build reads 3)"), std::string::npos) << why;
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& b) {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

bool exists(const std::string& p) { return ::access(p.c_str(), F_OK) == 0; }

TEST(KvDiskStore, StartRemovesTempsDeletesCorruptAndKeepsForeignFiles) {
    const KvShape shape = small_shape();
    const std::string dir = fresh_dir("scan");
    KvSnapshot a = made_up(shape, "s:a", 4, 1), b = made_up(shape, "s:b", 6, 2), c = made_up(shape, "s:c", 5, 3);
    a.session_id = "a";
    std::string foreign_path, corrupt_path, temp_path;
    {
        KvDiskStore st(dir, 1 << 20, shape);
        st.save(std::make_shared<KvSnapshot>(a));
        st.save(std::make_shared<KvSnapshot>(b));
        st.save(std::make_shared<KvSnapshot>(c));
        st.flush();
        EXPECT_EQ(st.counters().files, 3);
        corrupt_path = st.path_for("s:b");
        foreign_path = dir + "/0000000000000000.jkv";
        temp_path = st.path_for("s:c") + ".999.tmp";
    }
    KvShape other = shape;
    other.fingerprint = 99;
    write_bytes(foreign_path, encode_kv_file(made_up(other, "x", 2, 4), other));
    std::vector<uint8_t> bad = encode_kv_file(b, shape);
    bad[bad.size() / 2] ^= 0x40;  // a body byte: found at load, not at the scan
    write_bytes(corrupt_path, bad);
    write_bytes(temp_path, {1, 2, 3});
    std::vector<uint8_t> short_header = encode_kv_file(c, shape);
    short_header.resize(30);
    const std::string trunc_path = dir + "/1111111111111111.jkv";
    write_bytes(trunc_path, short_header);

    KvDiskStore st(dir, 1 << 20, shape);
    EXPECT_FALSE(exists(temp_path));
    EXPECT_FALSE(exists(trunc_path));  // a header that cannot be read: deleted at the start
    EXPECT_TRUE(exists(foreign_path));  // another model's: left for its owner, not indexed
    EXPECT_EQ(st.counters().files, 3);
    std::string why;
    auto got = st.load("s:a", why);
    ASSERT_TRUE(got) << why;
    EXPECT_TRUE(same(a, *got));
    EXPECT_FALSE(st.load("s:b", why));  // the body checksum fails: refused, deleted
    EXPECT_NE(why.find("checksum"), std::string::npos) << why;
    EXPECT_FALSE(exists(corrupt_path));
    EXPECT_FALSE(st.has("s:b"));
    EXPECT_EQ(st.counters().rejected, 2u);
    // Prefix matches: the longest first.
    std::vector<int32_t> prompt = a.tokens;
    prompt.push_back(5);
    const auto m = st.matches(prompt, 0);
    ASSERT_FALSE(m.empty());
    EXPECT_EQ(m[0].key, "s:a");
    EXPECT_EQ(m[0].common, a.tokens.size());
    EXPECT_EQ(m[0].session_id, "a");
}

TEST(KvDiskStore, EvictsTheLeastRecentlyUsedByBytesAcrossRestarts) {
    const KvShape shape = small_shape();
    const std::string dir = fresh_dir("lru");
    const KvSnapshot a = made_up(shape, "s:a", 8, 1), b = made_up(shape, "s:b", 8, 2), c = made_up(shape, "s:c", 8, 3);
    const int64_t one = static_cast<int64_t>(encode_kv_file(a, shape).size());
    {
        KvDiskStore st(dir, 2 * one + one / 2, shape);  // room for two
        st.save(std::make_shared<KvSnapshot>(a));
        st.flush();
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        st.save(std::make_shared<KvSnapshot>(b));
        st.flush();
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        std::string why;
        ASSERT_TRUE(st.load("s:a", why)) << why;  // a is now the most recent
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    {
        KvDiskStore st(dir, 2 * one + one / 2, shape);  // the order came back from the files
        EXPECT_TRUE(st.has("s:a"));
        EXPECT_TRUE(st.has("s:b"));
        st.save(std::make_shared<KvSnapshot>(c));
        st.flush();
        EXPECT_TRUE(st.has("s:a"));
        EXPECT_FALSE(st.has("s:b"));  // the least recently used went
        EXPECT_TRUE(st.has("s:c"));
        EXPECT_EQ(st.counters().evicted, 1u);
        EXPECT_LE(st.counters().bytes, 2 * one + one / 2);
        // A store smaller than one file keeps nothing rather than everything.
    }
    KvDiskStore tiny(dir, one / 2, shape);
    EXPECT_EQ(tiny.counters().files, 0);
}

TEST(KvDiskStore, AQueuedWriteIsWhatALoadReturns) {
    const KvShape shape = small_shape();
    const std::string dir = fresh_dir("queued");
    KvDiskStore st(dir, 1 << 20, shape);
    KvSnapshot a1 = made_up(shape, "s:a", 4, 1);
    st.save(std::make_shared<KvSnapshot>(a1));
    st.flush();
    KvSnapshot a2 = made_up(shape, "s:a", 6, 9);
    st.save(std::make_shared<KvSnapshot>(a2));
    std::string why;
    auto got = st.load("s:a", why);  // queued or written: the newer one either way
    ASSERT_TRUE(got) << why;
    EXPECT_TRUE(same(a2, *got));
    st.remove("s:a");
    st.flush();
    EXPECT_FALSE(st.has("s:a"));
    EXPECT_FALSE(exists(st.path_for("s:a")));
}

TEST(KvDiskStore, AFolderThatCannotBeCreatedIsAnError) {
    EXPECT_THROW(KvDiskStore("/proc/definitely/not/here", 1 << 20, small_shape()), JllmError);
}

}  // namespace
}  // namespace jllm

namespace jllm {
namespace {

// kv_blob_shift: layer 0's K depends on the token alone, so the K of a prompt moved by d positions
// equals the K the model computes for the same tokens d positions later (to the INT8 step or the
// fp16 rounding); V is unchanged.
TEST(KvBlobShift, MovedKEqualsKComputedAtTheNewPositions) {
    const TinyQwen3 m = tiny_qwen3("kvshift_tiny_qwen3_q8_0.gguf", 5);
    const std::vector<float> inv = rope_inv_freq(m.c, nullptr);
    for (KvType kv : {KvType::Int8, KvType::Fp16}) {
        auto a = create_cpu_backend(m.c, CpuOptions{2});
        auto b = create_cpu_backend(m.c, CpuOptions{2});
        for (auto* be : {a.get(), b.get()}) {
            be->bind_weights(m.w, WeightPlacement::Auto);
            be->allocate(64, 32, kv);
        }
        const std::vector<int32_t> x = {40, 900, 31, 7, 11, 5000, 123, 77};
        const int d = 13;
        std::vector<int32_t> shifted(static_cast<size_t>(d), 2);
        shifted.insert(shifted.end(), x.begin(), x.end());
        a->forward(x.data(), static_cast<int>(x.size()), 0, LogitsMode::None, nullptr);
        b->forward(shifted.data(), static_cast<int>(shifted.size()), 0, LogitsMode::None, nullptr);
        KvBlob moved, ref;
        a->read_kv(0, static_cast<int>(x.size()), moved);
        const KvBlob before = moved;
        b->read_kv(d, static_cast<int>(x.size()), ref);
        kv_blob_shift(moved, m.c, inv.data(), d);
        const KvRowBytes rb = kv_row_bytes(m.c, kv);
        const size_t n = x.size(), hd = static_cast<size_t>(m.c.head_dim), heads = n * static_cast<size_t>(m.c.n_head_kv);
        double worst = 0;
        for (size_t h = 0; h < heads; ++h) {
            for (size_t i = 0; i < hd; ++i) {
                float got, want, step;
                if (kv == KvType::Int8) {
                    const auto* sm = reinterpret_cast<const Half*>(moved.bytes.data() + n * rb.row);
                    const auto* sr = reinterpret_cast<const Half*>(ref.bytes.data() + n * rb.row);
                    got = to_f32(sm[h]) * static_cast<float>(reinterpret_cast<const int8_t*>(moved.bytes.data())[h * hd + i]);
                    want = to_f32(sr[h]) * static_cast<float>(reinterpret_cast<const int8_t*>(ref.bytes.data())[h * hd + i]);
                    step = std::max(to_f32(sm[h]), to_f32(sr[h]));
                } else {
                    got = to_f32(reinterpret_cast<const Half*>(moved.bytes.data())[h * hd + i]);
                    want = to_f32(reinterpret_cast<const Half*>(ref.bytes.data())[h * hd + i]);
                    step = std::fabs(want) * 2e-3f + 1e-4f;
                }
                worst = std::max(worst, static_cast<double>(std::fabs(got - want) / step));
            }
        }
        EXPECT_LE(worst, 2.0) << (kv == KvType::Int8 ? "int8" : "fp16") << ": layer 0 K off by more than two steps";
        // Layer 0's V (after its K part) is untouched by the move.
        const size_t v_at = n * (rb.row + rb.scale_row);
        EXPECT_TRUE(std::equal(before.bytes.begin() + v_at, before.bytes.begin() + 2 * v_at, moved.bytes.begin() + v_at));
    }
}

}  // namespace
}  // namespace jllm

namespace jllm {
namespace {

// A body of several checksummed chunks, read on several threads: intact it loads identical; a
// changed byte in any chunk, or in the checksum table, is refused.
TEST(KvFile, AMultiChunkBodyIsCheckedChunkByChunk) {
    const KvShape shape = small_shape();
    const KvSnapshot s = made_up(shape, "s:big", 300000, 8);  // 12 MB: three chunks
    const std::vector<uint8_t> file = encode_kv_file(s, shape);
    const std::string dir = fresh_dir("chunks");
    ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
    const std::string path = dir + "/big.jkv";
    write_bytes(path, file);
    KvSnapshot got;
    std::string why;
    ASSERT_EQ(read_kv_file(path, shape, got, why), KvFileError::None) << why;
    EXPECT_TRUE(same(s, got));
    for (size_t at : {file.size() / 2, file.size() - 30 * 8, file.size() - 9, file.size() - 1}) {
        std::vector<uint8_t> bad = file;
        bad[at] ^= 0x10;
        write_bytes(path, bad);
        KvSnapshot b;
        EXPECT_EQ(read_kv_file(path, shape, b, why), KvFileError::Corrupt) << "byte " << at;
        EXPECT_EQ(decode_kv_file(bad.data(), bad.size(), shape, b, why), KvFileError::Corrupt) << "byte " << at;
    }
}

}  // namespace
}  // namespace jllm
