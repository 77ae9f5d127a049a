// persistence/kv_store.cpp — see kv_store.h.
#include "persistence/kv_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/log.h"

namespace jllm {

namespace {

constexpr const char* EXT = ".jkv";

bool ends_with(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

uint64_t now_ns() {
    struct timespec ts {};
    clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void mkdirs(const std::string& dir) {
    std::string cur;
    for (size_t i = 0; i <= dir.size(); ++i) {
        if (i == dir.size() || (dir[i] == '/' && i > 0)) {
            cur = dir.substr(0, i);
            if (::mkdir(cur.c_str(), 0700) != 0 && errno != EEXIST) {
                throw JllmError(strfmt("kv-dir: cannot create %s: %s", cur.c_str(), std::strerror(errno)));
            }
        }
    }
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) throw JllmError(strfmt("kv-dir: %s is not a folder", dir.c_str()));
    if (::access(dir.c_str(), W_OK | X_OK) != 0) throw JllmError(strfmt("kv-dir: %s is not writable", dir.c_str()));
}


}  // namespace

KvDiskStore::KvDiskStore(std::string dir, int64_t max_bytes, KvShape shape)
    : dir_(std::move(dir)), max_bytes_(max_bytes), shape_(shape) {
    while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
    mkdirs(dir_);
    scan();
    c_.budget = max_bytes_;
    writer_ = std::thread([this] { writer_loop(); });
}

KvDiskStore::~KvDiskStore() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    writer_.join();
}

std::string KvDiskStore::path_for(const std::string& key) const {
    return dir_ + strfmt("/%016llx", static_cast<unsigned long long>(XXH3_64bits(key.data(), key.size()))) + EXT;
}

void KvDiskStore::scan() {
    DIR* d = ::opendir(dir_.c_str());
    if (!d) throw JllmError(strfmt("kv-dir: cannot read %s: %s", dir_.c_str(), std::strerror(errno)));
    std::vector<std::string> names;
    while (const dirent* e = ::readdir(d)) names.emplace_back(e->d_name);
    ::closedir(d);
    std::sort(names.begin(), names.end());
    int temps = 0;
    for (const std::string& n : names) {
        const std::string path = dir_ + "/" + n;
        if (ends_with(n, ".tmp") && n.find(EXT) != std::string::npos) {  // an interrupted write
            if (::unlink(path.c_str()) == 0) temps++;
            continue;
        }
        if (!ends_with(n, EXT)) continue;
        KvFileHeader h;
        std::string why;
        const KvFileError err = read_kv_header(path, shape_, h, why);
        if (err == KvFileError::Foreign) {
            JLLM_LOG_WARN("[kv-dir] %s is %s: ignored", path.c_str(), why.c_str());
            continue;
        }
        struct stat st {};
        if (err == KvFileError::None && ::stat(path.c_str(), &st) == 0 &&
            static_cast<uint64_t>(st.st_size) == kv_file_size(h) && path == path_for(h.key)) {
            Entry e;
            e.session_id = std::move(h.session_id);
            e.tokens = std::move(h.tokens);
            e.bytes = st.st_size;
            e.last_use = static_cast<uint64_t>(st.st_mtim.tv_sec) * 1000000000ull + static_cast<uint64_t>(st.st_mtim.tv_nsec);
            c_.files++;
            c_.bytes += e.bytes;
            index_[h.key] = std::move(e);
            continue;
        }
        if (err == KvFileError::None) why = "truncated or misnamed";
        JLLM_LOG_WARN("[kv-dir] %s: %s; deleted", path.c_str(), why.c_str());
        c_.rejected++;
        ::unlink(path.c_str());
    }
    if (temps > 0) JLLM_LOG_INFO("[kv-dir] removed %d unfinished write%s", temps, temps == 1 ? "" : "s");
    std::lock_guard<std::mutex> lk(mu_);
    evict_locked("");
}

std::vector<KvDiskStore::Match> KvDiskStore::matches(const std::vector<int32_t>& prompt, size_t more_than) const {
    std::vector<std::pair<uint64_t, Match>> found;
    {
        std::lock_guard<std::mutex> lk(mu_);
        for (const auto& [key, e] : index_) {
            const size_t c = common_token_prefix(e.tokens, prompt);
            if (c > more_than) found.push_back({e.last_use, Match{key, e.session_id, c, e.tokens.size()}});
        }
    }
    std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
        return a.second.common != b.second.common ? a.second.common > b.second.common : a.first > b.first;
    });
    std::vector<Match> out;
    for (auto& f : found) out.push_back(std::move(f.second));
    return out;
}

bool KvDiskStore::has(const std::string& key) const {
    std::lock_guard<std::mutex> lk(mu_);
    return index_.count(key) != 0;
}

std::shared_ptr<const KvSnapshot> KvDiskStore::load(const std::string& key, std::string& why) {
    const std::string path = path_for(key);
    {
        std::unique_lock<std::mutex> lk(mu_);
        // A queued write of this key holds a newer snapshot than the file: that one.
        for (const auto& q : queue_) {
            if (q->key == key) return q;
        }
        if (!index_.count(key)) {
            why = "not in the store";
            return nullptr;
        }
        idle_cv_.wait(lk, [&] { return writing_key_ != key; });  // the file is being replaced
    }
    auto out = std::make_shared<KvSnapshot>();
    const KvFileError err = read_kv_file(path, shape_, *out, why);
    std::lock_guard<std::mutex> lk(mu_);
    if (err != KvFileError::None || out->key != key) {
        if (err == KvFileError::None) why = "its key differs from its name";
        JLLM_LOG_WARN("[kv-dir] %s: %s; the prompt is prefilled instead", path.c_str(), why.c_str());
        c_.rejected++;
        if (index_.count(key)) {
            drop_locked(key, false);
            ::unlink(path.c_str());
        }
        return nullptr;
    }
    c_.loaded++;
    c_.bytes_loaded += out->kv.bytes.size();
    auto it = index_.find(key);
    if (it != index_.end()) it->second.last_use = now_ns();
    (void)::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // the LRU order survives a restart
    return out;
}

void KvDiskStore::save(std::shared_ptr<const KvSnapshot> s) {
    {
        std::lock_guard<std::mutex> lk(mu_);
        auto same = std::find_if(queue_.begin(), queue_.end(), [&](const auto& q) { return q->key == s->key; });
        if (same != queue_.end()) {
            *same = std::move(s);
        } else {
            queue_.push_back(std::move(s));
        }
    }
    cv_.notify_all();
}

void KvDiskStore::remove(const std::string& key) {
    std::unique_lock<std::mutex> lk(mu_);
    queue_.erase(std::remove_if(queue_.begin(), queue_.end(), [&](const auto& q) { return q->key == key; }), queue_.end());
    idle_cv_.wait(lk, [&] { return !writing_; });  // a write of it in flight ends first
    if (index_.count(key)) drop_locked(key, false);
    ::unlink(path_for(key).c_str());
}

void KvDiskStore::flush() {
    std::unique_lock<std::mutex> lk(mu_);
    idle_cv_.wait(lk, [&] { return queue_.empty() && !writing_; });
}

KvStoreCounters KvDiskStore::counters() const {
    std::lock_guard<std::mutex> lk(mu_);
    return c_;
}

void KvDiskStore::drop_locked(const std::string& key, bool count_eviction) {
    auto it = index_.find(key);
    if (it == index_.end()) return;
    c_.files--;
    c_.bytes -= it->second.bytes;
    if (count_eviction) c_.evicted++;
    index_.erase(it);
}

// Removes the least recently used files until the total fits the budget (never `keep`).
void KvDiskStore::evict_locked(const std::string& keep) {
    while (c_.bytes > max_bytes_ && !index_.empty()) {
        auto victim = index_.end();
        for (auto it = index_.begin(); it != index_.end(); ++it) {
            if (it->first == keep) continue;
            if (victim == index_.end() || it->second.last_use < victim->second.last_use) victim = it;
        }
        if (victim == index_.end()) break;
        const std::string key = victim->first;
        drop_locked(key, true);
        ::unlink(path_for(key).c_str());
    }
}

void KvDiskStore::writer_loop() {
    std::unique_lock<std::mutex> lk(mu_);
    while (true) {
        cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) break;  // stop_ with nothing left to write
        std::shared_ptr<const KvSnapshot> s = std::move(queue_.front());
        queue_.pop_front();
        const int64_t size = static_cast<int64_t>(s->kv.bytes.size() + s->tokens.size() * 4 + s->key.size() +
                                                  s->session_id.size() + 80);
        if (size > max_bytes_) {  // would evict everything and still not fit
            if (queue_.empty()) idle_cv_.notify_all();
            continue;
        }
        writing_ = true;
        writing_key_ = s->key;
        lk.unlock();
        std::string why;
        const std::string path = path_for(s->key);
        const KvFileError err = write_kv_file(path, *s, shape_, why);
        struct stat st {};
        const bool stat_ok = err == KvFileError::None && ::stat(path.c_str(), &st) == 0;
        lk.lock();
        writing_ = false;
        writing_key_.clear();
        if (err != KvFileError::None) {
            c_.write_errors++;
            JLLM_LOG_WARN("[kv-dir] %s", why.c_str());
        } else if (stat_ok) {
            drop_locked(s->key, false);
            Entry e;
            e.session_id = s->session_id;
            e.tokens = s->tokens;
            e.bytes = st.st_size;
            e.last_use = now_ns();
            c_.files++;
            c_.bytes += e.bytes;
            c_.written++;
            c_.bytes_written += static_cast<uint64_t>(e.bytes);
            index_[s->key] = std::move(e);
            evict_locked(s->key);
        }
        idle_cv_.notify_all();
    }
    idle_cv_.notify_all();
}

}  // namespace jllm
