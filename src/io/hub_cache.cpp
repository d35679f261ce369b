#include "io/hub_cache.h"

#include <cctype>
#include <cstdlib>
#include <fstream>

namespace lathe::hub {
namespace fs = std::filesystem;

namespace {

bool id_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
}

// One part of ORG/NAME, as the Hub accepts repository names.
bool valid_part(std::string_view p) {
  if (p.empty() || p.size() > 96) return false;
  for (char c : p)
    if (!id_char(c)) return false;
  if (p.front() == '-' || p.front() == '.' || p.back() == '-' || p.back() == '.') return false;
  return p.find("--") == std::string_view::npos && p.find("..") == std::string_view::npos;
}

bool valid_revision(std::string_view r) {
  if (r.empty() || r.size() > 255 || r.front() == '/' || r.back() == '/') return false;
  for (char c : r)
    if (!id_char(c) && c != '/') return false;
  return r.find("..") == std::string_view::npos && r.find("//") == std::string_view::npos;
}

fs::path hf_home() {
  if (const char* v = std::getenv("HF_HOME"); v && *v) return v;
  if (const char* v = std::getenv("XDG_CACHE_HOME"); v && *v) return fs::path(v) / "huggingface";
  const char* home = std::getenv("HOME");
  return fs::path(home ? home : ".") / ".cache" / "huggingface";
}

std::optional<std::string> first_line(const fs::path& file) {
  std::ifstream in(file);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
  if (line.empty() || line.size() > 4096) return std::nullopt;
  return line;
}

}  // namespace

std::optional<ModelRef> parse_model_ref(std::string_view text) {
  ModelRef ref;
  if (const size_t at = text.find('@'); at != std::string_view::npos) {
    const std::string_view rev = text.substr(at + 1);
    if (!valid_revision(rev)) return std::nullopt;
    ref.revision = std::string(rev);
    ref.revision_given = true;
    text = text.substr(0, at);
  }
  const size_t slash = text.find('/');
  if (slash == std::string_view::npos || !valid_part(text.substr(0, slash)) ||
      !valid_part(text.substr(slash + 1)))
    return std::nullopt;
  ref.id = std::string(text);
  return ref;
}

fs::path cache_dir() {
  if (const char* v = std::getenv("HF_HUB_CACHE"); v && *v) return v;
  return hf_home() / "hub";
}

fs::path repo_dir(const fs::path& cache, const std::string& id) {
  std::string folder = "models--" + id;
  for (size_t p; (p = folder.find('/')) != std::string::npos;) folder.replace(p, 1, "--");
  return cache / folder;
}

bool is_commit_hash(std::string_view revision) {
  if (revision.size() != 40) return false;
  for (char c : revision)
    if (!std::isdigit(static_cast<unsigned char>(c)) && (c < 'a' || c > 'f')) return false;
  return true;
}

std::optional<fs::path> cached_snapshot(const fs::path& cache, const ModelRef& ref) {
  const fs::path repo = repo_dir(cache, ref.id);
  std::string commit = ref.revision;
  if (!is_commit_hash(commit)) {
    const auto line = first_line(repo / "refs" / ref.revision);
    if (!line || !is_commit_hash(*line)) return std::nullopt;
    commit = *line;
  }
  const fs::path snap = repo / "snapshots" / commit;
  std::error_code ec;
  if (!fs::exists(snap / "config.json", ec)) return std::nullopt;
  return snap;
}

bool offline_from_env() {
  const char* v = std::getenv("HF_HUB_OFFLINE");
  if (!v) return false;
  std::string s(v);
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s == "1" || s == "ON" || s == "YES" || s == "TRUE";
}

std::string endpoint_from_env() {
  std::string e = "https://huggingface.co";
  if (const char* v = std::getenv("HF_ENDPOINT"); v && *v) e = v;
  while (!e.empty() && e.back() == '/') e.pop_back();
  return e;
}

std::optional<std::string> token_from_env() {
  if (const char* v = std::getenv("HF_TOKEN"); v && *v) return std::string(v);
  if (const char* v = std::getenv("HF_TOKEN_PATH"); v && *v) return first_line(v);
  return first_line(hf_home() / "token");
}

}  // namespace lathe::hub
