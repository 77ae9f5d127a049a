// server/connection_watch.h — noticing that an HTTP client went away while its request waits or
// generates. cpp-httplib 0.11 gives handlers no socket, so the socket is found by its address
// pair (the connection is open for the whole handler, so the match is unique), then polled.
#pragma once

#include <string>

namespace jllm::server {

// The fd of the connected socket whose local port is `local_port` and whose peer is
// `remote_addr`:`remote_port`; -1 when none matches.
int find_connection_fd(const std::string& remote_addr, int remote_port, int local_port);

// True when the peer has closed or reset the connection (non-blocking; false for fd < 0).
bool connection_closed(int fd);

}  // namespace jllm::server
