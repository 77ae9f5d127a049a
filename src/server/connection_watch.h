// server/connection_watch.h — noticing that an HTTP client went away while its request waits or
// generates. cpp-httplib 0.11 gives handlers no socket, so the socket is found by its address
// pair (the connection is open for the whole handler, so the match is unique), then polled.
#pragma once

#include <string>

namespace jllm::server {

// The fd of the connected socket whose local port is `local_port` and whose peer is
// `remote_addr`:`remote_port`; -1 when none matches.
int find_connection_fd(const std::string& remote_addr, int remote_port, int local_port);

// Ends the read side of every connection accepted on `local_port` (after the listener has
// stopped): a worker waiting for a keep-alive connection's next request sees the end at once
// instead of after its idle timeout, while answers being written still go out. Returns how many.
int shut_down_reads(int local_port);

// What a non-blocking poll tells of the peer. A read-side end of stream (the peer's FIN) is either
// a client that hung up or one that half-closed after sending its request and still reads the
// answer; TCP does not say which until something is written: a closed peer answers data with a
// reset (then Gone), a half-closed one takes it.
enum class PeerState { Open, ReadClosed, Gone };
PeerState peer_state(int fd);  // Open for fd < 0

// Writes an interim "HTTP/1.1 100 Continue" response (which every HTTP/1.1 client must accept
// before the final one) to tell the two apart; false when the write fails (the peer is gone).
// Only for a request none of whose response has been written yet.
bool send_continue_probe(int fd);

// Whether the client of a request has gone. `state`: the per-request memory of the probe (one per
// request). A read-side end of stream is probed once when `may_probe` (HTTP/1.1 and nothing of the
// response written yet), else it counts as gone unless `writes_tell` (a stream whose own writes
// notice a reset).
struct PeerWatch {
    int fd = -1;
    bool http11 = true;
    bool probed = false;
};
bool client_gone(PeerWatch& watch, bool may_probe, bool writes_tell);

}  // namespace jllm::server
