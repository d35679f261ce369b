// Reading JSON files that come from strangers (config.json, tokenizer.json, indexes).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace lathe {

using Json = nlohmann::json;

// Largest JSON file lathe reads (tokenizer.json files of 200k-token vocabularies are ~30 MB).
inline constexpr std::uintmax_t kMaxJsonFileBytes = 512u << 20;

// Parses a JSON file. Throws lathe::Error naming the file (and the byte offset of a syntax
// error) when it is missing, too large or malformed. Nesting deeper than 512 levels is
// rejected, so hostile input cannot exhaust the stack, and so is text whose parsed form would
// take more than about 20 times its size in memory (plus 16 MiB), e.g. millions of nested or
// empty arrays, so it cannot exhaust memory either.
Json read_json_file(const std::filesystem::path& path);

// Parses JSON text; `origin` names where the text came from in error messages.
Json parse_json(const std::string& text, const std::string& origin);

// Typed access to one JSON object with errors that name the file and the field:
//   JsonFields cfg(json, "config.json");
//   int64_t n = cfg.get<int64_t>("hidden_size");
//   double eps = cfg.get_or<double>("rms_norm_eps", 1e-6);
class JsonFields {
 public:
  JsonFields(const Json& object, std::string origin);

  bool has(const std::string& key) const;  // present and not null
  const Json& at(const std::string& key) const;
  const std::string& origin() const { return origin_; }
  const Json& json() const { return object_; }

  template <class T>
  T get(const std::string& key) const;
  template <class T>
  T get_or(const std::string& key, T fallback) const {
    return has(key) ? get<T>(key) : fallback;
  }
  template <class T>
  std::optional<T> get_optional(const std::string& key) const {
    return has(key) ? std::optional<T>(get<T>(key)) : std::nullopt;
  }

 private:
  const Json& object_;
  std::string origin_;
};

template <>
bool JsonFields::get<bool>(const std::string& key) const;
template <>
int64_t JsonFields::get<int64_t>(const std::string& key) const;
template <>
double JsonFields::get<double>(const std::string& key) const;
template <>
std::string JsonFields::get<std::string>(const std::string& key) const;

}  // namespace lathe
