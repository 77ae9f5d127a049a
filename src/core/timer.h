// core/timer.h — monotonic wall-clock timing in milliseconds.
#pragma once

#include <chrono>

namespace jllm {

inline double now_ms() {
    using clock = std::chrono::steady_clock;
    return std::chrono::duration<double, std::milli>(clock::now().time_since_epoch()).count();
}

}  // namespace jllm
