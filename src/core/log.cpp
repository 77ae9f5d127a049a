// core/log.cpp — one mutex-guarded writer so lines from several threads never interleave.
#include "core/log.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <mutex>

namespace jllm {

namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::Info)};
std::mutex g_log_mutex;
}  // namespace

void set_log_level(LogLevel level) { g_level.store(static_cast<int>(level)); }
LogLevel log_level() { return static_cast<LogLevel>(g_level.load()); }

void log_msg(LogLevel level, const char* fmt, ...) {
    if (static_cast<int>(level) > g_level.load()) return;
    const char* prefix = "";
    if (level == LogLevel::Error) prefix = "error: ";
    else if (level == LogLevel::Warn) prefix = "warning: ";
    std::lock_guard<std::mutex> lock(g_log_mutex);
    std::fputs(prefix, stderr);
    va_list ap;
    va_start(ap, fmt);
    std::vfprintf(stderr, fmt, ap);
    va_end(ap);
    std::fputc('\n', stderr);
    std::fflush(stderr);
}

}  // namespace jllm
