// core/log.h — stderr logging at the verbosity of include/jllm_log.h. Engine lines use the
// "[engine]" prefix.
#pragma once

#include "jllm_log.h"

namespace jllm {

void log_msg(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace jllm

#define JLLM_LOG_ERROR(...) ::jllm::log_msg(::jllm::LogLevel::Error, __VA_ARGS__)
#define JLLM_LOG_WARN(...) ::jllm::log_msg(::jllm::LogLevel::Warn, __VA_ARGS__)
#define JLLM_LOG_INFO(...) ::jllm::log_msg(::jllm::LogLevel::Info, __VA_ARGS__)
#define JLLM_LOG_DEBUG(...) ::jllm::log_msg(::jllm::LogLevel::Debug, __VA_ARGS__)
