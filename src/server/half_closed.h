// server/half_closed.h — answering a client that half-closed its connection after sending the
// request (shutdown(SHUT_WR), `nc -N`, some scripted clients). The packaged cpp-httplib refuses to
// write to a socket whose read side has ended (it takes the end of stream for a hang-up), so such
// a client would get nothing; here the response is written to the socket directly instead.
#pragma once

#include <httplib.h>

namespace jllm::server {

// Called just before cpp-httplib writes `res` (its post-routing hook). When the request's
// connection is half-closed, writes the whole response itself (status line, headers, the body or
// the content provider's output, chunked where the provider is), with `Connection: close`, then
// empties `res` so that cpp-httplib's own attempt writes nothing. True when it did so.
bool deliver_to_half_closed(const httplib::Request& req, httplib::Response& res);

}  // namespace jllm::server
