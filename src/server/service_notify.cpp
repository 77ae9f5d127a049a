// server/service_notify.cpp — see service_notify.h.
#include "server/service_notify.h"

#include <systemd/sd-daemon.h>

#include <chrono>

#include "core/log.h"

namespace jllm::server {

namespace {

void send(const std::string& msg) {
    const int r = sd_notify(0, msg.c_str());
    if (r < 0) JLLM_LOG_WARN("[server] sd_notify failed (%d)", r);
}

}  // namespace

void notify_ready(const std::string& status) { send("READY=1\nSTATUS=" + status); }
void notify_status(const std::string& status) { send("STATUS=" + status); }
void notify_stopping(const std::string& status) { send("STOPPING=1\nSTATUS=" + status); }

Watchdog::Watchdog(std::function<bool()> healthy) : healthy_(std::move(healthy)) {
    uint64_t usec = 0;
    if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) interval_us_ = usec;
    if (!enabled()) return;
    JLLM_LOG_INFO("[server] systemd watchdog: pinging every %.1f s", interval_us_ / 2e6);
    thread_ = std::thread([this] {
        const auto period = std::chrono::microseconds(interval_us_ / 2);
        auto next = std::chrono::steady_clock::now();
        while (!stop_.load()) {
            if (std::chrono::steady_clock::now() >= next) {
                if (healthy_()) send("WATCHDOG=1");
                next += period;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
    });
}

Watchdog::~Watchdog() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
}

}  // namespace jllm::server
