// HTTP for `lathe pull`, on libcurl: a bounded GET of a JSON document, and a file download
// that resumes with a Range request and hashes what it writes. Redirects are followed; the
// Authorization header is sent to the endpoint's own host only (libcurl drops it when a
// redirect leaves that host, as the Hub's redirects to its file CDN need).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace lathe::hub {

// What a request got back: the final HTTP status (0 when no answer came), the Hub's
// X-Error-Code header, the transport's error when it failed.
struct HttpStatus {
  long code = 0;
  std::string error_code;       // "GatedRepo", "RepoNotFound", "RevisionNotFound", ...
  std::string transport_error;  // libcurl's message when the transfer itself failed
  bool cut_short = false;       // the connection ended before the announced length
  bool ok() const { return transport_error.empty() && code >= 200 && code < 300; }
};

// An incremental hash of the bytes a download writes (sha256, or git's blob sha1).
class Digest {
 public:
  enum class Kind { Sha256, GitBlobSha1 };
  // For GitBlobSha1, `size` starts the hash with git's "blob SIZE\0" header.
  Digest(Kind kind, int64_t size);
  ~Digest();
  Digest(const Digest&) = delete;
  Digest& operator=(const Digest&) = delete;
  void reset();
  void update(const void* data, size_t n);
  std::string hex();  // ends the hash

 private:
  struct Impl;
  std::unique_ptr<Impl> p_;
};

class HttpClient {
 public:
  // `token`: sent as "Authorization: Bearer TOKEN" (to the first host only).
  explicit HttpClient(std::optional<std::string> token);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // GET `url` into `body`, at most `max_bytes` (a larger answer is a transport error).
  HttpStatus get(const std::string& url, std::string& body, size_t max_bytes);

  // Downloads `url` into the open file `fd`, which already holds `offset` bytes of it (their
  // hash already in `digest`): asks for the rest with a Range request and appends; when the
  // server sends the whole file instead (200), the file and the digest start again. Never
  // writes past `max_size` bytes in all (more is a transport error). `on_bytes` is told every
  // chunk written (a negative count when a restart dropped bytes); `cancel` set by another
  // thread stops the transfer.
  HttpStatus download(const std::string& url, int fd, int64_t offset, int64_t max_size,
                      Digest& digest, const std::function<void(int64_t)>& on_bytes,
                      const std::atomic<bool>& cancel);

 private:
  struct Impl;
  std::unique_ptr<Impl> p_;
};

// `text` with every character outside [A-Za-z0-9-_.~/] percent-encoded except '/' when
// `keep_slash`.
std::string url_encode(const std::string& text, bool keep_slash);

}  // namespace lathe::hub
