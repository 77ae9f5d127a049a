// core/error.h — the project's error tiers 1 and 2.
// (1) Bad input or data: throw JllmError with a message naming expected vs actual; the public
//     API turns it into a status. (2) Broken invariants: JLLM_ASSERT, always on, file:line.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace jllm {

class JllmError : public std::runtime_error {
public:
    explicit JllmError(const std::string& msg) : std::runtime_error(msg) {}
};

// printf-style string formatting used by error messages and logs.
std::string strfmt(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

[[noreturn]] void assert_fail(const char* expr, const char* file, int line, const char* msg);

}  // namespace jllm

#define JLLM_ASSERT(cond)                                                   \
    do {                                                                    \
        if (!(cond)) ::jllm::assert_fail(#cond, __FILE__, __LINE__, "");    \
    } while (0)

#define JLLM_ASSERT_MSG(cond, msg)                                          \
    do {                                                                    \
        if (!(cond)) ::jllm::assert_fail(#cond, __FILE__, __LINE__, (msg)); \
    } while (0)
