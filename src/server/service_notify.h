// server/service_notify.h — telling systemd (Type=notify) how the service is: READY=1 once the
// model is loaded and warmed, STATUS= lines, STOPPING=1 on shutdown, and WATCHDOG=1 pings while
// the server is healthy (libsystemd's sd_notify; all no-ops when not run by systemd, i.e. without
// $NOTIFY_SOCKET / $WATCHDOG_USEC).
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <thread>

namespace jllm::server {

void notify_ready(const std::string& status);
void notify_status(const std::string& status);
void notify_stopping(const std::string& status);

// Pings the watchdog at half its interval while `healthy()` holds; a server that stops being
// healthy (a listener that died) stops pinging and systemd restarts it. Nothing when the unit
// has no WatchdogSec.
class Watchdog {
public:
    explicit Watchdog(std::function<bool()> healthy);
    ~Watchdog();
    Watchdog(const Watchdog&) = delete;
    Watchdog& operator=(const Watchdog&) = delete;
    bool enabled() const { return interval_us_ > 0; }

private:
    std::function<bool()> healthy_;
    uint64_t interval_us_ = 0;
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

}  // namespace jllm::server
