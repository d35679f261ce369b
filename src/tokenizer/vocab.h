// Token <-> id tables shared by the models.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "tokenizer/components.h"

namespace lathe::tok {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

class Vocab {
 public:
  // Reads a {"token": id, ...} object; ids must be integers in [0, 2^31).
  void read_object(const JsonFields& f, const std::string& key);
  void add(std::string token, int32_t id);

  std::optional<int32_t> find(std::string_view token) const {
    auto it = ids_.find(token);
    return it == ids_.end() ? std::nullopt : std::optional<int32_t>(it->second);
  }
  const std::string* token(int32_t id) const {
    auto it = tokens_.find(id);
    return it == tokens_.end() ? nullptr : &it->second;
  }
  void for_each(const std::function<void(const std::string&, int32_t)>& f) const {
    for (const auto& [t, id] : ids_) f(t, id);
  }
  size_t size() const { return ids_.size(); }

 private:
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> ids_;
  std::unordered_map<int32_t, std::string> tokens_;
};

// An id read from JSON: an integer in [0, 2^31).
int32_t read_id(const Json& v, const std::string& origin, const std::string& what);

}  // namespace lathe::tok
