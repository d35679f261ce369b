#include "io/checkpoint.h"

#include <algorithm>
#include <set>

#include "core/error.h"

namespace lathe {
namespace fs = std::filesystem;
namespace {

// eos_token_id may be an integer or a list of integers.
std::vector<int32_t> read_id_list(const JsonFields& f, const std::string& key) {
  std::vector<int32_t> ids;
  if (!f.has(key)) return ids;
  const Json& v = f.at(key);
  auto one = [&](const Json& x) {
    if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > INT32_MAX)
      fail(f.origin(), ": field \"", key, "\" must hold non-negative token ids, found ", x.dump());
    ids.push_back(static_cast<int32_t>(x.get<int64_t>()));
  };
  if (v.is_array()) {
    for (const Json& x : v) one(x);
  } else {
    one(v);
  }
  return ids;
}

std::optional<int32_t> read_id(const JsonFields& f, const std::string& key) {
  auto ids = read_id_list(f, key);
  if (ids.empty()) return std::nullopt;
  return ids.front();
}

}  // namespace

GenerationConfig read_generation_config(const fs::path& dir, const Json& config) {
  GenerationConfig g;
  JsonFields cfg(config, (dir / "config.json").string());
  g.eos_token_ids = read_id_list(cfg, "eos_token_id");
  g.bos_token_id = read_id(cfg, "bos_token_id");
  g.pad_token_id = read_id(cfg, "pad_token_id");
  const fs::path path = dir / "generation_config.json";
  if (!fs::exists(path)) return g;
  const Json json = read_json_file(path);
  JsonFields f(json, path.string());
  if (f.has("eos_token_id")) g.eos_token_ids = read_id_list(f, "eos_token_id");
  if (f.has("bos_token_id")) g.bos_token_id = read_id(f, "bos_token_id");
  if (f.has("pad_token_id")) g.pad_token_id = read_id(f, "pad_token_id");
  g.do_sample = f.get_or<bool>("do_sample", g.do_sample);
  g.temperature = f.get_or<double>("temperature", g.temperature);
  g.top_k = f.get_or<int64_t>("top_k", g.top_k);
  g.top_p = f.get_or<double>("top_p", g.top_p);
  g.min_p = f.get_or<double>("min_p", g.min_p);
  g.repetition_penalty = f.get_or<double>("repetition_penalty", g.repetition_penalty);
  if (f.has("max_new_tokens")) g.max_new_tokens = f.get<int64_t>("max_new_tokens");
  return g;
}

Checkpoint Checkpoint::open(const fs::path& dir) {
  Checkpoint c;
  c.dir_ = dir;
  if (!fs::is_directory(dir)) fail(dir.string(), ": not a directory");
  const fs::path config_path = dir / "config.json";
  if (!fs::exists(config_path)) fail(config_path.string(), ": missing file");
  c.config_ = read_json_file(config_path);
  if (!c.config_.is_object()) fail(config_path.string(), ": expected a JSON object");
  c.generation_ = read_generation_config(dir, c.config_);

  const fs::path index_path = dir / "model.safetensors.index.json";
  const fs::path single_path = dir / "model.safetensors";
  if (fs::exists(index_path)) {
    const Json index = read_json_file(index_path);
    JsonFields fields(index, index_path.string());
    const Json& map = fields.at("weight_map");
    if (!map.is_object()) fail(index_path.string(), ": field \"weight_map\" must be an object");
    std::map<std::string, size_t> file_index;
    for (const auto& [name, file] : map.items()) {
      if (!file.is_string())
        fail(index_path.string(), ": weight_map entry \"", name, "\" must name a file");
      const std::string shard = file.get<std::string>();
      if (shard.empty() || shard.find('/') != std::string::npos || shard == "..")
        fail(index_path.string(), ": weight_map entry \"", name, "\" names \"", shard,
             "\", which is not a file in this folder");
      auto it = file_index.find(shard);
      if (it == file_index.end()) {
        const fs::path shard_path = dir / shard;
        std::error_code ec;  // a name the file system refuses (too long) is missing too
        if (!fs::exists(shard_path, ec))
          fail(shard_path.string(), ": missing shard (listed in ", index_path.string(),
               " for tensor \"", name, "\")", ec ? ": " + ec.message() : std::string());
        c.files_.push_back(SafetensorsFile::open(shard_path));
        it = file_index.emplace(shard, c.files_.size() - 1).first;
      }
      if (!c.files_[it->second].contains(name))
        fail(c.files_[it->second].path().string(), ": missing tensor \"", name, "\" (listed in ",
             index_path.string(), ")");
      c.where_[name] = it->second;
    }
  } else if (fs::exists(single_path)) {
    c.files_.push_back(SafetensorsFile::open(single_path));
    for (const auto& [name, e] : c.files_[0].entries()) c.where_[name] = 0;
  } else {
    fail(dir.string(), ": no model.safetensors or model.safetensors.index.json");
  }
  return c;
}

std::string Checkpoint::architecture() const {
  auto it = config_.find("architectures");
  if (it == config_.end() || !it->is_array() || it->empty() || !(*it)[0].is_string()) return "";
  return (*it)[0].get<std::string>();
}

std::vector<std::string> Checkpoint::tensor_names() const {
  std::vector<std::string> names;
  for (const auto& [name, i] : where_) names.push_back(name);
  return names;
}

const SafetensorsEntry& Checkpoint::entry(const std::string& name) const {
  auto it = where_.find(name);
  if (it == where_.end()) fail(dir_.string(), ": no tensor \"", name, "\"");
  return files_[it->second].entries().at(stored(name));
}

std::string Checkpoint::file_of(const std::string& name) const {
  auto it = where_.find(name);
  return it == where_.end() ? dir_.string() : files_[it->second].path().string();
}

Tensor Checkpoint::tensor(const std::string& name) const {
  auto it = where_.find(name);
  if (it == where_.end()) fail(dir_.string(), ": no tensor \"", name, "\"");
  return files_[it->second].tensor(stored(name));
}

std::span<const uint8_t> Checkpoint::bytes(const std::string& name) const {
  auto it = where_.find(name);
  if (it == where_.end()) fail(dir_.string(), ": no tensor \"", name, "\"");
  return files_[it->second].bytes(stored(name));
}

void Checkpoint::release(const std::string& name) const {
  if (auto it = where_.find(name); it != where_.end()) files_[it->second].release(stored(name));
}

uint64_t Checkpoint::total_tensor_bytes() const {
  uint64_t total = 0;
  for (const auto& [name, i] : where_) {
    const auto& e = files_[i].entries().at(stored(name));
    total += e.end - e.begin;
  }
  return total;
}

const std::string& Checkpoint::stored(const std::string& name) const {
  auto it = stored_.find(name);
  return it == stored_.end() ? name : it->second;
}

Checkpoint Checkpoint::text_model(
    Json config, const std::string& what,
    const std::vector<std::pair<std::string, std::string>>& renames) const {
  Checkpoint t;
  t.dir_ = dir_;
  t.config_ = std::move(config);
  t.config_what_ = what;
  t.generation_ = generation_;
  t.files_ = files_;
  t.fetch_log_ = fetch_log_;
  for (const auto& entry : where_) {
    const std::string& name = entry.first;  // a plain reference: the lambda below reads it
    const size_t file = entry.second;
    const std::string& original = stored(name);
    auto rule = std::find_if(renames.begin(), renames.end(),
                             [&](const auto& r) { return name.starts_with(r.first); });
    if (rule == renames.end()) {
      ++t.left_out_;
      continue;
    }
    const std::string renamed = rule->second + name.substr(rule->first.size());
    if (!t.where_.emplace(renamed, file).second)
      fail(file_of(name), ": tensor \"", name, "\" and another both read as \"", renamed, "\"");
    if (renamed != original) t.stored_[renamed] = original;
  }
  return t;
}

}  // namespace lathe
