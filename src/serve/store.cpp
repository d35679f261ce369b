#include "serve/store.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"
#include "lab/dataset.h"

namespace lathe {
namespace fs = std::filesystem;

namespace {

bool is_ranked_view(const std::string& v) {
  for (const char* r : kRankedViews)
    if (v == r) return true;
  return false;
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A ranking file of the catalog folder: "<task>-<view>.json" with a ranked view.
bool is_ranking_file(const fs::path& p) {
  if (p.extension() != ".json") return false;
  const std::string stem = p.stem().string();
  const size_t dash = stem.rfind('-');
  return dash != std::string::npos && is_ranked_view(stem.substr(dash + 1));
}

}  // namespace

void index_rows(Snapshot& snap) {
  snap.lower_ids.clear();
  snap.keys.clear();
  for (const auto& r : snap.rows) {
    snap.lower_ids.push_back(lower(r.model_id));
    snap.keys.push_back(r.key());
  }
}

std::string transformers_label(const LabRow& row) {
  return row.transformers_version.empty() ? "none" : row.transformers_version;
}

bool version_less(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) &&
        std::isdigit(static_cast<unsigned char>(b[j]))) {
      size_t ie = i, je = j;
      while (ie < a.size() && std::isdigit(static_cast<unsigned char>(a[ie]))) ++ie;
      while (je < b.size() && std::isdigit(static_cast<unsigned char>(b[je]))) ++je;
      const std::string na = a.substr(i, ie - i), nb = b.substr(j, je - j);
      const std::string ta = na.substr(std::min(na.find_first_not_of('0'), na.size()));
      const std::string tb = nb.substr(std::min(nb.find_first_not_of('0'), nb.size()));
      if (ta.size() != tb.size()) return ta.size() < tb.size();
      if (ta != tb) return ta < tb;
      i = ie;
      j = je;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i;
      ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

DataStore::DataStore(fs::path data, fs::path catalog)
    : data_(std::move(data)), catalog_(std::move(catalog)) {
  sig_ = scan();
  snap_ = load(sig_, 1);
  last_check_ = std::chrono::steady_clock::now();
}

DataStore::Signature DataStore::scan() const {
  Signature sig;
  auto add = [&](const fs::path& p) {
    std::error_code ec;
    const auto size = fs::file_size(p, ec);
    if (ec) return;
    const auto mtime = fs::last_write_time(p, ec);
    if (ec) return;
    sig.emplace_back(p.string(), size, mtime.time_since_epoch().count());
  };
  std::error_code ec;
  if (fs::is_regular_file(data_, ec) && data_.extension() == ".parquet") {
    add(data_);
  } else if (fs::is_directory(data_, ec)) {
    fs::recursive_directory_iterator it(data_, fs::directory_options::skip_permission_denied, ec);
    for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      const fs::path& p = it->path();
      const std::string name = p.filename().string();
      // Hidden folders and a sweep's built checkpoints hold no results.
      if (it->is_directory(ec) && (name.starts_with(".") || name == "models" || name == "logs")) {
        it.disable_recursion_pending();
        continue;
      }
      if (!it->is_regular_file(ec)) continue;
      if (p.extension() == ".parquet" || name == "catalog.json") add(p);
    }
  }
  if (fs::is_directory(catalog_, ec))
    for (const auto& e : fs::directory_iterator(catalog_, ec))
      if (e.is_regular_file(ec) && is_ranking_file(e.path())) add(e.path());
  std::sort(sig.begin(), sig.end());
  return sig;
}

std::shared_ptr<const Snapshot> DataStore::load(const Signature& sig, uint64_t generation) {
  auto s = std::make_shared<Snapshot>();
  s->generation = generation;
  s->loaded_at = utc_now();
  std::map<std::string, FileContents> files;
  for (const auto& [file, size, mtime] : sig) {
    const auto known = files_.find(file);
    FileContents c;
    if (known != files_.end() && known->second.size == size && known->second.mtime == mtime) {
      c = known->second;
    } else {
      c.size = size;
      c.mtime = mtime;
      const fs::path p(file);
      try {
        if (p.extension() == ".parquet")
          c.rows = std::make_shared<const std::vector<LabRow>>(read_parquet(p));
        else
          c.catalog = std::make_shared<const Catalog>(read_catalog(p));
      } catch (const std::exception& e) {
        c.error = e.what();
      }
      ++s->files_read;
    }
    files.emplace(file, std::move(c));
  }
  files_ = std::move(files);

  std::map<std::pair<std::string, std::string>, Catalog> from_sweeps;
  for (const auto& [file, c] : files_) {
    if (!c.error.empty()) {
      s->errors.push_back(c.error);
      continue;
    }
    if (c.rows) {
      s->rows.insert(s->rows.end(), c.rows->begin(), c.rows->end());
      s->files.push_back(file);
      continue;
    }
    if (!is_ranked_view(c.catalog->view)) continue;  // a sweep of local models ranks nothing
    s->files.push_back(file);
    const bool from_catalog_dir = fs::path(file).filename() != "catalog.json";
    auto& target = from_catalog_dir ? s->rankings : from_sweeps;
    const auto key = std::make_pair(c.catalog->task, c.catalog->view);
    if (!target.count(key) || target[key].snapshot < c.catalog->snapshot) target[key] = *c.catalog;
  }
  for (auto& [key, c] : from_sweeps)
    if (!s->rankings.count(key)) s->rankings[key] = std::move(c);
  index_rows(*s);
  return s;
}

bool DataStore::refresh() {
  std::lock_guard<std::mutex> one(refresh_mutex_);
  Signature sig = scan();
  uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(snap_mutex_);
    last_check_ = std::chrono::steady_clock::now();
    if (sig == sig_) return false;
    generation = snap_->generation + 1;
  }
  auto next = load(sig, generation);
  std::lock_guard<std::mutex> lock(snap_mutex_);
  snap_ = std::move(next);
  sig_ = std::move(sig);
  return true;
}

std::shared_ptr<const Snapshot> DataStore::get() {
  bool stale;
  {
    std::lock_guard<std::mutex> lock(snap_mutex_);
    stale = std::chrono::steady_clock::now() - last_check_ >= std::chrono::seconds(1);
  }
  // Requests that arrive while another rescans are answered from the current snapshot.
  if (stale && refresh_mutex_.try_lock()) {
    refresh_mutex_.unlock();
    refresh();
  }
  std::lock_guard<std::mutex> lock(snap_mutex_);
  return snap_;
}

}  // namespace lathe
