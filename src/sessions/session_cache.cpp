// sessions/session_cache.cpp — see session_cache.h.
#include "sessions/session_cache.h"

#include <xxhash.h>

#include <algorithm>

#include "core/error.h"
#include "core/log.h"
#include "core/timer.h"

namespace jllm {

SessionCache::SessionCache(int64_t ram_budget, std::unique_ptr<KvDiskStore> disk)
    : ram_budget_(std::max<int64_t>(ram_budget, 0)), disk_(std::move(disk)) {
    st_.ram_budget = ram_budget_;
}

std::string SessionCache::key_for(const std::string& session_id, const std::vector<int32_t>& tokens) {
    if (!session_id.empty()) return "s:" + session_id;
    return strfmt("p:%016llx", static_cast<unsigned long long>(XXH3_64bits(tokens.data(), tokens.size() * 4)));
}

SessionCandidate SessionCache::find(const std::vector<int32_t>& prompt, const std::string& session_key,
                                    size_t more_than) {
    SessionCandidate best;
    {
        std::lock_guard<std::mutex> lk(mu_);
        for (const Ram& r : lru_) {  // most recent first: ties keep the earlier
            const size_t c = common_token_prefix(r.snap->tokens, prompt);
            if (c <= more_than) continue;
            const bool own = r.snap->key == session_key;
            if (c > best.common || (c == best.common && own && best.snap->key != session_key)) {
                best.snap = r.snap;
                best.common = c;
                best.source = CacheSource::Ram;
            }
        }
        if (best.snap) {  // the LRU's order: a use
            auto it = by_key_.find(best.snap->key);
            lru_.splice(lru_.begin(), lru_, it->second);
        }
    }
    if (!disk_) return best;
    // A file is read only where it covers DISK_MIN_GAIN tokens more than RAM or the resident
    // sequence does: a few tokens are cheaper to prefill than a file is to read.
    const size_t base = std::max(more_than, best.common);
    for (const KvDiskStore::Match& m : disk_->matches(prompt, base + DISK_MIN_GAIN - 1)) {
        const double t0 = now_ms();
        std::string why;
        std::shared_ptr<const KvSnapshot> s = disk_->load(m.key, why);
        if (!s) continue;  // warned and dropped: the next best
        best.snap = s;
        best.common = common_token_prefix(s->tokens, prompt);
        best.source = CacheSource::Disk;
        best.load_ms = now_ms() - t0;
        std::lock_guard<std::mutex> lk(mu_);
        insert_locked(s);
        break;
    }
    return best;
}

bool SessionCache::holds(const std::string& key, const std::vector<int32_t>& tokens) const {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = by_key_.find(key);
    return it != by_key_.end() && it->second->snap->tokens == tokens;
}

void SessionCache::put(std::shared_ptr<const KvSnapshot> s) {
    std::vector<std::string> covered;
    {
        std::lock_guard<std::mutex> lk(mu_);
        for (const Ram& r : lru_) {
            const KvSnapshot& o = *r.snap;
            if (o.key != s->key && o.session_id.empty() && o.tokens.size() <= s->tokens.size() &&
                common_token_prefix(o.tokens, s->tokens) == o.tokens.size()) {
                covered.push_back(o.key);
            }
        }
        for (const std::string& k : covered) erase_locked(k);
        st_.snapshots++;
        st_.bytes_snapshotted += s->kv.bytes.size();
        insert_locked(s);
    }
    if (disk_) {
        for (const KvDiskStore::Match& m : disk_->matches(s->tokens, 0)) {
            if (m.key != s->key && m.session_id.empty() && m.common == m.n_tokens) disk_->remove(m.key);
        }
        disk_->save(std::move(s));
    }
}

void SessionCache::erase(const std::string& key) {
    {
        std::lock_guard<std::mutex> lk(mu_);
        erase_locked(key);
    }
    if (disk_) disk_->remove(key);
}

void SessionCache::flush() {
    if (disk_) disk_->flush();
}

void SessionCache::insert_locked(std::shared_ptr<const KvSnapshot> s) {
    erase_locked(s->key);
    const int64_t bytes = static_cast<int64_t>(s->bytes());
    if (bytes > ram_budget_) return;  // the disk may still keep it
    while (ram_bytes_ + bytes > ram_budget_ && !lru_.empty()) {
        const std::string victim = lru_.back().snap->key;
        erase_locked(victim);
        st_.ram_evictions++;
    }
    lru_.push_front(Ram{s, bytes});
    by_key_[s->key] = lru_.begin();
    ram_bytes_ += bytes;
}

void SessionCache::erase_locked(const std::string& key) {
    auto it = by_key_.find(key);
    if (it == by_key_.end()) return;
    ram_bytes_ -= it->second->bytes;
    lru_.erase(it->second);
    by_key_.erase(it);
}

void SessionCache::count(CacheSource source, uint64_t bytes_restored) {
    std::lock_guard<std::mutex> lk(mu_);
    switch (source) {
        case CacheSource::None: st_.misses++; break;
        case CacheSource::Resident: st_.hits_resident++; break;
        case CacheSource::Ram: st_.hits_ram++; break;
        case CacheSource::Disk: st_.hits_disk++; break;
    }
    st_.bytes_restored += bytes_restored;
}

SessionCacheStats SessionCache::stats() const {
    SessionCacheStats s;
    {
        std::lock_guard<std::mutex> lk(mu_);
        s = st_;
        s.ram_entries = static_cast<int64_t>(lru_.size());
        s.ram_bytes = ram_bytes_;
    }
    if (disk_) {
        const KvStoreCounters c = disk_->counters();
        s.disk_enabled = true;
        s.disk_entries = c.files;
        s.disk_bytes = c.bytes;
        s.disk_budget = c.budget;
        s.disk_written = c.written;
        s.disk_bytes_written = c.bytes_written;
        s.disk_loaded = c.loaded;
        s.disk_bytes_loaded = c.bytes_loaded;
        s.disk_evictions = c.evicted;
        s.disk_rejected = c.rejected;
        s.disk_write_errors = c.write_errors;
    }
    return s;
}

}  // namespace jllm
