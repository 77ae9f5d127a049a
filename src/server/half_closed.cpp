// server/half_closed.cpp — see half_closed.h. Writes are blocking with a poll-bounded wait (the
// server's write timeout), MSG_NOSIGNAL so a reset peer is an error, not a signal.
#include "server/half_closed.h"

#include <poll.h>
#include <sys/socket.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <functional>
#include <string>

#include "server/connection_watch.h"

namespace jllm::server {

namespace {

constexpr int WRITE_TIMEOUT_MS = 10000;  // as the server's set_write_timeout

const char* reason_phrase(int status) {
    switch (status) {
        case 200: return "OK";
        case 400: return "Bad Request";
        case 401: return "Unauthorized";
        case 404: return "Not Found";
        case 405: return "Method Not Allowed";
        case 413: return "Payload Too Large";
        case 429: return "Too Many Requests";
        case 500: return "Internal Server Error";
        case 503: return "Service Unavailable";
        default: return "Status";
    }
}

bool send_all(int fd, const char* data, size_t size) {
    while (size > 0) {
        const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            data += n;
            size -= static_cast<size_t>(n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            pollfd p{};
            p.fd = fd;
            p.events = POLLOUT;
            if (::poll(&p, 1, WRITE_TIMEOUT_MS) <= 0 || (p.revents & (POLLERR | POLLHUP | POLLNVAL))) return false;
            continue;
        }
        return false;
    }
    return true;
}

// One chunk of a chunked body (nothing for size 0: that frame would end the body).
bool send_chunk(int fd, const char* data, size_t size) {
    if (size == 0) return true;
    char frame[24];
    const int n = std::snprintf(frame, sizeof frame, "%zx\r\n", size);
    return send_all(fd, frame, static_cast<size_t>(n)) && send_all(fd, data, size) && send_all(fd, "\r\n", 2);
}
constexpr char CHUNKED_END[] = "0\r\n\r\n";

bool same_name(const std::string& a, const char* b) {
    size_t i = 0;
    for (; i < a.size() && b[i]; ++i) {
        if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
    }
    return i == a.size() && !b[i];
}

std::string head_of(const httplib::Request& req, const httplib::Response& res, const std::string& framing) {
    std::string head = req.version == "HTTP/1.0" ? "HTTP/1.0 " : "HTTP/1.1 ";
    head += std::to_string(res.status) + " " + reason_phrase(res.status) + "\r\n";
    for (const auto& [name, value] : res.headers) {
        if (same_name(name, "Connection") || same_name(name, "Content-Length") || same_name(name, "Transfer-Encoding")) {
            continue;
        }
        head += name + ": " + value + "\r\n";
    }
    head += framing + "Connection: close\r\n\r\n";
    return head;
}

// Runs the response's content provider to the end, each piece through `write`.
bool run_provider(httplib::Response& res, const std::function<bool(const char*, size_t)>& write) {
    httplib::DataSink sink;
    bool ok = true, finished = false;
    size_t offset = 0;
    sink.write = [&](const char* data, size_t size) {
        if (!ok) return false;
        ok = write(data, size);
        offset += size;
        return ok;
    };
    sink.is_writable = [&] { return ok; };
    sink.done = [&] { finished = true; };
    if (res.is_chunked_content_provider_) {
        while (ok && !finished) {
            if (!res.content_provider_(offset, 0, sink)) return false;
        }
    } else {
        while (ok && offset < res.content_length_) {
            const size_t before = offset;
            if (!res.content_provider_(offset, res.content_length_ - offset, sink)) return false;
            if (offset == before) return false;  // a provider that makes no progress
        }
    }
    return ok;
}

}  // namespace

bool deliver_to_half_closed(const httplib::Request& req, httplib::Response& res) {
    const int fd = find_connection_fd(req.remote_addr, req.remote_port, req.local_port);
    if (fd < 0 || peer_state(fd) != PeerState::ReadClosed) return false;
    const bool head_only = req.method == "HEAD";
    bool ok = true;
    if (!res.content_provider_) {
        const std::string head = head_of(req, res, "Content-Length: " + std::to_string(res.body.size()) + "\r\n");
        ok = send_all(fd, head.data(), head.size()) && (head_only || send_all(fd, res.body.data(), res.body.size()));
    } else if (res.is_chunked_content_provider_) {
        const std::string head = head_of(req, res, "Transfer-Encoding: chunked\r\n");
        ok = send_all(fd, head.data(), head.size());
        if (ok && !head_only) {
            ok = run_provider(res, [fd](const char* data, size_t size) { return send_chunk(fd, data, size); });
            ok = ok && send_all(fd, CHUNKED_END, sizeof CHUNKED_END - 1);
        }
    } else {
        const std::string head = head_of(req, res, "Content-Length: " + std::to_string(res.content_length_) + "\r\n");
        ok = send_all(fd, head.data(), head.size());
        if (ok && !head_only) ok = run_provider(res, [fd](const char* data, size_t size) { return send_all(fd, data, size); });
    }
    res.content_provider_success_ = ok;
    // cpp-httplib writes next; there is nothing left for it (and the socket refuses it anyway).
    res.body.clear();
    res.content_provider_ = nullptr;
    res.content_length_ = 0;
    res.is_chunked_content_provider_ = false;
    ::shutdown(fd, SHUT_WR);
    return true;
}

StreamSink::StreamSink(httplib::DataSink& inner, int fd) : inner_(inner), fd_(fd) {
    sink_.write = [this](const char* data, size_t size) { return write(data, size); };
    sink_.is_writable = [this] { return direct_ ? !failed_ : inner_.is_writable(); };
    sink_.done = [this] { done(); };
}

bool StreamSink::write(const char* data, size_t size) {
    if (!direct_) {
        if (inner_.write(data, size)) return true;
        if (fd_ < 0 || peer_state(fd_) != PeerState::ReadClosed) return false;
        direct_ = true;  // the client half-closed after the response started: write it ourselves
    }
    if (failed_) return false;
    failed_ = !send_chunk(fd_, data, size);
    return !failed_;
}

void StreamSink::done() {
    if (!direct_) {
        inner_.done();
        return;
    }
    if (!failed_) failed_ = !send_all(fd_, CHUNKED_END, sizeof CHUNKED_END - 1);
    ::shutdown(fd_, SHUT_WR);
}

}  // namespace jllm::server
