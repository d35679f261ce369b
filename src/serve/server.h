// `lathe lab serve`: the explorer over HTTP. A read-only server: GET and HEAD only, bound to
// 127.0.0.1 unless told otherwise, the JSON API under /api/ and the page, built into the
// binary from web/ (or read from a folder with --web, for work on the page).
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace lathe {

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                // 0: any free port
  std::filesystem::path data;     // searched recursively for Parquet files
  std::filesystem::path catalog;  // ranking files <task>-<view>.json (may be absent)
  std::filesystem::path web;      // index.html, app.js, style.css; empty: the built-in page
  std::function<void(const std::string& url)> on_listening;  // called once bound
};

// Longest request target (path and query) accepted; longer ones get 414.
inline constexpr size_t kMaxTargetChars = 2048;

// Serves until SIGINT or SIGTERM. Returns the exit code; throws lathe::Error when the
// address cannot be bound (saying why: in use, permission denied, no such address) or the
// page is missing. A missing data folder serves no rows until
// it appears.
int serve(const ServeOptions& opts);

// The page file that a request target (as sent: percent-encoded, maybe with a query) names,
// relative to the page's folder ("index.html" for "/"), or nullopt when it names none or
// tries to leave the folder: ".." or "." segments, encoded dots, slashes or backslashes, NUL,
// hidden files.
std::optional<std::string> static_relative_path(const std::string& raw_target);

// The file under `root` that `raw_target` names (static_relative_path), or nullopt when there
// is none, it is a symbolic link to outside `root`, a folder, or a file type the page does
// not use.
std::optional<std::filesystem::path> resolve_static(const std::filesystem::path& root,
                                                    const std::string& raw_target);

// A file of the built-in page (web/ when lathe was built), by its path relative to web/.
std::optional<std::string_view> builtin_page_file(std::string_view relative_path);

// The Content-Type of a file the page uses ("text/html; charset=utf-8", ...), or "" for any
// other kind of file.
std::string content_type_of(const std::filesystem::path& file);

// One file built into the binary (cmake/EmbedFiles.cmake writes the table).
struct EmbeddedFile {
  const char* name;  // relative to the folder it came from
  const unsigned char* data;
  size_t size;
};

}  // namespace lathe
