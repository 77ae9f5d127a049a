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

}  // namespace

int find_connection_fd(const std::string& remote_addr, int remote_port, int local_port) {
    DIR* dir = opendir("/proc/self/fd");
    if (!dir) return -1;
    int found = -1;
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
        if (lp == local_port && pp == remote_port && pa == remote_addr) {
            found = fd;
            break;
        }
    }
    closedir(dir);
    return found;
}

bool connection_closed(int fd) {
    if (fd < 0) return false;
    pollfd p{};
    p.fd = fd;
    p.events = POLLIN | POLLRDHUP;
    if (poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
    if (p.revents & POLLIN) {
        char c;
        const ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
        return n == 0;  // orderly shutdown; > 0 is a pipelined request, not a hang-up
    }
    return false;
}

}  // namespace jllm::server
