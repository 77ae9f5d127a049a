// memory/meminfo.cpp — reads what the OS has: /proc/meminfo and /proc/self/status, both under an
// injectable root so tests run on fixture files. Formats are the kernel's (Documentation/
// filesystems/proc.rst, "meminfo" and "/proc/PID/status"): "Key:<spaces>value kB" lines.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/sysfs_root.h"
#include "memory/memory_budget.h"

namespace jllm {

namespace {

// Value of "Key:   123 kB" in `text` in bytes, or -1.
int64_t kb_field(const std::string& text, const char* key) {
    const std::string k = std::string(key) + ":";
    size_t pos = 0;
    while ((pos = text.find(k, pos)) != std::string::npos) {
        if (pos == 0 || text[pos - 1] == '\n') {
            const char* p = text.c_str() + pos + k.size();
            char* end = nullptr;
            const long long v = std::strtoll(p, &end, 10);
            if (end == p) return -1;
            while (*end == ' ' || *end == '\t') ++end;
            // Every size in these files is in kB; a bare number (no unit) is taken as bytes.
            return std::strncmp(end, "kB", 2) == 0 ? static_cast<int64_t>(v) * 1024 : static_cast<int64_t>(v);
        }
        pos += k.size();
    }
    return -1;
}

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return {};
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

}  // namespace

MemInfo parse_meminfo(const std::string& text) {
    MemInfo m;
    m.total = kb_field(text, "MemTotal");
    m.free = kb_field(text, "MemFree");
    m.available = kb_field(text, "MemAvailable");
    m.cma_total = kb_field(text, "CmaTotal");
    m.cma_free = kb_field(text, "CmaFree");
    return m;
}

MemInfo read_meminfo(const std::string& root) { return parse_meminfo(slurp(rooted_path(root, "/proc/meminfo"))); }

int64_t read_mem_available(const char* path) {
    // /proc/meminfo is ~1.5 KB; MemAvailable is its third line. One read() into the stack.
    char buf[4096];
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    const ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    if (n <= 0) return -1;
    buf[n] = '\0';
    const char* p = std::strstr(buf, "MemAvailable:");
    if (!p) return -1;
    p += 13;
    char* end = nullptr;
    const long long v = std::strtoll(p, &end, 10);
    if (end == p) return -1;
    return static_cast<int64_t>(v) * 1024;
}

ProcessMemory read_process_memory(const std::string& root) {
    const std::string s = slurp(rooted_path(root, "/proc/self/status"));
    ProcessMemory pm;
    pm.rss = kb_field(s, "VmRSS");
    pm.rss_peak = kb_field(s, "VmHWM");
    pm.rss_anon = kb_field(s, "RssAnon");
    return pm;
}

std::string format_mb(int64_t bytes) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "%.1f MB", static_cast<double>(bytes) / static_cast<double>(MIB));
    return buf;
}

}  // namespace jllm
