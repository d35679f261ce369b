#include "io/json.h"

#include <cmath>
#include <fstream>
#include <iterator>
#include <system_error>

#include "core/error.h"

namespace lathe {
namespace {

constexpr int kMaxJsonDepth = 512;

// Rejects deep nesting before the DOM is built (nlohmann's parser itself is iterative, but a
// deep document is never a legitimate config and costs memory per level).
void check_depth(const std::string& text, const std::string& origin) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth)
        fail(origin, ": JSON nested deeper than ", kMaxJsonDepth, " levels at byte ", i);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

const char* type_name(const Json& j) {
  return j.type_name();
}

}  // namespace

Json parse_json(const std::string& text, const std::string& origin) {
  check_depth(text, origin);
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    fail(origin, ": malformed JSON at byte ", e.byte, ": ", e.what());
  } catch (const Json::out_of_range& e) {
    // A number beyond double's range ("1e999") is out_of_range, not a parse_error.
    fail(origin, ": malformed JSON: ", e.what());
  }
}

Json read_json_file(const std::filesystem::path& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) fail(path.string(), ": cannot read file: ", ec.message());
  if (size > kMaxJsonFileBytes)
    fail(path.string(), ": JSON file of ", size, " bytes exceeds the limit of ", kMaxJsonFileBytes);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path.string(), ": cannot open file");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse_json(text, path.string());
}

JsonFields::JsonFields(const Json& object, std::string origin)
    : object_(object), origin_(std::move(origin)) {
  if (!object_.is_object()) fail(origin_, ": expected a JSON object, found ", type_name(object_));
}

bool JsonFields::has(const std::string& key) const {
  auto it = object_.find(key);
  return it != object_.end() && !it->is_null();
}

const Json& JsonFields::at(const std::string& key) const {
  auto it = object_.find(key);
  if (it == object_.end() || it->is_null()) fail(origin_, ": missing field \"", key, "\"");
  return *it;
}

template <>
bool JsonFields::get<bool>(const std::string& key) const {
  const Json& v = at(key);
  if (!v.is_boolean())
    fail(origin_, ": field \"", key, "\" must be a boolean, found ", type_name(v));
  return v.get<bool>();
}

template <>
int64_t JsonFields::get<int64_t>(const std::string& key) const {
  const Json& v = at(key);
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::floor(d) == d && std::fabs(d) < 9.0e15) return static_cast<int64_t>(d);
  }
  fail(origin_, ": field \"", key, "\" must be an integer, found ", v.dump());
}

template <>
double JsonFields::get<double>(const std::string& key) const {
  const Json& v = at(key);
  if (!v.is_number()) fail(origin_, ": field \"", key, "\" must be a number, found ", v.dump());
  return v.get<double>();
}

template <>
std::string JsonFields::get<std::string>(const std::string& key) const {
  const Json& v = at(key);
  if (!v.is_string()) fail(origin_, ": field \"", key, "\" must be a string, found ", type_name(v));
  return v.get<std::string>();
}

}  // namespace lathe
