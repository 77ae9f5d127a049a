// include/jllm_log.h — the library's stderr log verbosity (process-wide: the log is one stream).
// Errors and warnings always print; Info is the default; Debug adds per-request lines.
#pragma once

namespace jllm {

enum class LogLevel { Error = 0, Warn = 1, Info = 2, Debug = 3 };

void set_log_level(LogLevel level);
LogLevel log_level();

}  // namespace jllm
