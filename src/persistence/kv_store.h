// persistence/kv_store.h — a folder of session KV files (kv_file.h) for one model and KV shape:
// an index of the usable files' headers (their token ids, for prefix matching), lazy loads, and
// a background writer, so saving never delays a response. LRU eviction by total bytes; the order
// survives restarts (a file's mtime is its last use). At start, temp files of interrupted writes
// are removed, corrupt files deleted with one warning each, and files of another model or KV
// type left alone (one warning each; not counted against the budget).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "persistence/kv_file.h"

namespace jllm {

struct KvStoreCounters {
    int64_t files = 0, bytes = 0, budget = 0;
    uint64_t written = 0, bytes_written = 0;  // files written since start
    uint64_t loaded = 0, bytes_loaded = 0;
    uint64_t evicted = 0;                     // files removed for the budget
    uint64_t rejected = 0;                    // corrupt or unreadable files skipped
    uint64_t write_errors = 0;
};

class KvDiskStore {
public:
    // Creates `dir` if needed and scans it. Throws JllmError when it cannot be created or read.
    KvDiskStore(std::string dir, int64_t max_bytes, KvShape shape);
    ~KvDiskStore();  // finishes the queued writes
    KvDiskStore(const KvDiskStore&) = delete;
    KvDiskStore& operator=(const KvDiskStore&) = delete;

    struct Match {
        std::string key, session_id;
        size_t common = 0;   // tokens in common with the prompt
        size_t n_tokens = 0;
    };
    // The indexed files by their common prefix with `prompt`, longest first (ties: the most
    // recently used first), those with more than `more_than` tokens in common only.
    std::vector<Match> matches(const std::vector<int32_t>& prompt, size_t more_than) const;
    bool has(const std::string& key) const;
    // The snapshot of `key`: a queued write's, else its file read and checked. A file that fails
    // is deleted and left out of the index (one warning); null then, with the reason in `why`.
    std::shared_ptr<const KvSnapshot> load(const std::string& key, std::string& why);
    // Queues `s` to be written; a queued write of the same key not yet started is replaced.
    void save(std::shared_ptr<const KvSnapshot> s);
    void remove(const std::string& key);
    void flush();  // returns when every queued write is done
    KvStoreCounters counters() const;
    const std::string& dir() const { return dir_; }
    std::string path_for(const std::string& key) const;

private:
    struct Entry {
        std::string session_id;
        std::vector<int32_t> tokens;
        int64_t bytes = 0;
        uint64_t last_use = 0;  // ns since the epoch
    };
    void scan();
    void writer_loop();
    void evict_locked(const std::string& keep);
    void drop_locked(const std::string& key, bool count_eviction);

    std::string dir_;
    int64_t max_bytes_;
    KvShape shape_;
    mutable std::mutex mu_;
    std::condition_variable cv_, idle_cv_;
    std::map<std::string, Entry> index_;
    std::deque<std::shared_ptr<const KvSnapshot>> queue_;
    bool writing_ = false, stop_ = false;
    std::string writing_key_;
    KvStoreCounters c_;
    std::thread writer_;
};

}  // namespace jllm
