#include "io/hub_http.h"

#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "core/version.h"
#include "io/libcurl.h"

namespace lathe::hub {

// ---- Digest ----------------------------------------------------------------------------

struct Digest::Impl {
  Kind kind;
  int64_t size;
  EVP_MD_CTX* ctx = nullptr;
};

Digest::Digest(Kind kind, int64_t size) : p_(std::make_unique<Impl>()) {
  p_->kind = kind;
  p_->size = size;
  p_->ctx = EVP_MD_CTX_new();
  if (!p_->ctx) fail("OpenSSL: cannot create a hash context");
  reset();
}

Digest::~Digest() {
  EVP_MD_CTX_free(p_->ctx);
}

void Digest::reset() {
  const EVP_MD* md = p_->kind == Kind::Sha256 ? EVP_sha256() : EVP_sha1();
  if (EVP_DigestInit_ex(p_->ctx, md, nullptr) != 1) fail("OpenSSL: cannot start a hash");
  if (p_->kind == Kind::GitBlobSha1) {
    const std::string header = "blob " + std::to_string(p_->size);
    update(header.data(), header.size() + 1);  // with its terminating NUL, as git hashes it
  }
}

void Digest::update(const void* data, size_t n) {
  if (EVP_DigestUpdate(p_->ctx, data, n) != 1) fail("OpenSSL: cannot hash");
}

std::string Digest::hex() {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (EVP_DigestFinal_ex(p_->ctx, out, &n) != 1) fail("OpenSSL: cannot end a hash");
  std::string s;
  char two[3];
  for (unsigned int i = 0; i < n; ++i) {
    std::snprintf(two, sizeof two, "%02x", out[i]);
    s += two;
  }
  return s;
}

// ---- HttpClient ------------------------------------------------------------------------

namespace {

constexpr size_t kMaxHeaderValue = 256;  // longer header values are cut (only a few are read)

// The headers of the response being received; a new status line (the next response of a
// redirect chain) starts them again.
struct Headers {
  long status = 0;
  std::string error_code, content_range;
};

std::string trimmed(const char* data, size_t n) {
  std::string s(data, n);
  while (!s.empty() && (s.back() == '\r' || s.back() == '\n' || s.back() == ' ')) s.pop_back();
  size_t start = 0;
  while (start < s.size() && s[start] == ' ') ++start;
  s = s.substr(start);
  if (s.size() > kMaxHeaderValue) s.resize(kMaxHeaderValue);
  return s;
}

size_t on_header(char* data, size_t size, size_t count, void* user) {
  auto* h = static_cast<Headers*>(user);
  const size_t n = size * count;
  const std::string line = trimmed(data, std::min(n, kMaxHeaderValue + 64));
  if (line.rfind("HTTP/", 0) == 0) {
    *h = Headers{};
    const size_t sp = line.find(' ');
    if (sp != std::string::npos) h->status = std::strtol(line.c_str() + sp + 1, nullptr, 10);
    return n;
  }
  const size_t colon = line.find(':');
  if (colon == std::string::npos) return n;
  std::string name = line.substr(0, colon);
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::string value = trimmed(line.data() + colon + 1, line.size() - colon - 1);
  if (name == "x-error-code") h->error_code = value;
  if (name == "content-range") h->content_range = value;
  return n;
}

// An answer without a transfer failure that still means "try again": the connection was
// cut, reset or stalled.
bool retryable(CURLcode rc) {
  return rc == CURLE_PARTIAL_FILE || rc == CURLE_RECV_ERROR || rc == CURLE_SEND_ERROR ||
         rc == CURLE_GOT_NOTHING || rc == CURLE_OPERATION_TIMEDOUT;
}

struct GetState {
  Headers headers;
  std::string* body = nullptr;
  size_t max_bytes = 0;
  bool too_large = false;
};

size_t on_get_data(char* data, size_t size, size_t count, void* user) {
  auto* s = static_cast<GetState*>(user);
  const size_t n = size * count;
  if (s->body->size() + n > s->max_bytes) {
    s->too_large = true;
    return 0;
  }
  s->body->append(data, n);
  return n;
}

struct DownloadState {
  Headers headers;
  int fd = -1;
  int64_t offset = 0;  // bytes of the file on disk
  int64_t max_size = 0;
  Digest* digest = nullptr;
  const std::function<void(int64_t)>* on_bytes = nullptr;
  const std::atomic<bool>* cancel = nullptr;
  bool decided = false, discard = false;
  std::string error;  // why the write callback stopped the transfer
};

size_t on_download_data(char* data, size_t size, size_t count, void* user) {
  auto* s = static_cast<DownloadState*>(user);
  const size_t n = size * count;
  const long status = s->headers.status;
  if (status >= 300 && status < 400) return n;  // the body of a redirect
  if (!s->decided) {
    s->decided = true;
    if (status == 206) {
      // "bytes START-END/TOTAL": the rest must start where the file ends.
      const std::string& cr = s->headers.content_range;
      const std::string want = "bytes " + std::to_string(s->offset) + "-";
      if (cr.rfind(want, 0) != 0) {
        s->error = cat("answered a request for bytes from ", s->offset, " with Content-Range \"",
                       cr, "\"");
        return 0;
      }
    } else if (status == 200) {
      if (s->offset > 0) {  // the server ignored the Range request: start again
        if (::ftruncate(s->fd, 0) != 0 || ::lseek(s->fd, 0, SEEK_SET) != 0) {
          s->error = cat("cannot truncate the partial file: ", std::strerror(errno));
          return 0;
        }
        (*s->on_bytes)(-s->offset);
        s->offset = 0;
        s->digest->reset();
      }
    } else {
      s->discard = true;  // an error page
    }
  }
  if (s->discard) return n;
  if (s->offset + static_cast<int64_t>(n) > s->max_size) {
    s->error = cat("sent more than the ", s->max_size, " bytes the listing gives");
    return 0;
  }
  for (size_t done = 0; done < n;) {
    const ssize_t w = ::write(s->fd, data + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      s->error = cat("cannot write the download: ", std::strerror(w < 0 ? errno : ENOSPC));
      return 0;
    }
    done += static_cast<size_t>(w);
  }
  s->digest->update(data, n);
  s->offset += static_cast<int64_t>(n);
  (*s->on_bytes)(static_cast<int64_t>(n));
  return n;
}

int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* s = static_cast<DownloadState*>(user);
  return s->cancel->load() ? 1 : 0;
}

}  // namespace

struct HttpClient::Impl {
  CURL* curl = nullptr;
  curl_slist* headers = nullptr;
  char error[CURL_ERROR_SIZE] = {};

  void prepare(const std::string& url) {
    libcurl().easy_reset(curl);
    error[0] = '\0';
    libcurl().easy_setopt(curl, CURLOPT_URL, url.c_str());
    libcurl().easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
    libcurl().easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
    libcurl().easy_setopt(curl, CURLOPT_MAXREDIRS, 10L);
    libcurl().easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    libcurl().easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    libcurl().easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 30L);
    // A transfer slower than 1 byte/s for 60 s has stalled.
    libcurl().easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
    libcurl().easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, 60L);
    libcurl().easy_setopt(curl, CURLOPT_USERAGENT, (std::string("lathe/") + kLatheVersion).c_str());
    libcurl().easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    if (headers) libcurl().easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  }

  HttpStatus finish(CURLcode rc, const Headers& h, const std::string& why) {
    HttpStatus st;
    libcurl().easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &st.code);
    st.error_code = h.error_code;
    if (rc != CURLE_OK) {
      st.transport_error = !why.empty() ? why : error[0] ? error : libcurl().easy_strerror(rc);
      st.cut_short = retryable(rc);
    }
    return st;
  }
};

HttpClient::HttpClient(std::optional<std::string> token) : p_(std::make_unique<Impl>()) {
  p_->curl = libcurl().easy_init();
  if (!p_->curl) fail("libcurl: cannot create a request");
  if (token)
    p_->headers = libcurl().slist_append(nullptr, ("Authorization: Bearer " + *token).c_str());
}

HttpClient::~HttpClient() {
  libcurl().slist_free_all(p_->headers);
  libcurl().easy_cleanup(p_->curl);
}

HttpStatus HttpClient::get(const std::string& url, std::string& body, size_t max_bytes) {
  p_->prepare(url);
  GetState s;
  s.body = &body;
  s.max_bytes = max_bytes;
  body.clear();
  libcurl().easy_setopt(p_->curl, CURLOPT_WRITEFUNCTION, on_get_data);
  libcurl().easy_setopt(p_->curl, CURLOPT_WRITEDATA, &s);
  libcurl().easy_setopt(p_->curl, CURLOPT_HEADERFUNCTION, on_header);
  libcurl().easy_setopt(p_->curl, CURLOPT_HEADERDATA, &s.headers);
  libcurl().easy_setopt(p_->curl, CURLOPT_ACCEPT_ENCODING, "");
  libcurl().easy_setopt(p_->curl, CURLOPT_TIMEOUT, 300L);
  const CURLcode rc = libcurl().easy_perform(p_->curl);
  return p_->finish(rc, s.headers,
                    s.too_large ? cat("the answer is larger than ", max_bytes >> 20, " MiB") : "");
}

HttpStatus HttpClient::download(const std::string& url, int fd, int64_t offset, int64_t max_size,
                                Digest& digest, const std::function<void(int64_t)>& on_bytes,
                                const std::atomic<bool>& cancel) {
  p_->prepare(url);
  DownloadState s;
  s.fd = fd;
  s.offset = offset;
  s.max_size = max_size;
  s.digest = &digest;
  s.on_bytes = &on_bytes;
  s.cancel = &cancel;
  const std::string range = std::to_string(offset) + "-";
  if (offset > 0) libcurl().easy_setopt(p_->curl, CURLOPT_RANGE, range.c_str());
  libcurl().easy_setopt(p_->curl, CURLOPT_WRITEFUNCTION, on_download_data);
  libcurl().easy_setopt(p_->curl, CURLOPT_WRITEDATA, &s);
  libcurl().easy_setopt(p_->curl, CURLOPT_HEADERFUNCTION, on_header);
  libcurl().easy_setopt(p_->curl, CURLOPT_HEADERDATA, &s.headers);
  libcurl().easy_setopt(p_->curl, CURLOPT_NOPROGRESS, 0L);
  libcurl().easy_setopt(p_->curl, CURLOPT_XFERINFOFUNCTION, on_progress);
  libcurl().easy_setopt(p_->curl, CURLOPT_XFERINFODATA, &s);
  const CURLcode rc = libcurl().easy_perform(p_->curl);
  HttpStatus st =
      p_->finish(rc, s.headers, rc == CURLE_ABORTED_BY_CALLBACK ? "cancelled" : s.error);
  if (!s.error.empty()) st.cut_short = false;
  return st;
}

std::string url_encode(const std::string& text, bool keep_slash) {
  std::string out;
  char hex[4];
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' ||
        (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      std::snprintf(hex, sizeof hex, "%%%02X", c);
      out += hex;
    }
  }
  return out;
}

}  // namespace lathe::hub
