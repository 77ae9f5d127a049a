// tests/unit/gguf/test_gguf_reader.cpp — the GGUF reader on valid files (writer round trip, the
// shared vocab files, SmolLM2) and on a corpus of deliberately broken files: each must fail
// with one JllmError naming what is wrong, never crash or allocate wildly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "test_paths.h"

using namespace jllm;

namespace {

// Byte builder for hand-made headers.
struct Bytes {
    std::vector<uint8_t> b;
    template <typename T>
    Bytes& put(T v) {
        const size_t at = b.size();
        b.resize(at + sizeof(T));
        std::memcpy(b.data() + at, &v, sizeof(T));
        return *this;
    }
    Bytes& str(const std::string& s) {
        put<uint64_t>(s.size());
        b.insert(b.end(), s.begin(), s.end());
        return *this;
    }
    Bytes& header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
        b.insert(b.end(), {'G', 'G', 'U', 'F'});
        put<uint32_t>(version);
        put<uint64_t>(n_tensors);
        put<uint64_t>(n_kv);
        return *this;
    }
    Bytes& pad_to(size_t alignment) {
        while (b.size() % alignment) b.push_back(0);
        return *this;
    }
};

std::string parse_error(const std::vector<uint8_t>& bytes) {
    try {
        GgufFile::from_memory(bytes.data(), bytes.size(), "t.gguf");
    } catch (const JllmError& e) {
        return e.what();
    }
    return "";
}

#define EXPECT_PARSE_ERROR(bytes, needle)                                         \
    do {                                                                          \
        const std::string err_ = parse_error(bytes);                              \
        EXPECT_NE(err_, "") << "expected a parse error";                          \
        EXPECT_NE(err_.find(needle), std::string::npos) << "message: " << err_;   \
    } while (0)

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
    std::vector<uint8_t> b(v.size() * 4);
    std::memcpy(b.data(), v.data(), b.size());
    return b;
}

GgufWriter sample_writer() {
    GgufWriter w;
    w.set_string("general.architecture", "llama");
    w.set_u8("t.u8", 200);
    w.set_i8("t.i8", -100);
    w.set_u16("t.u16", 60000);
    w.set_i16("t.i16", -30000);
    w.set_u32("t.u32", 4000000000u);
    w.set_i32("t.i32", -2000000000);
    w.set_u64("t.u64", 1ull << 40);
    w.set_i64("t.i64", -(1ll << 40));
    w.set_f32("t.f32", 1.5f);
    w.set_f64("t.f64", -2.25);
    w.set_bool("t.bool", true);
    w.set_string("t.str", "h\xc3\xa9llo");
    w.set_array_string("t.astr", {"a", "", "ccc"});
    w.set_array_i32("t.ai32", {1, -2, 3});
    w.set_array_u32("t.au32", {7, 8});
    w.set_array_f32("t.af32", {0.5f, -1.0f});
    w.add_tensor("a", GgmlType::F32, {3}, f32_bytes({1, 2, 3}));
    w.add_tensor("b", GgmlType::F32, {2, 2}, f32_bytes({4, 5, 6, 7}));
    return w;
}

}  // namespace

TEST(GgufReader, WriterRoundTripAllTypes) {
    const std::vector<uint8_t> bytes = sample_writer().write_to_memory();
    auto f = GgufFile::from_memory(bytes.data(), bytes.size());
    EXPECT_EQ(f->version(), 3u);
    EXPECT_EQ(f->alignment(), 32u);
    EXPECT_EQ(*f->get_uint("t.u8"), 200u);
    EXPECT_EQ(*f->get_int("t.i8"), -100);
    EXPECT_EQ(*f->get_uint("t.u16"), 60000u);
    EXPECT_EQ(*f->get_int("t.i16"), -30000);
    EXPECT_EQ(*f->get_uint("t.u32"), 4000000000u);
    EXPECT_EQ(*f->get_int("t.i32"), -2000000000);
    EXPECT_EQ(*f->get_uint("t.u64"), 1ull << 40);
    EXPECT_EQ(*f->get_int("t.i64"), -(1ll << 40));
    EXPECT_EQ(*f->get_float("t.f32"), 1.5);
    EXPECT_EQ(*f->get_float("t.f64"), -2.25);
    EXPECT_EQ(*f->get_bool("t.bool"), true);
    EXPECT_EQ(*f->get_string("t.str"), "h\xc3\xa9llo");
    const GgufArray* as = f->get_array("t.astr");
    ASSERT_NE(as, nullptr);
    ASSERT_EQ(as->strings.size(), 3u);
    EXPECT_EQ(as->strings[2], "ccc");
    EXPECT_EQ(as->strings[1], "");
    const GgufArray* ai = f->get_array("t.ai32");
    ASSERT_NE(ai, nullptr);
    EXPECT_EQ(ai->get_int(1), -2);
    EXPECT_EQ(f->get_array("t.af32")->get_float(1), -1.0);
    EXPECT_FALSE(f->get_uint("absent").has_value());
    EXPECT_THROW(f->get_string("t.u8"), JllmError);   // wrong type names the key
    EXPECT_THROW(f->get_uint("t.i8"), JllmError);     // negative into unsigned
    ASSERT_EQ(f->tensors().size(), 2u);
    const GgufTensorInfo* b = f->find_tensor("b");
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(b->n_dims, 2u);
    EXPECT_EQ(b->ne[0], 2);
    EXPECT_EQ(b->ne[1], 2);
    EXPECT_EQ(b->nbytes, 16u);
    EXPECT_EQ(b->file_offset % 32, 0u);
    float v[4];
    std::memcpy(v, b->data, 16);
    EXPECT_EQ(v[3], 7.0f);
}

TEST(GgufReader, FloatArraysReadAsIntegersSaturate) {
    GgufWriter w;
    w.set_array_f32("f", {1e30f, -1e30f, std::nanf(""), 3.7f});
    const std::vector<uint8_t> bytes = w.write_to_memory();
    auto f = GgufFile::from_memory(bytes.data(), bytes.size());
    const GgufArray* a = f->get_array("f");
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->get_int(0), INT64_MAX);
    EXPECT_EQ(a->get_int(1), INT64_MIN);
    EXPECT_EQ(a->get_int(2), 0);
    EXPECT_EQ(a->get_int(3), 3);
}

TEST(GgufReader, CustomAlignmentAndFileWrite) {
    GgufWriter w = sample_writer();
    w.set_alignment(64);
    const std::string path = std::string(JLLM_BINARY_DIR) + "/test_align64.gguf";
    w.write_file(path);
    auto f = GgufFile::open(path);
    EXPECT_EQ(f->alignment(), 64u);
    EXPECT_EQ(f->data_offset() % 64, 0u);
    for (const GgufTensorInfo& t : f->tensors()) EXPECT_EQ(t.file_offset % 64, 0u);
    float v[3];
    std::memcpy(v, f->find_tensor("a")->data, 12);
    EXPECT_EQ(v[2], 3.0f);
    EXPECT_THROW(w.set_alignment(3), JllmError);
}

// RssFile of this process (kB), -1 where /proc/self/status has no such line.
int64_t rss_file_kb() {
    std::FILE* f = std::fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    int64_t kb = -1;
    while (std::fgets(line, sizeof line, f)) {
        long long v = 0;
        if (std::sscanf(line, "RssFile: %lld kB", &v) == 1) kb = v;
    }
    std::fclose(f);
    return kb;
}

// A backend that copies the weights drops the file's pages behind it (MmapFile::drop_pages): the
// process stops holding them, and a later read gets the same bytes back from the file.
TEST(GgufReader, DroppedPagesLeaveTheProcessAndReadBackTheSame) {
    const int64_t n = 8 << 20;  // 32 MiB of F32
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i % 1000003) * 0.5f;
    std::vector<uint8_t> bytes(v.size() * 4);
    std::memcpy(bytes.data(), v.data(), bytes.size());
    GgufWriter w;
    w.set_string("general.architecture", "llama");
    w.add_tensor("big", GgmlType::F32, {n}, bytes);
    const std::string path = std::string(JLLM_BINARY_DIR) + "/test_drop_pages.gguf";
    w.write_file(path);
    auto f = GgufFile::open(path);
    ASSERT_NE(f->mapping(), nullptr);
    EXPECT_EQ(GgufFile::from_memory(f->base(), f->file_size())->mapping(), nullptr);  // a caller's buffer
    const GgufTensorInfo* t = f->find_tensor("big");
    ASSERT_NE(t, nullptr);
    auto sum = [&] {
        uint64_t s = 0;
        for (uint64_t i = 0; i < t->nbytes; i += 64) s = s * 31 + t->data[i] + t->data[i + 63];
        return s;
    };
    const uint64_t first = sum();
    const int64_t held = rss_file_kb();
    if (held < 0) GTEST_SKIP() << "no RssFile in /proc/self/status";
    const size_t dropped = f->mapping()->drop_pages(t->data, t->nbytes);
    EXPECT_GE(dropped, t->nbytes - 2 * 65536);  // all but the partial pages at the ends
    EXPECT_LE(dropped, t->nbytes);
    EXPECT_LT(rss_file_kb(), held - static_cast<int64_t>(dropped / 1024) + 4096);
    EXPECT_EQ(sum(), first);
    EXPECT_EQ(std::memcmp(t->data, bytes.data(), bytes.size()), 0);
    EXPECT_EQ(f->mapping()->drop_pages(t->data, 100), 0u);  // no whole page inside
    std::remove(path.c_str());
}

TEST(GgufReader, WriterRejectsBadTensors) {
    GgufWriter w;
    EXPECT_THROW(w.add_tensor("x", GgmlType::F32, {3}, f32_bytes({1, 2})), JllmError);
    EXPECT_THROW(w.add_tensor("x", GgmlType::Q8_0, {31}, std::vector<uint8_t>(34)), JllmError);
    w.add_tensor("x", GgmlType::F32, {1}, f32_bytes({1}));
    EXPECT_THROW(w.add_tensor("x", GgmlType::F32, {1}, f32_bytes({1})), JllmError);
}

TEST(GgufReader, SharedVocabFilesParse) {
    for (const char* name : {"gpt-2", "llama-spm", "refact", "starcoder"}) {
        const std::string path = test::shared_dir() + "/testdata/vocab/ggml-vocab-" + name + ".gguf";
        ASSERT_TRUE(test::file_exists(path)) << path;
        auto f = GgufFile::open(path);
        EXPECT_EQ(f->version(), 3u);
        EXPECT_TRUE(f->tensors().empty());
        const GgufArray* toks = f->get_array("tokenizer.ggml.tokens");
        ASSERT_NE(toks, nullptr) << name;
        EXPECT_GT(toks->count, 30000u);
        EXPECT_EQ(toks->strings.size(), toks->count);
    }
}

TEST(GgufReader, SmolLM2Parses) {
    const std::string path = test::smollm2_path();
    if (!test::file_exists(path)) {
        if (std::getenv("JLLM_REQUIRE_MODELS")) FAIL() << "model missing: " << path;
        GTEST_SKIP() << "model not downloaded: " << path;
    }
    auto f = GgufFile::open(path);
    EXPECT_EQ(f->tensors().size(), 272u);
    EXPECT_EQ(*f->get_string("general.architecture"), "llama");
    const GgufTensorInfo* emb = f->find_tensor("token_embd.weight");
    ASSERT_NE(emb, nullptr);
    EXPECT_EQ(emb->type, GgmlType::Q8_0);
    EXPECT_EQ(emb->ne[0], 576);
    EXPECT_EQ(emb->ne[1], 49152);
    EXPECT_EQ(emb->nbytes, 576u / 32 * 34 * 49152);
}

// ---- broken files ----

TEST(GgufBroken, TruncatedAtEveryByte) {
    const std::vector<uint8_t> full = sample_writer().write_to_memory();
    // Everything up to the end of the last tensor's bytes is needed (trailing padding is not).
    auto ok = GgufFile::from_memory(full.data(), full.size());
    uint64_t needed = 0;
    for (const GgufTensorInfo& t : ok->tensors()) needed = std::max<uint64_t>(needed, t.file_offset + t.nbytes);
    ASSERT_GT(needed, 0u);
    EXPECT_EQ(parse_error(std::vector<uint8_t>(full.begin(), full.begin() + static_cast<long>(needed))), "");
    for (size_t n = 0; n < needed; ++n) {
        std::vector<uint8_t> cut(full.begin(), full.begin() + static_cast<long>(n));
        const std::string err = parse_error(cut);
        EXPECT_NE(err, "") << "prefix of " << n << " bytes parsed";
    }
}

TEST(GgufBroken, BadMagic) {
    std::vector<uint8_t> b = sample_writer().write_to_memory();
    b[0] = 'X';
    EXPECT_PARSE_ERROR(b, "bad magic");
}

TEST(GgufBroken, BadVersions) {
    EXPECT_PARSE_ERROR(Bytes().header(1, 0, 0).b, "version 1");
    EXPECT_PARSE_ERROR(Bytes().header(4, 0, 0).b, "unsupported GGUF version 4");
    EXPECT_PARSE_ERROR(Bytes().header(0x03000000, 0, 0).b, "big-endian");
}

TEST(GgufBroken, HugeCounts) {
    EXPECT_PARSE_ERROR(Bytes().header(3, 0, ~0ull).b, "metadata count");
    EXPECT_PARSE_ERROR(Bytes().header(3, ~0ull, 0).b, "tensor count");
    EXPECT_PARSE_ERROR(Bytes().header(3, 0, 1000).b, "cannot fit");
}

TEST(GgufBroken, HugeStringLength) {
    Bytes b;
    b.header(3, 0, 1).put<uint64_t>(1ull << 62);
    b.b.resize(b.b.size() + 64);
    EXPECT_PARSE_ERROR(b.b, "key length");
    Bytes v;
    v.header(3, 0, 1).str("k").put<uint32_t>(8).put<uint64_t>(1000);
    v.b.resize(v.b.size() + 16);
    EXPECT_PARSE_ERROR(v.b, "truncated");
}

TEST(GgufBroken, HugeArrays) {
    Bytes a;
    a.header(3, 0, 1).str("k").put<uint32_t>(9).put<uint32_t>(4).put<uint64_t>(1ull << 27);
    a.b.resize(a.b.size() + 64);
    EXPECT_PARSE_ERROR(a.b, "truncated");
    Bytes s;
    s.header(3, 0, 1).str("k").put<uint32_t>(9).put<uint32_t>(8).put<uint64_t>(1ull << 27);
    s.b.resize(s.b.size() + 64);
    EXPECT_PARSE_ERROR(s.b, "cannot fit");
    Bytes o;
    o.header(3, 0, 1).str("k").put<uint32_t>(9).put<uint32_t>(4).put<uint64_t>(~0ull);
    o.b.resize(o.b.size() + 64);
    EXPECT_PARSE_ERROR(o.b, "exceeds the limit");
}

TEST(GgufBroken, UnknownAndNestedTypes) {
    Bytes t;
    t.header(3, 0, 1).str("k").put<uint32_t>(13).put<uint32_t>(0);
    EXPECT_PARSE_ERROR(t.b, "unknown value type 13");
    Bytes n;
    n.header(3, 0, 1).str("k").put<uint32_t>(9).put<uint32_t>(9).put<uint64_t>(0);
    EXPECT_PARSE_ERROR(n.b, "nested arrays");
    Bytes e;
    e.header(3, 0, 1).str("k").put<uint32_t>(9).put<uint32_t>(77).put<uint64_t>(0);
    EXPECT_PARSE_ERROR(e.b, "unknown array element type");
    Bytes bo;
    bo.header(3, 0, 1).str("k").put<uint32_t>(7).put<uint8_t>(2);
    EXPECT_PARSE_ERROR(bo.b, "bool value 2");
}

TEST(GgufBroken, DuplicateAndEmptyKeys) {
    Bytes d;
    d.header(3, 0, 2).str("k").put<uint32_t>(4).put<uint32_t>(1).str("k").put<uint32_t>(4).put<uint32_t>(2);
    EXPECT_PARSE_ERROR(d.b, "duplicate metadata key");
    Bytes e;
    e.header(3, 0, 1).str("").put<uint32_t>(4).put<uint32_t>(1);
    EXPECT_PARSE_ERROR(e.b, "empty metadata key");
}

TEST(GgufBroken, BadAlignment) {
    for (uint32_t al : {0u, 3u, 48u, 1u << 20}) {
        Bytes b;
        b.header(3, 0, 1).str("general.alignment").put<uint32_t>(4).put<uint32_t>(al);
        EXPECT_PARSE_ERROR(b.b, "general.alignment");
    }
    Bytes t;
    t.header(3, 0, 1).str("general.alignment").put<uint32_t>(10).put<uint64_t>(32);
    EXPECT_PARSE_ERROR(t.b, "expected u32");
}

namespace {
// One tensor info: name, dims, type, offset; then padding and `data_bytes` of data.
std::vector<uint8_t> one_tensor(const std::vector<uint64_t>& ne, uint32_t type, uint64_t offset, size_t data_bytes,
                                uint32_t n_dims_override = 0) {
    Bytes b;
    b.header(3, 1, 0).str("w");
    b.put<uint32_t>(n_dims_override ? n_dims_override : static_cast<uint32_t>(ne.size()));
    for (uint64_t d : ne) b.put<uint64_t>(d);
    b.put<uint32_t>(type).put<uint64_t>(offset);
    b.pad_to(32);
    b.b.resize(b.b.size() + data_bytes);
    return b.b;
}
}  // namespace

TEST(GgufBroken, TensorShapes) {
    EXPECT_EQ(parse_error(one_tensor({4, 2}, 0, 0, 32)), "");
    EXPECT_PARSE_ERROR(one_tensor({}, 0, 0, 32, 0), "n_dims 0");
    EXPECT_PARSE_ERROR(one_tensor({1, 1, 1, 1, 1}, 0, 0, 32), "n_dims 5");
    EXPECT_PARSE_ERROR(one_tensor({4, 0}, 0, 0, 32), "dimension 1 is 0");
    EXPECT_PARSE_ERROR(one_tensor({1ull << 62, 1ull << 62}, 0, 0, 32), "overflows");
    EXPECT_PARSE_ERROR(one_tensor({1ull << 62, 1}, 0, 0, 32), "overflows");  // bytes overflow
    EXPECT_PARSE_ERROR(one_tensor({4}, 99, 0, 32), "tensor type id 99");
    EXPECT_PARSE_ERROR(one_tensor({4}, 4, 0, 32), "tensor type id 4");  // removed Q4_2
    EXPECT_PARSE_ERROR(one_tensor({31}, 8, 0, 64), "not a multiple of the Q8_0 block size");
}

TEST(GgufBroken, TensorDataPlacement) {
    EXPECT_PARSE_ERROR(one_tensor({8}, 0, 0, 16), "past the end");
    EXPECT_PARSE_ERROR(one_tensor({8}, 0, 16, 64), "not a multiple of the alignment");
    EXPECT_PARSE_ERROR(one_tensor({8}, 0, 1ull << 63, 64), "past the end");
    EXPECT_PARSE_ERROR(one_tensor({8}, 0, ~0ull - 31, 64), "past the end");
}

TEST(GgufBroken, OverlappingAndDuplicateTensors) {
    Bytes o;
    o.header(3, 2, 0);
    o.str("a").put<uint32_t>(1).put<uint64_t>(16).put<uint32_t>(0).put<uint64_t>(0);
    o.str("b").put<uint32_t>(1).put<uint64_t>(16).put<uint32_t>(0).put<uint64_t>(32);
    o.pad_to(32);
    o.b.resize(o.b.size() + 128);
    EXPECT_PARSE_ERROR(o.b, "overlaps");
    Bytes d;
    d.header(3, 2, 0);
    d.str("a").put<uint32_t>(1).put<uint64_t>(8).put<uint32_t>(0).put<uint64_t>(0);
    d.str("a").put<uint32_t>(1).put<uint64_t>(8).put<uint32_t>(0).put<uint64_t>(32);
    d.pad_to(32);
    d.b.resize(d.b.size() + 64);
    EXPECT_PARSE_ERROR(d.b, "duplicate tensor name");
}

TEST(GgufBroken, ErrorsNameOffsetAndContext) {
    Bytes b;
    b.header(3, 0, 1).str("my.key").put<uint32_t>(13);
    const std::string err = parse_error(b.b);
    EXPECT_NE(err.find("t.gguf"), std::string::npos) << err;
    EXPECT_NE(err.find("at offset"), std::string::npos) << err;
    EXPECT_NE(err.find("key 'my.key'"), std::string::npos) << err;
    const std::string terr = parse_error(one_tensor({4}, 99, 0, 32));
    EXPECT_NE(terr.find("tensor 'w'"), std::string::npos) << terr;
}

// Inputs the fuzzer found or that once misbehaved live in tests/data/gguf_regressions/:
// every one must be rejected (or accepted) without crashing.
TEST(GgufBroken, RegressionCorpus) {
    const std::string dir = test::data_dir() + "/gguf_regressions";
    const std::string list = test::read_file(dir + "/LIST");
    size_t count = 0;
    size_t start = 0;
    while (start < list.size()) {
        size_t end = list.find('\n', start);
        if (end == std::string::npos) end = list.size();
        const std::string name = list.substr(start, end - start);
        start = end + 1;
        if (name.empty() || name[0] == '#') continue;
        const std::string bytes = test::read_file(dir + "/" + name);
        ASSERT_FALSE(bytes.empty()) << name;
        std::vector<uint8_t> b(bytes.begin(), bytes.end());
        (void)parse_error(b);  // must return, whatever the verdict
        try {  // and everything a parsed file offers must be readable (the fuzzer's walk)
            auto f = GgufFile::from_memory(b.data(), b.size(), name);
            for (const GgufKV& kv : f->kvs()) {
                (void)kv.value.to_string();
                const GgufArray& a = kv.value.arr;
                if (kv.value.type != GgufType::ARRAY || a.elem_type == GgufType::STRING) continue;
                for (uint64_t i = 0; i < a.count && i < 4096; ++i) {
                    (void)a.get_int(i);
                    (void)a.get_float(i);
                }
            }
        } catch (const JllmError&) {
        }
        count++;
    }
    EXPECT_GT(count, 0u);
}
