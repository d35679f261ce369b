// The explorer's connections before cpp-httplib sees them. One thread reads the request head
// of every connection with poll(), bounded in bytes and in time; only a whole head goes on to
// a worker thread, which answers it with httplib's request handling. A slow or oversized
// client so costs a poll entry and at most GateLimits::max_head_bytes, never a worker.
//
// Why not httplib's own limits: Debian's cpp-httplib 0.11.4 reads each head in a worker of a
// fixed pool, waiting up to its read timeout per byte-less read, so a few clients sending a
// header line every second hold every worker; and it checks CPPHTTPLIB_HEADER_MAX_LENGTH and
// CPPHTTPLIB_REQUEST_URI_MAX_LENGTH only after reading the whole line into memory (the macros
// are fixed in its shared library, not settable here). docs/limits.md lists the numbers.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string_view>

#include <httplib.h>

namespace lathe {

struct GateLimits {
  size_t max_head_bytes = 8 << 10;                 // request line and headers; past it 414 or 431
  std::chrono::milliseconds head_timeout{10000};   // a whole head within this, else 408
  std::chrono::milliseconds idle_timeout{5000};    // a kept-alive connection's next request
  std::chrono::milliseconds write_timeout{10000};  // a whole response taken within this
  size_t max_waiting = 256;  // connections waiting for a head; a new one past it drops the oldest
  int workers = 4;           // threads answering whole requests
  int max_requests_per_connection = 100;
  int backlog = 512;  // connections the kernel completes before they are accepted (httplib: 5)
};

// The length of the request head at the start of `data`, blank line included ("\r\n\r\n", or
// "\n\n" from a client that ends lines with LF alone); nullopt while it has none.
std::optional<size_t> request_head_length(std::string_view data);

// An httplib::Server whose connections pass the gate first. Set it up as any httplib::Server
// (handlers, bind_to_port, listen_after_bind, stop); its read timeout and thread pool are not
// used for reading heads.
class GatedServer : public httplib::Server {
 public:
  explicit GatedServer(GateLimits limits = {});
  ~GatedServer() override;
  GatedServer(const GatedServer&) = delete;
  GatedServer& operator=(const GatedServer&) = delete;

  const GateLimits& limits() const;

  // httplib's, after widening the listening socket's backlog to GateLimits::backlog: with
  // httplib's 5, a burst of connections waits for the kernel's retries, seconds each.
  bool listen_after_bind();

 private:
  class Gate;
  // Called by httplib's accept loop for each new connection: hands it to the gate.
  bool process_and_close_socket(socket_t sock) override;

  std::unique_ptr<Gate> gate_;
};

}  // namespace lathe
