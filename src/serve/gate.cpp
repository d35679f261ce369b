#include "serve/gate.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"

namespace lathe {

using Clock = std::chrono::steady_clock;

std::optional<size_t> request_head_length(std::string_view data) {
  for (size_t i = data.find('\n'); i != std::string_view::npos; i = data.find('\n', i + 1)) {
    if (i + 1 < data.size() && data[i + 1] == '\n') return i + 2;
    if (i + 2 < data.size() && data[i + 1] == '\r' && data[i + 2] == '\n') return i + 3;
  }
  return std::nullopt;
}

namespace {

// A connection between requests: the bytes read of its next head, and when it must be whole.
struct Conn {
  int fd = -1;
  std::string buf;
  Clock::time_point deadline, since;
  int served = 0;         // requests answered on it
  bool draining = false;  // refused: what the client still sends is read and dropped
  size_t drained = 0;
};

constexpr size_t kMaxDrainBytes = 4u << 20;
constexpr std::chrono::milliseconds kDrainTime{1000};

// A refusal written before httplib sees the request: a small JSON body as the explorer's own
// errors have, and Connection: close.
void send_refusal(int fd, int status, const char* reason, const std::string& message) {
  const std::string body = cat(R"({"error":")", message, R"(","status":)", status, "}");
  const std::string text =
      cat("HTTP/1.1 ", status, " ", reason,
          "\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ", body.size(),
          "\r\nConnection: close\r\nX-Content-Type-Options: nosniff\r\n\r\n", body);
  // Small enough for an empty socket buffer; a client that filled it loses the answer only.
  (void)::send(fd, text.data(), text.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

// The head of a connection, then its socket: what httplib's request handling reads and
// writes. Reads never wait (the head is whole and requests carry no body here); writes wait
// for the socket up to one deadline for the whole response.
class GateStream : public httplib::Stream {
 public:
  GateStream(int fd, std::string head, Clock::time_point write_deadline)
      : fd_(fd), buf_(std::move(head)), deadline_(write_deadline) {}

  bool is_readable() const override { return pos_ < buf_.size(); }
  bool is_writable() const override { return !failed_; }

  ssize_t read(char* ptr, size_t size) override {
    const size_t n = std::min(size, buf_.size() - pos_);
    std::copy_n(buf_.data() + pos_, n, ptr);
    pos_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    size_t done = 0;
    while (done < size && !failed_) {
      const ssize_t n = ::send(fd_, ptr + done, size - done, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        done += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now());
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && left.count() > 0) {
        pollfd p{fd_, POLLOUT, 0};
        ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
        continue;
      }
      failed_ = true;  // an error, or a client too slow to take the answer
    }
    return failed_ ? -1 : static_cast<ssize_t>(size);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    address(::getpeername, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    address(::getsockname, ip, port);
  }
  socket_t socket() const override { return fd_; }

  bool failed() const { return failed_; }
  // What the client sent after the head just read (a pipelined request).
  std::string leftover() const { return buf_.substr(pos_); }

 private:
  void address(int (*get)(int, sockaddr*, socklen_t*), std::string& ip, int& port) const {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    ip.clear();
    port = 0;
    if (get(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) return;
    char text[INET6_ADDRSTRLEN] = {};
    if (a.ss_family == AF_INET) {
      const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a);
      ::inet_ntop(AF_INET, &v4->sin_addr, text, sizeof text);
      port = ntohs(v4->sin_port);
    } else if (a.ss_family == AF_INET6) {
      const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a);
      ::inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof text);
      port = ntohs(v6->sin6_port);
    }
    ip = text;
  }

  int fd_;
  std::string buf_;
  size_t pos_ = 0;
  Clock::time_point deadline_;
  bool failed_ = false;
};

}  // namespace

class GatedServer::Gate {
 public:
  // `answer` handles the whole head in a connection's buffer (leaving what follows it there)
  // and says whether the connection may carry another request.
  Gate(GateLimits limits, std::function<bool(Conn&)> answer)
      : limits_(limits), answer_(std::move(answer)) {
    wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wake_fd_ < 0) fail("the explorer's connection gate: eventfd failed");
    poller_ = std::thread([this] { poll_loop(); });
    for (int i = 0; i < std::max(1, limits_.workers); ++i)
      workers_.emplace_back([this] { work_loop(); });
  }

  ~Gate() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake();
    ready_cv_.notify_all();
    poller_.join();
    for (auto& t : workers_) t.join();
    for (auto& c : incoming_) ::close(c.fd);
    for (auto& c : ready_) ::close(c.fd);
    ::close(wake_fd_);
  }

  const GateLimits& limits() const { return limits_; }

  void add(int fd) {
    if (fd >= FD_SETSIZE) {  // httplib's request handling uses select() on it
      send_refusal(fd, 503, "Service Unavailable", "too many open connections");
      ::close(fd);
      return;
    }
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    const auto now = Clock::now();
    push_incoming(Conn{fd, {}, now + limits_.head_timeout, now});
  }

 private:
  void wake() {
    const uint64_t one = 1;
    (void)::write(wake_fd_, &one, sizeof one);
  }

  void push_incoming(Conn c) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) {
        ::close(c.fd);
        return;
      }
      incoming_.push_back(std::move(c));
    }
    wake();
  }

  void push_ready(Conn c) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ready_.push_back(std::move(c));
    }
    ready_cv_.notify_one();
  }

  // Refuses a head too long (414 when the request line alone is, else 431) or too slow
  // (408), then reads and drops what the client still sends for a moment, so that it reads
  // the answer rather than a reset connection.
  void refuse(Conn& c, int status) {
    if (status == 408) {
      send_refusal(
          c.fd, 408, "Request Timeout",
          cat("the request head did not arrive within ", limits_.head_timeout.count(), " ms"));
    } else if (c.buf.find('\n') == std::string::npos) {
      send_refusal(c.fd, 414, "URI Too Long",
                   cat("request line longer than ", limits_.max_head_bytes, " bytes"));
    } else {
      send_refusal(c.fd, 431, "Request Header Fields Too Large",
                   cat("request head longer than ", limits_.max_head_bytes, " bytes"));
    }
    ::shutdown(c.fd, SHUT_WR);
    c.draining = true;
    c.buf.clear();
    c.buf.shrink_to_fit();
    c.deadline = Clock::now() + kDrainTime;
  }

  // Reads what `c` has sent; false when the connection is done with (closed or handed on).
  bool on_readable(Conn& c) {
    char chunk[4096];
    for (;;) {
      const ssize_t n = ::recv(c.fd, chunk, sizeof chunk, MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      if (n <= 0) {
        ::close(c.fd);
        return false;
      }
      if (c.draining) {
        c.drained += static_cast<size_t>(n);
        if (c.drained <= kMaxDrainBytes) continue;
        ::close(c.fd);
        return false;
      }
      c.buf.append(chunk, static_cast<size_t>(n));
      if (const auto head = request_head_length(c.buf); head && *head <= limits_.max_head_bytes) {
        push_ready(std::move(c));
        return false;
      }
      if (c.buf.size() > limits_.max_head_bytes) refuse(c, 431);
    }
  }

  void poll_loop() {
    std::vector<Conn> waiting;
    std::vector<pollfd> fds;
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (stopping_) break;
        for (auto& c : incoming_) {
          // A kept-alive connection may hold its next head already (pipelining).
          const auto head = request_head_length(c.buf);
          if (head && *head <= limits_.max_head_bytes) {
            ready_.push_back(std::move(c));
            ready_cv_.notify_one();
          } else {
            waiting.push_back(std::move(c));
          }
        }
        incoming_.clear();
      }
      // Past the bound, the connections waiting longest are dropped for the new ones.
      if (waiting.size() > limits_.max_waiting) {
        std::sort(waiting.begin(), waiting.end(),
                  [](const Conn& a, const Conn& b) { return a.since < b.since; });
        const size_t drop = waiting.size() - limits_.max_waiting;
        for (size_t i = 0; i < drop; ++i) {
          send_refusal(waiting[i].fd, 503, "Service Unavailable", "too many waiting connections");
          ::close(waiting[i].fd);
        }
        waiting.erase(waiting.begin(), waiting.begin() + static_cast<std::ptrdiff_t>(drop));
      }
      fds.assign(1, pollfd{wake_fd_, POLLIN, 0});
      auto next = Clock::now() + std::chrono::seconds(1);
      for (const auto& c : waiting) {
        fds.push_back(pollfd{c.fd, POLLIN, 0});
        next = std::min(next, c.deadline);
      }
      const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now());
      ::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(0, wait.count()) + 1));
      if (fds[0].revents) {
        uint64_t count = 0;
        (void)::read(wake_fd_, &count, sizeof count);
      }
      const auto now = Clock::now();
      std::vector<Conn> kept;
      kept.reserve(waiting.size());
      for (size_t i = 0; i < waiting.size(); ++i) {
        Conn& c = waiting[i];
        if (fds[i + 1].revents && !on_readable(c)) continue;
        if (now >= c.deadline) {
          // A refused connection's moment is over; a kept-alive one that sent nothing more
          // just ends; a head that is late is answered.
          if (c.draining || (c.served > 0 && c.buf.empty())) {
            ::close(c.fd);
            continue;
          }
          refuse(c, 408);
        }
        kept.push_back(std::move(c));
      }
      waiting = std::move(kept);
    }
    for (auto& c : waiting) ::close(c.fd);
  }

  void work_loop() {
    for (;;) {
      Conn c;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_cv_.wait(lock, [this] { return stopping_ || !ready_.empty(); });
        if (stopping_) return;
        c = std::move(ready_.front());
        ready_.pop_front();
      }
      if (!answer_(c)) {
        ::close(c.fd);
        continue;
      }
      const auto now = Clock::now();
      c.served += 1;
      c.since = now;
      c.deadline = now + (c.buf.empty() ? limits_.idle_timeout : limits_.head_timeout);
      push_incoming(std::move(c));
    }
  }

  GateLimits limits_;
  std::function<bool(Conn&)> answer_;
  int wake_fd_ = -1;
  std::mutex mutex_;
  std::condition_variable ready_cv_;
  std::vector<Conn> incoming_;  // new or kept-alive connections, for the poller
  std::deque<Conn> ready_;      // whole heads, for the workers
  bool stopping_ = false;
  std::thread poller_;
  std::vector<std::thread> workers_;
};

GatedServer::GatedServer(GateLimits limits) {
  // httplib's pool only hands each accepted socket to the gate.
  new_task_queue = [] { return new httplib::ThreadPool(2); };
  gate_ = std::make_unique<Gate>(limits, [this, limits](Conn& c) {
    GateStream stream(c.fd, std::move(c.buf), Clock::now() + limits.write_timeout);
    const bool last = c.served + 1 >= limits.max_requests_per_connection;
    bool closed = false, has_body = false;
    const bool ok = process_request(stream, last, closed, [&](httplib::Request& req) {
      // Refused before routing (the explorer takes no body); its bytes must not be read as
      // the next request.
      const std::string length = req.get_header_value("Content-Length");
      has_body = req.has_header("Transfer-Encoding") || (!length.empty() && length != "0") ||
                 (req.method != "GET" && req.method != "HEAD");
    });
    c.buf = stream.leftover();
    return ok && !closed && !last && !has_body && !stream.failed();
  });
}

GatedServer::~GatedServer() {
  gate_.reset();  // before the base class's members the answers use
}

const GateLimits& GatedServer::limits() const {
  return gate_->limits();
}

bool GatedServer::listen_after_bind() {
  ::listen(svr_sock_, gate_->limits().backlog);  // a second listen() sets the backlog anew
  return httplib::Server::listen_after_bind();
}

bool GatedServer::process_and_close_socket(socket_t sock) {
  gate_->add(sock);
  return true;
}

}  // namespace lathe
