// server/half_closed.h — answering a client that half-closed its connection after sending the
// request (shutdown(SHUT_WR), `nc -N`, some scripted clients). The packaged cpp-httplib refuses to
// write to a socket whose read side has ended (it takes the end of stream for a hang-up), so such
// a client would get nothing; here the response is written to the socket directly instead.
#pragma once

#include <httplib.h>

namespace jllm::server {

// A stream's sink that survives the client half-closing while the stream runs (its FIN may come
// after the response started: deliver_to_half_closed then no longer applies, and cpp-httplib
// refuses every later write). A write the server's sink refuses goes to the socket itself,
// chunk-framed, when the peer only half-closed (PeerState::ReadClosed), and so do every later write
// and the stream's end (then the write side is shut; cpp-httplib closes the connection). A refused
// write whose peer is gone (or that timed out) stays refused. fd < 0: the server's sink as it is.
// cpp-httplib checks the socket before each send, so a refused chunk left nothing behind — unless a
// single chunk needed several sends and the FIN came between them (an event of a few hundred bytes
// to a client that stopped reading).
class StreamSink {
public:
    StreamSink(httplib::DataSink& inner, int fd);
    StreamSink(const StreamSink&) = delete;
    StreamSink& operator=(const StreamSink&) = delete;
    httplib::DataSink& sink() { return sink_; }

private:
    bool write(const char* data, size_t size);
    void done();

    httplib::DataSink& inner_;
    int fd_;
    bool direct_ = false, failed_ = false;
    httplib::DataSink sink_;
};

// Called just before cpp-httplib writes `res` (its post-routing hook). When the request's
// connection is half-closed, writes the whole response itself (status line, headers, the body or
// the content provider's output, chunked where the provider is), with `Connection: close`, then
// empties `res` so that cpp-httplib's own attempt writes nothing. True when it did so.
bool deliver_to_half_closed(const httplib::Request& req, httplib::Response& res);

}  // namespace jllm::server
