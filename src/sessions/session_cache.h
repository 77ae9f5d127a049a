// sessions/session_cache.h — KV snapshots of earlier sequences kept beside the engine's resident
// one (DESIGN.md "KV cache"): an LRU in host RAM bounded by bytes, backed by a KV folder
// (persistence/kv_store.h) when one is configured. A snapshot is keyed by its session id
// ("s:" + id) or, without one, by its tokens ("p:" + hash); a request finds the snapshot that
// shares the longest prefix with its prompt, whatever its key. Thread-safe.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "jllm_engine.h"
#include "persistence/kv_file.h"
#include "persistence/kv_store.h"

namespace jllm {

struct SessionCandidate {
    std::shared_ptr<const KvSnapshot> snap;
    size_t common = 0;                    // prompt tokens it covers
    CacheSource source = CacheSource::None;
    double load_ms = 0;                   // reading it from disk
};

class SessionCache {
public:
    static constexpr size_t DISK_MIN_GAIN = 32;  // tokens a file must add to be read

    SessionCache(int64_t ram_budget, std::unique_ptr<KvDiskStore> disk);
    bool enabled() const { return ram_budget_ > 0 || disk_ != nullptr; }
    static std::string key_for(const std::string& session_id, const std::vector<int32_t>& tokens);

    // The snapshot sharing the longest prefix with `prompt`, more than `more_than` tokens (ties:
    // the request's own session, then RAM before disk, then the most recent). One from disk must
    // cover DISK_MIN_GAIN tokens more than the best in RAM; it is read and checked first (a bad
    // file is skipped with a warning) and then kept in RAM.
    SessionCandidate find(const std::vector<int32_t>& prompt, const std::string& session_key, size_t more_than);
    // Whether `key` holds exactly `tokens` already (nothing to store).
    bool holds(const std::string& key, const std::vector<int32_t>& tokens) const;
    // Stores `s` in RAM (evicting the least recently used) and queues it for disk. Snapshots
    // without a session id whose tokens are a prefix of s's are dropped: s covers them.
    void put(std::shared_ptr<const KvSnapshot> s);
    void erase(const std::string& key);
    void flush();  // waits for the queued disk writes

    // Per request: where its reused tokens came from and how many bytes were copied in.
    void count(CacheSource source, uint64_t bytes_restored);
    SessionCacheStats stats() const;
    KvDiskStore* disk() { return disk_.get(); }

private:
    struct Ram {
        std::shared_ptr<const KvSnapshot> snap;
        int64_t bytes = 0;
    };
    void insert_locked(std::shared_ptr<const KvSnapshot> s);
    void erase_locked(const std::string& key);

    int64_t ram_budget_;
    std::unique_ptr<KvDiskStore> disk_;
    mutable std::mutex mu_;
    std::list<Ram> lru_;  // most recent first
    std::map<std::string, std::list<Ram>::iterator> by_key_;
    int64_t ram_bytes_ = 0;
    SessionCacheStats st_;
};

}  // namespace jllm
