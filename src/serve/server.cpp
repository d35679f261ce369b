#include "serve/server.h"

#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fstream>
#include <iterator>
#include <thread>

#include <httplib.h>

#include "core/error.h"
#include "serve/api.h"
#include "serve/gate.h"
#include "serve/http.h"
#include "serve/store.h"

namespace lathe {
namespace fs = std::filesystem;

// The built-in page: web/ as it was when lathe was built (src/serve/CMakeLists.txt).
extern const EmbeddedFile kWebFiles[];
extern const size_t kWebFilesCount;

namespace {

constexpr uintmax_t kMaxStaticFileBytes = 8u << 20;

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decodes `s`; nullopt when an escape is malformed.
std::optional<std::string> percent_decode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size() || hex_value(s[i + 1]) < 0 || hex_value(s[i + 2]) < 0)
      return std::nullopt;
    out += static_cast<char>(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2]));
    i += 2;
  }
  return out;
}

bool is_loopback_name(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1" || host == "[::1]";
}

// The host part of a Host header ("127.0.0.1:8080" -> "127.0.0.1", "[::1]:80" -> "[::1]").
std::string host_part(const std::string& header) {
  if (header.starts_with("[")) return header.substr(0, header.find(']') + 1);
  return header.substr(0, header.find(':'));
}

void send_json(httplib::Response& res, int status, const Json& j) {
  res.status = status;
  res.set_header("Cache-Control", "no-store");
  res.set_content(j.dump(-1, ' ', false, Json::error_handler_t::replace),
                  "application/json; charset=utf-8");
}

void send_error(httplib::Response& res, int status, const std::string& message) {
  send_json(res, status, Json{{"error", message}, {"status", status}});
}

}  // namespace

std::string content_type_of(const fs::path& file) {
  const std::string ext = file.extension().string();
  if (ext == ".html") return "text/html; charset=utf-8";
  if (ext == ".js") return "text/javascript; charset=utf-8";
  if (ext == ".css") return "text/css; charset=utf-8";
  if (ext == ".svg") return "image/svg+xml";
  if (ext == ".png") return "image/png";
  if (ext == ".ico") return "image/x-icon";
  if (ext == ".txt") return "text/plain; charset=utf-8";
  return "";
}

std::optional<std::string> static_relative_path(const std::string& raw_target) {
  const std::string raw = raw_target.substr(0, raw_target.find_first_of("?#"));
  if (raw.empty() || raw[0] != '/' || raw.find('\\') != std::string::npos) return std::nullopt;
  // Encoded dots, slashes, backslashes and NUL are never part of a file name the page uses.
  const std::string lowered = [&] {
    std::string s = raw;
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  }();
  for (const char* bad : {"%2e", "%2f", "%5c", "%00", "%25"})
    if (lowered.find(bad) != std::string::npos) return std::nullopt;
  const auto decoded = percent_decode(raw);
  if (!decoded || decoded->find('\0') != std::string::npos) return std::nullopt;
  std::string rel = decoded->substr(1);
  if (rel.empty()) rel = "index.html";
  for (size_t start = 0; start <= rel.size();) {
    const size_t end = std::min(rel.find('/', start), rel.size());
    const std::string seg = rel.substr(start, end - start);
    if (seg.empty() || seg.starts_with(".")) return std::nullopt;  // "", ".", "..", hidden
    start = end + 1;
  }
  return rel;
}

std::optional<fs::path> resolve_static(const fs::path& root, const std::string& raw_target) {
  const auto rel = static_relative_path(raw_target);
  if (!rel) return std::nullopt;
  std::error_code ec;
  const fs::path base = fs::canonical(root, ec);
  if (ec) return std::nullopt;
  const fs::path file = fs::canonical(base / *rel, ec);  // resolves symbolic links
  if (ec) return std::nullopt;
  const std::string b = base.string() + "/", f = file.string();
  if (f.compare(0, b.size(), b) != 0) return std::nullopt;  // a link out of the folder
  if (!fs::is_regular_file(file, ec) || content_type_of(file).empty()) return std::nullopt;
  return file;
}

std::optional<std::string_view> builtin_page_file(std::string_view relative_path) {
  for (size_t i = 0; i < kWebFilesCount; ++i)
    if (relative_path == kWebFiles[i].name)
      return std::string_view(reinterpret_cast<const char*>(kWebFiles[i].data), kWebFiles[i].size);
  return std::nullopt;
}

namespace {

// The body and Content-Type of the page file that `target` names; nullopt when none.
std::optional<std::pair<std::string, std::string>> page_file(const ServeOptions& opts,
                                                             const std::string& target) {
  if (opts.web.empty()) {
    const auto rel = static_relative_path(target);
    if (!rel || content_type_of(*rel).empty()) return std::nullopt;
    const auto body = builtin_page_file(*rel);
    if (!body) return std::nullopt;
    return std::make_pair(std::string(*body), content_type_of(*rel));
  }
  const auto file = resolve_static(opts.web, target);
  if (!file || fs::file_size(*file) > kMaxStaticFileBytes) return std::nullopt;
  std::ifstream in(*file, std::ios::binary);
  std::string body{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  return std::make_pair(std::move(body), content_type_of(*file));
}

// Why `host:port` cannot be listened on, from a bind of our own: httplib's failed bind keeps
// no errno.
std::string listen_failure(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0)
    return cat("no such address (", ::gai_strerror(rc), "); check --host");
  int err = 0;
  for (const addrinfo* a = found; a; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      err = errno;
      continue;
    }
    int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    err = ::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 1) == 0 ? 0 : errno;
    ::close(fd);
    if (err == 0) break;
  }
  ::freeaddrinfo(found);
  switch (err) {
    case EADDRINUSE:
      return "in use by another server; --port 0 picks a free port";
    case EACCES:
    case EPERM:
      return "permission denied (ports below 1024 need privileges); --port 0 picks a free port";
    case EADDRNOTAVAIL:
      return "no such address on this machine; check --host";
    case 0:
      return "the server could not bind it";
    default:
      return std::strerror(err);
  }
}

}  // namespace

void configure_explorer(httplib::Server& svr, DataStore& store, const ServeOptions& opts) {
  // SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, with which a second explorer
  // started on a port in use binds it too and the two silently share its requests.
  svr.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  svr.set_payload_max_length(1024);
  svr.set_tcp_nodelay(true);  // headers and body go out in two writes: no Nagle delay between
  svr.set_read_timeout(5);
  svr.set_write_timeout(5);
  svr.set_keep_alive_timeout(5);
  svr.set_default_headers(
      {{"X-Content-Type-Options", "nosniff"},
       {"X-Frame-Options", "DENY"},
       {"Referrer-Policy", "no-referrer"},
       {"Content-Security-Policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"}});
  const bool loopback = is_loopback_name(opts.host);

  svr.set_pre_routing_handler([loopback](const httplib::Request& req, httplib::Response& res) {
    if (req.method != "GET" && req.method != "HEAD") {
      res.set_header("Allow", "GET, HEAD");
      res.set_header("Connection", "close");
      send_error(res, 405, "read-only: only GET and HEAD are served");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (req.target.size() > kMaxTargetChars) {
      send_error(res, 414, cat("request target longer than ", kMaxTargetChars, " characters"));
      return httplib::Server::HandlerResponse::Handled;
    }
    const std::string length = req.get_header_value("Content-Length");
    if (req.has_header("Transfer-Encoding") || (!length.empty() && length != "0")) {
      res.set_header("Connection", "close");
      send_error(res, 413, "requests carry no body here");
      return httplib::Server::HandlerResponse::Handled;
    }
    // A page elsewhere cannot reach a loopback server through a DNS name it controls.
    if (loopback && !is_loopback_name(host_part(req.get_header_value("Host")))) {
      send_error(res, 403, "Host must be 127.0.0.1, localhost or [::1]");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });

  svr.Get(".*", [&store, &opts](const httplib::Request& req, httplib::Response& res) {
    try {
      if (req.path.starts_with("/api/")) {
        ApiParams params;
        for (const auto& [k, v] : req.params) params.emplace(k, v);
        const auto snap = store.get();
        send_json(res, 200, api_answer(*snap, req.path.substr(5), params));
        return;
      }
      auto file = page_file(opts, req.target);
      if (!file) {
        send_error(res, 404, "not found");
        return;
      }
      res.set_header("Cache-Control", "no-cache");
      res.set_content(std::move(file->first), file->second.c_str());
    } catch (const ApiError& e) {
      send_error(res, e.status, e.what());
    } catch (const std::exception& e) {
      send_error(res, 500, e.what());
    }
  });
}

int serve(const ServeOptions& opts) {
  if (opts.web.empty() && !builtin_page_file("index.html"))
    fail("lathe was built without the explorer's page (web/index.html); pass --web DIR");
  if (!opts.web.empty() && !fs::is_regular_file(opts.web / "index.html"))
    fail((opts.web / "index.html").string(), ": the explorer's page is missing (--web)");
  // SIGINT and SIGTERM are taken by one thread, which stops the server; every other thread
  // has them blocked: httplib's and the gate's, and the Parquet reader's pool, which the
  // store starts (blocked after it, a SIGTERM could land there and kill the server, exit 143).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  DataStore store(opts.data, opts.catalog);

  // Request heads are read by the gate, bounded in size and time (serve/gate.h).
  GatedServer svr;
  configure_explorer(svr, store, opts);

  const int port = opts.port == 0 ? svr.bind_to_any_port(opts.host)
                                  : (svr.bind_to_port(opts.host, opts.port) ? opts.port : -1);
  if (port < 0)
    fail(opts.host, ":", opts.port,
         ": cannot listen there: ", listen_failure(opts.host, opts.port));
  const std::string host =
      opts.host.find(':') != std::string::npos ? "[" + opts.host + "]" : opts.host;
  if (opts.on_listening) opts.on_listening(cat("http://", host, ":", port, "/"));

  std::thread stopper([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    svr.stop();
  });
  const bool ok = svr.listen_after_bind();
  pthread_kill(stopper.native_handle(), SIGTERM);  // wakes the stopper when listening failed
  stopper.join();
  if (!ok) fail(opts.host, ":", port, ": the server stopped: accepting connections failed");
  return 0;
}

}  // namespace lathe
