// persistence/kv_file.cpp — see kv_file.h.
#include "persistence/kv_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/parallel.h"
#include "gguf/gguf.h"
#include "model/model_config.h"

namespace jllm {

namespace {

constexpr char MAGIC[8] = {'J', 'L', 'L', 'M', 'K', 'V', '\r', '\n'};
constexpr uint32_t VERSION = 3;  // 3: INT8 keys Walsh-Hadamard rotated (backend/kv_quant.h)
constexpr size_t CHUNK = 4u << 20;  // the body is checksummed per 4 MiB chunk (checked in parallel)
// magic, version, kv_type, fingerprint, n_layer, n_head_kv, head_dim, n_tokens, key_len,
// session_len, body_bytes
constexpr size_t FIXED = 8 + 4 + 4 + 8 + 4 * 6 + 8;  // 56
static_assert(FIXED == 56, "header layout");
constexpr uint32_t MAX_TEXT = 4096;         // key and session id bytes
constexpr uint32_t MAX_TOKENS = 1u << 24;

uint32_t get32(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}
uint64_t get64(const uint8_t* p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}
void put_bytes(std::vector<uint8_t>& o, const void* p, size_t n) {
    const size_t at = o.size();
    o.resize(at + n);
    if (n > 0) std::memcpy(o.data() + at, p, n);
}
void put32(std::vector<uint8_t>& o, uint32_t v) { put_bytes(o, &v, 4); }
void put64(std::vector<uint8_t>& o, uint64_t v) { put_bytes(o, &v, 8); }

// Bytes of the canonical blob of n positions for this shape (backend.h KvRowBytes).
size_t n_chunks(uint64_t body) { return static_cast<size_t>((body + CHUNK - 1) / CHUNK); }

uint64_t chunk_hash(const uint8_t* body, uint64_t body_bytes, size_t c) {
    const uint64_t at = static_cast<uint64_t>(c) * CHUNK;
    return XXH3_64bits(body + at, static_cast<size_t>(std::min<uint64_t>(CHUNK, body_bytes - at)));
}

uint64_t body_bytes_for(const KvShape& s, uint64_t n) {
    const uint64_t row = static_cast<uint64_t>(s.n_head_kv) * s.head_dim * (s.type == KvType::Int8 ? 1 : 2);
    const uint64_t scale = s.type == KvType::Int8 ? static_cast<uint64_t>(s.n_head_kv) * 2 : 0;
    return 2 * n * (row + scale) * s.n_layer;
}

std::string errno_text() { return std::strerror(errno); }

bool write_all(int fd, const uint8_t* p, size_t n) {
    while (n > 0) {
        const ssize_t w = ::write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        p += w;
        n -= static_cast<size_t>(w);
    }
    return true;
}

// Reads up to n bytes (fewer at the end of the file); false on an error.
bool read_upto(int fd, uint8_t* p, size_t n, size_t& got) {
    got = 0;
    while (got < n) {
        const ssize_t r = ::read(fd, p + got, n - got);
        if (r < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        if (r == 0) break;
        got += static_cast<size_t>(r);
    }
    return true;
}

std::string folder_of(const std::string& path) {
    const size_t slash = path.rfind('/');
    return slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
}

}  // namespace

size_t common_token_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
    const size_t n = std::min(a.size(), b.size());
    size_t i = 0;
    while (i < n && a[i] == b[i]) i++;
    return i;
}

uint64_t kv_file_size(const KvFileHeader& h) { return h.header_bytes + h.body_bytes + 8 * n_chunks(h.body_bytes); }

uint64_t model_fingerprint(const GgufFile& file) {
    return XXH3_64bits(file.base(), static_cast<size_t>(file.data_offset()));
}

KvShape kv_shape(const GgufFile& file, const ModelConfig& c, KvType type) {
    KvShape s;
    s.fingerprint = model_fingerprint(file);
    s.type = type;
    s.n_layer = static_cast<uint32_t>(c.n_layer);
    s.n_head_kv = static_cast<uint32_t>(c.n_head_kv);
    s.head_dim = static_cast<uint32_t>(c.head_dim);
    return s;
}

std::vector<uint8_t> encode_kv_file(const KvSnapshot& s, const KvShape& shape) {
    JLLM_ASSERT(s.kv.type == shape.type);
    JLLM_ASSERT(s.kv.n_pos == static_cast<int>(s.tokens.size()));
    JLLM_ASSERT(s.kv.bytes.size() == body_bytes_for(shape, s.tokens.size()));
    JLLM_ASSERT(s.key.size() <= MAX_TEXT && s.session_id.size() <= MAX_TEXT);
    std::vector<uint8_t> o;
    o.reserve(FIXED + s.key.size() + s.session_id.size() + 4 * s.tokens.size() + 8 + s.kv.bytes.size() +
              8 * n_chunks(s.kv.bytes.size()));
    put_bytes(o, MAGIC, 8);
    put32(o, VERSION);
    put32(o, shape.type == KvType::Int8 ? 0 : 1);
    put64(o, shape.fingerprint);
    put32(o, shape.n_layer);
    put32(o, shape.n_head_kv);
    put32(o, shape.head_dim);
    put32(o, static_cast<uint32_t>(s.tokens.size()));
    put32(o, static_cast<uint32_t>(s.key.size()));
    put32(o, static_cast<uint32_t>(s.session_id.size()));
    put64(o, s.kv.bytes.size());
    put_bytes(o, s.key.data(), s.key.size());
    put_bytes(o, s.session_id.data(), s.session_id.size());
    put_bytes(o, s.tokens.data(), 4 * s.tokens.size());
    put64(o, XXH3_64bits(o.data(), o.size()));
    put_bytes(o, s.kv.bytes.data(), s.kv.bytes.size());
    for (size_t c = 0; c < n_chunks(s.kv.bytes.size()); ++c) put64(o, chunk_hash(s.kv.bytes.data(), s.kv.bytes.size(), c));
    return o;
}

KvFileError decode_kv_header(const uint8_t* data, size_t size, const KvShape& expect, KvFileHeader& h,
                             std::string& why) {
    if (size >= 8 && std::memcmp(data, MAGIC, 8) != 0) {
        why = "not a KV snapshot (bad magic)";
        return KvFileError::Corrupt;
    }
    if (size < FIXED) {
        why = strfmt("truncated header (%zu bytes)", size);
        return KvFileError::Corrupt;
    }
    const uint32_t version = get32(data + 8);
    const uint32_t type = get32(data + 12);
    const uint32_t n_tokens = get32(data + 36), key_len = get32(data + 40), sess_len = get32(data + 44);
    const uint64_t body = get64(data + 48);
    if (version != VERSION) {  // an older build's snapshot (version 2: INT8 keys unrotated)
        why = strfmt("format version %u (this build reads %u)", version, VERSION);
        return KvFileError::Corrupt;
    }
    if (type > 1 || n_tokens == 0 || n_tokens > MAX_TOKENS || key_len > MAX_TEXT ||
        sess_len > MAX_TEXT) {
        why = "bad header fields";
        return KvFileError::Corrupt;
    }
    const uint64_t hdr = FIXED + key_len + sess_len + 4ull * n_tokens;
    if (size < hdr + 8) {
        why = strfmt("truncated header (%zu of %llu bytes)", size, static_cast<unsigned long long>(hdr + 8));
        return KvFileError::Corrupt;
    }
    if (XXH3_64bits(data, static_cast<size_t>(hdr)) != get64(data + hdr)) {
        why = "header checksum mismatch";
        return KvFileError::Corrupt;
    }
    h = KvFileHeader{};
    h.shape.type = type == 0 ? KvType::Int8 : KvType::Fp16;
    h.shape.fingerprint = get64(data + 16);
    h.shape.n_layer = get32(data + 24);
    h.shape.n_head_kv = get32(data + 28);
    h.shape.head_dim = get32(data + 32);
    // A checksummed header whose sizes disagree was not written by encode_kv_file.
    if (body != body_bytes_for(h.shape, n_tokens)) {
        why = "body size does not match the header's shape";
        return KvFileError::Corrupt;
    }
    const uint8_t* p = data + FIXED;
    h.key.assign(reinterpret_cast<const char*>(p), key_len);
    p += key_len;
    h.session_id.assign(reinterpret_cast<const char*>(p), sess_len);
    p += sess_len;
    h.tokens.resize(n_tokens);
    std::memcpy(h.tokens.data(), p, 4ull * n_tokens);
    h.body_bytes = body;
    h.header_bytes = hdr + 8;
    if (!(h.shape == expect)) {
        why = h.shape.fingerprint != expect.fingerprint ? "of another model"
              : h.shape.type != expect.type             ? "of another KV type"
                                                        : "of another KV shape";
        return KvFileError::Foreign;
    }
    return KvFileError::None;
}

KvFileError decode_kv_file(const uint8_t* data, size_t size, const KvShape& expect, KvSnapshot& out,
                           std::string& why) {
    KvFileHeader h;
    const KvFileError e = decode_kv_header(data, size, expect, h, why);
    if (e != KvFileError::None) return e;
    const size_t chunks = n_chunks(h.body_bytes);
    if (size != kv_file_size(h)) {
        why = strfmt("size %zu, expected %llu", size, static_cast<unsigned long long>(kv_file_size(h)));
        return KvFileError::Corrupt;
    }
    const uint8_t* body = data + h.header_bytes;
    for (size_t c = 0; c < chunks; ++c) {
        if (chunk_hash(body, h.body_bytes, c) != get64(body + h.body_bytes + 8 * c)) {
            why = "body checksum mismatch";
            return KvFileError::Corrupt;
        }
    }
    out.key = std::move(h.key);
    out.session_id = std::move(h.session_id);
    out.tokens = std::move(h.tokens);
    out.kv.type = h.shape.type;
    out.kv.n_pos = static_cast<int>(out.tokens.size());
    out.kv.bytes.assign(body, body + h.body_bytes);
    return KvFileError::None;
}

KvFileError write_kv_file(const std::string& path, const KvSnapshot& s, const KvShape& shape, std::string& why) {
    const std::vector<uint8_t> bytes = encode_kv_file(s, shape);
    const std::string tmp = path + strfmt(".%d.tmp", static_cast<int>(::getpid()));
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        why = strfmt("cannot create %s: %s", tmp.c_str(), errno_text().c_str());
        return KvFileError::Io;
    }
    const bool ok = write_all(fd, bytes.data(), bytes.size()) && ::fsync(fd) == 0;
    const std::string err = ok ? std::string() : errno_text();
    ::close(fd);
    if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
        why = strfmt("cannot write %s: %s", path.c_str(), ok ? errno_text().c_str() : err.c_str());
        ::unlink(tmp.c_str());
        return KvFileError::Io;
    }
    // The rename is durable once the folder's entry is.
    const int dfd = ::open(folder_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        (void)::fsync(dfd);
        ::close(dfd);
    }
    return KvFileError::None;
}

// The header from an open file at offset 0 (see read_kv_header).
static KvFileError read_header_fd(int fd, const KvShape& expect, KvFileHeader& h, std::string& why) {
    std::vector<uint8_t> buf(FIXED);
    size_t got = 0;
    if (!read_upto(fd, buf.data(), FIXED, got)) {
        why = strfmt("cannot read: %s", errno_text().c_str());
        return KvFileError::Io;
    }
    if (got == FIXED) {
        // The variable part's size is in the fixed part; bounds are checked by the decoder.
        const uint64_t n = get32(buf.data() + 36), k = get32(buf.data() + 40), sl = get32(buf.data() + 44);
        if (n <= MAX_TOKENS && k <= MAX_TEXT && sl <= MAX_TEXT) {
            const size_t want = FIXED + static_cast<size_t>(k + sl + 4 * n) + 8;
            buf.resize(want);
            size_t more = 0;
            if (!read_upto(fd, buf.data() + FIXED, want - FIXED, more)) {
                why = strfmt("cannot read: %s", errno_text().c_str());
                return KvFileError::Io;
            }
            got += more;
        }
    }
    return decode_kv_header(buf.data(), got, expect, h, why);
}

// Reads the body straight into the snapshot's blob (one copy out of the page cache), its chunks
// read and checked on a few threads.
KvFileError read_kv_file(const std::string& path, const KvShape& expect, KvSnapshot& out, std::string& why) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        why = strfmt("cannot open: %s", errno_text().c_str());
        return KvFileError::Io;
    }
    struct Closer {
        int fd;
        ~Closer() { ::close(fd); }
    } closer{fd};
    KvFileHeader h;
    const KvFileError e = read_header_fd(fd, expect, h, why);
    if (e != KvFileError::None) return e;
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        why = strfmt("cannot stat: %s", errno_text().c_str());
        return KvFileError::Io;
    }
    const size_t chunks = n_chunks(h.body_bytes);
    const uint64_t want = kv_file_size(h);
    if (static_cast<uint64_t>(st.st_size) != want) {
        why = strfmt("size %lld, expected %llu", static_cast<long long>(st.st_size), static_cast<unsigned long long>(want));
        return KvFileError::Corrupt;
    }
    std::vector<uint64_t> sums(chunks);
    if (::pread(fd, sums.data(), 8 * chunks, static_cast<off_t>(h.header_bytes + h.body_bytes)) !=
        static_cast<ssize_t>(8 * chunks)) {
        why = strfmt("cannot read: %s", errno_text().c_str());
        return KvFileError::Io;
    }
    kv_blob_resize(out.kv, static_cast<size_t>(h.body_bytes));
    std::atomic<int> bad{0};  // 1 checksum, 2 read error
    parallel_for(chunks, bulk_copy_threads(), [&](size_t c) {
        const uint64_t at = static_cast<uint64_t>(c) * CHUNK;
        const size_t n = static_cast<size_t>(std::min<uint64_t>(CHUNK, h.body_bytes - at));
        size_t got = 0;
        while (got < n) {
            const ssize_t r = ::pread(fd, out.kv.bytes.data() + at + got, n - got, static_cast<off_t>(h.header_bytes + at + got));
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) {
                bad.store(2);
                return;
            }
            got += static_cast<size_t>(r);
        }
        if (chunk_hash(out.kv.bytes.data(), h.body_bytes, c) != sums[c]) bad.store(1);
    });
    if (bad.load() != 0) {
        why = bad.load() == 1 ? "body checksum mismatch" : strfmt("cannot read: %s", errno_text().c_str());
        out.kv.bytes.clear();
        return bad.load() == 1 ? KvFileError::Corrupt : KvFileError::Io;
    }
    out.key = std::move(h.key);
    out.session_id = std::move(h.session_id);
    out.tokens = std::move(h.tokens);
    out.kv.type = h.shape.type;
    out.kv.n_pos = static_cast<int>(out.tokens.size());
    return KvFileError::None;
}

KvFileError read_kv_header(const std::string& path, const KvShape& expect, KvFileHeader& h, std::string& why) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        why = strfmt("cannot open: %s", errno_text().c_str());
        return KvFileError::Io;
    }
    const KvFileError e = read_header_fd(fd, expect, h, why);
    ::close(fd);
    return e;
}

}  // namespace jllm
