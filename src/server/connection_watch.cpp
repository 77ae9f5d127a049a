// server/connection_watch.cpp — socket lookup through /proc/self/fd and a hang-up poll.
#include "server/connection_watch.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace jllm::server {

namespace {

bool endpoint_of(const sockaddr_storage& ss, std::string& addr, int& port) {
    char buf[INET6_ADDRSTRLEN] = {0};
    if (ss.ss_family == AF_INET) {
        const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
        if (!inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf)) return false;
        port = ntohs(a->sin_port);
    } else if (ss.ss_family == AF_INET6) {
        const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
        if (!inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof buf)) return false;
        port = ntohs(a->sin6_port);
    } else {
        return false;
    }
    addr = buf;
    return true;
}

// Calls fn(fd, peer address, peer port) for each connected socket of this process whose local
// port is `local_port`, until fn returns false.
template <typename Fn>
void for_each_connection(int local_port, Fn&& fn) {
    DIR* dir = opendir("/proc/self/fd");
    if (!dir) return;
    while (dirent* ent = readdir(dir)) {
        if (ent->d_name[0] < '0' || ent->d_name[0] > '9') continue;
        const int fd = std::atoi(ent->d_name);
        if (fd == dirfd(dir)) continue;
        sockaddr_storage local{}, peer{};
        socklen_t ll = sizeof local, pl = sizeof peer;
        if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &ll) != 0) continue;
        if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &pl) != 0) continue;
        std::string la, pa;
        int lp = -1, pp = -1;
        if (!endpoint_of(local, la, lp) || !endpoint_of(peer, pa, pp)) continue;
        if (lp == local_port && !fn(fd, pa, pp)) break;
    }
    closedir(dir);
}

}  // namespace

int find_connection_fd(const std::string& remote_addr, int remote_port, int local_port) {
    int found = -1;
    for_each_connection(local_port, [&](int fd, const std::string& addr, int port) {
        if (port != remote_port || addr != remote_addr) return true;
        found = fd;
        return false;
    });
    return found;
}

int shut_down_reads(int local_port) {
    int n = 0;
    for_each_connection(local_port, [&](int fd, const std::string&, int) {
        n += ::shutdown(fd, SHUT_RD) == 0;
        return true;
    });
    return n;
}

PeerState peer_state(int fd) {
    if (fd < 0) return PeerState::Open;
    pollfd p{};
    p.fd = fd;
    p.events = POLLIN | POLLRDHUP;
    if (poll(&p, 1, 0) <= 0) return PeerState::Open;
    if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) return PeerState::Gone;
    if (p.revents & POLLRDHUP) return PeerState::ReadClosed;
    if (p.revents & POLLIN) {
        char c;
        const ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n == 0) return PeerState::ReadClosed;
        // > 0 is a pipelined request, not a hang-up
    }
    return PeerState::Open;
}

bool send_continue_probe(int fd) {
    static const char probe[] = "HTTP/1.1 100 Continue\r\n\r\n";
    const ssize_t n = send(fd, probe, sizeof probe - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    return n == static_cast<ssize_t>(sizeof probe - 1);
}

bool client_gone(PeerWatch& watch, bool may_probe, bool writes_tell) {
    const PeerState s = peer_state(watch.fd);
    if (s == PeerState::Gone) return true;
    if (s == PeerState::Open || watch.probed) return false;
    if (writes_tell) return false;
    if (!may_probe || !watch.http11) return true;
    watch.probed = true;
    return !send_continue_probe(watch.fd);
}

}  // namespace jllm::server
