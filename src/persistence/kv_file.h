// persistence/kv_file.h — one session's KV snapshot as a file (DESIGN.md "Persistence"): the
// token ids it covers and their K/V in the backends' canonical layout (backend.h KvBlob), bound
// to one model and one KV shape, checked end to end. A file that is corrupt, truncated, of another
// model or of another KV type or shape is refused with the reason; nothing of it is used.
//
// Layout (little-endian):
//   header  magic "JLLMKV\r\n" | u32 version | u32 kv_type (0 int8, 1 fp16) | u64 model fingerprint
//           | u32 n_layer | u32 n_head_kv | u32 head_dim | u32 n_tokens | u32 key_len
//           | u32 session_len | u64 body_bytes | key | session id | i32 tokens[n_tokens]
//           | u64 XXH3 of everything before it
//   body    KvBlob bytes (body_bytes) | u64 XXH3 of each 4 MiB chunk of the body (since version 2)
// Version 3: INT8 keys Walsh-Hadamard rotated (backend/kv_quant.h); a file of another version is
// refused as corrupt, with its version in the reason (a --kv-dir deletes it at start).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace jllm {

struct ModelConfig;
class GgufFile;

// How many leading tokens two sequences share (a prompt and a cached sequence).
size_t common_token_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b);

// What a snapshot must match to be used: the model (a hash over the GGUF's metadata and tensor
// table) and the cache's KV type and shape.
struct KvShape {
    uint64_t fingerprint = 0;
    KvType type = KvType::Int8;
    uint32_t n_layer = 0, n_head_kv = 0, head_dim = 0;
    bool operator==(const KvShape& o) const {
        return fingerprint == o.fingerprint && type == o.type && n_layer == o.n_layer && n_head_kv == o.n_head_kv &&
               head_dim == o.head_dim;
    }
};
KvShape kv_shape(const GgufFile& file, const ModelConfig& c, KvType type);
// XXH3 over the file's bytes before its tensor data (header, metadata, tensor table).
uint64_t model_fingerprint(const GgufFile& file);

// The KV of `tokens` (positions 0 .. tokens.size()), under a cache key and, when a client named
// it, its session id.
struct KvSnapshot {
    std::string key;
    std::string session_id;
    std::vector<int32_t> tokens;
    KvBlob kv;
    size_t bytes() const { return kv.bytes.size() + tokens.size() * sizeof(int32_t) + key.size() + session_id.size(); }
};

// What a file's header says, read without its body.
struct KvFileHeader {
    KvShape shape;
    std::string key, session_id;
    std::vector<int32_t> tokens;
    uint64_t body_bytes = 0;
    uint64_t header_bytes = 0;  // offset of the body
};

// The size of a whole file with this header.
uint64_t kv_file_size(const KvFileHeader& h);

// Why a file cannot be used: Corrupt (bad magic, checksum, truncated, impossible sizes) or
// Foreign (a valid file of another model, KV type or shape: left in place for its owner).
enum class KvFileError { None, Corrupt, Foreign, Io };

// The file's bytes for `s` (shape must describe s.kv).
std::vector<uint8_t> encode_kv_file(const KvSnapshot& s, const KvShape& shape);

// Parses a header from the first `size` bytes of a file (the whole file, or its start: then
// Corrupt only when those bytes cannot be a header). `why` says what is wrong.
KvFileError decode_kv_header(const uint8_t* data, size_t size, const KvShape& expect, KvFileHeader& h,
                             std::string& why);
// Parses a whole file into `out`; anything short of a file written by encode_kv_file for
// `expect` is refused.
KvFileError decode_kv_file(const uint8_t* data, size_t size, const KvShape& expect, KvSnapshot& out,
                           std::string& why);

// Files: write atomically (temp file in the same folder, fsync, rename, fsync of the folder);
// read whole or header only. Errors are Io with the reason.
KvFileError write_kv_file(const std::string& path, const KvSnapshot& s, const KvShape& shape, std::string& why);
KvFileError read_kv_file(const std::string& path, const KvShape& expect, KvSnapshot& out, std::string& why);
KvFileError read_kv_header(const std::string& path, const KvShape& expect, KvFileHeader& h, std::string& why);

}  // namespace jllm
