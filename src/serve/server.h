// `lathe lab serve`: the explorer over HTTP. A read-only server: GET and HEAD only, bound to
// 127.0.0.1 unless told otherwise, the JSON API under /api/ and the page's files from web/.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>

namespace lathe {

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                // 0: any free port
  std::filesystem::path data;     // searched recursively for Parquet files
  std::filesystem::path catalog;  // ranking files <task>-<view>.json (may be absent)
  std::filesystem::path web;      // index.html, app.js, style.css
  std::function<void(const std::string& url)> on_listening;  // called once bound
};

// Longest request target (path and query) accepted; longer ones get 414.
inline constexpr size_t kMaxTargetChars = 2048;

// Serves until SIGINT or SIGTERM. Returns the exit code; throws lathe::Error when the
// address cannot be bound or the page is missing. A missing data folder serves no rows until
// it appears.
int serve(const ServeOptions& opts);

// The file under `root` that a request for `raw_target` (as sent: percent-encoded, maybe with
// a query) names, or nullopt when it names none or tries to leave `root`: ".." or "." segments,
// encoded dots, slashes or backslashes, NUL, hidden files, a symbolic link to outside `root`,
// a folder, or a file type the page does not use.
std::optional<std::filesystem::path> resolve_static(const std::filesystem::path& root,
                                                    const std::string& raw_target);

// The Content-Type of a file the page uses ("text/html; charset=utf-8", ...).
std::string content_type_of(const std::filesystem::path& file);

}  // namespace lathe
