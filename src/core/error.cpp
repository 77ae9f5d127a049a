// core/error.cpp — formatting helper and the always-on assertion handler.
#include "core/error.h"

#include <cstdarg>
#include <vector>

namespace jllm {

std::string strfmt(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    va_list ap2;
    va_copy(ap2, ap);
    int n = std::vsnprintf(nullptr, 0, fmt, ap);
    va_end(ap);
    std::string out;
    if (n > 0) {
        out.resize(static_cast<size_t>(n) + 1);
        std::vsnprintf(out.data(), out.size(), fmt, ap2);
        out.resize(static_cast<size_t>(n));
    }
    va_end(ap2);
    return out;
}

void assert_fail(const char* expr, const char* file, int line, const char* msg) {
    std::fprintf(stderr, "jllm: internal assertion failed: %s at %s:%d %s\n", expr, file, line,
                 msg ? msg : "");
    std::fflush(stderr);
    std::abort();
}

}  // namespace jllm
