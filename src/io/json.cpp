#include "io/json.h"

#include <cmath>
#include <fstream>
#include <iterator>
#include <system_error>

#include "core/error.h"

namespace lathe {
namespace {

constexpr int kMaxJsonDepth = 512;

// What nlohmann's DOM costs per value, roughly (value slot, heap node, allocator overhead),
// measured with getrusage on tokenizer.json files (docs/errors.md): real ones estimate at
// 3-11 bytes of memory per byte of JSON, nested or empty arrays at 25-35.
constexpr uint64_t kContainerCost = 64, kStringCost = 64, kSeparatorCost = 16;
constexpr uint64_t kMemoryPerByte = 20, kMemoryFloor = 16u << 20;

// One pass before the DOM is built: rejects nesting deeper than kMaxJsonDepth (no stack
// exhaustion) and text whose DOM would take more than kMemoryPerByte times its size (plus a
// floor for small files), so hostile input cannot exhaust memory either.
void check_shape(const std::string& text, const std::string& origin) {
  int depth = 0;
  bool in_string = false;
  uint64_t containers = 0, strings = 0, separators = 0, string_bytes = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      ++string_bytes;
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
      ++strings;
    } else if (c == '[' || c == '{') {
      ++containers;
      if (++depth > kMaxJsonDepth)
        fail(origin, ": JSON nested deeper than ", kMaxJsonDepth, " levels at byte ", i);
    } else if (c == ']' || c == '}') {
      --depth;
    } else if (c == ',' || c == ':') {
      ++separators;
    }
  }
  const uint64_t estimate = containers * kContainerCost + strings * kStringCost +
                            separators * kSeparatorCost + string_bytes;
  const uint64_t limit = kMemoryPerByte * text.size() + kMemoryFloor;
  if (estimate > limit)
    fail(origin, ": JSON of ", text.size(), " bytes would take about ", estimate >> 20,
         " MiB to hold (", containers, " arrays and objects, ", strings, " strings); lathe allows ",
         kMemoryPerByte, " bytes per byte of JSON, as no real config or tokenizer needs more");
}

const char* type_name(const Json& j) {
  return j.type_name();
}

}  // namespace

Json parse_json(const std::string& text, const std::string& origin) {
  check_shape(text, origin);
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
