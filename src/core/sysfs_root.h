// core/sysfs_root.h — joins an injectable root ("/" on a real system, a fixture tree in tests)
// with an absolute system path. Shared by memory/ and jetson/ (every /proc and /sys read).
#pragma once

#include <string>

namespace jllm {

// rooted_path("/", "/proc/meminfo") == "/proc/meminfo"; rooted_path("t/r36", "/proc/x") == "t/r36/proc/x".
inline std::string rooted_path(const std::string& root, const std::string& abs) {
    if (root.empty() || root == "/") return abs;
    if (root.back() == '/') return root.substr(0, root.size() - 1) + abs;
    return root + abs;
}

}  // namespace jllm
