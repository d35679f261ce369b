// JSON-lines front ends for `lathe tokenize` / `lathe detokenize`.
#include <istream>
#include <ostream>
#include <string>

#include "core/error.h"
#include "io/json.h"
#include "tokenizer/tokenizer.h"

namespace lathe {

namespace {

bool blank(const std::string& line) {
  return line.find_first_not_of(" \t\r") == std::string::npos;
}

std::string dump(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace

void run_tokenize_jsonl(const Tokenizer& tokenizer, std::istream& in, std::ostream& out) {
  std::string line;
  for (size_t n = 1; std::getline(in, line); ++n) {
    if (blank(line)) continue;
    const std::string origin = cat("stdin line ", n);
    const Json j = parse_json(line, origin);
    const JsonFields f(j, origin);
    const std::string text = f.get<std::string>("text");
    const bool add = f.get_or<bool>("add_special_tokens", true);
    Json answer = Json::object();
    answer["ids"] = tokenizer.encode(text, add);
    out << dump(answer) << '\n';
  }
  out.flush();
}

void run_detokenize_jsonl(const Tokenizer& tokenizer, std::istream& in, std::ostream& out) {
  std::string line;
  for (size_t n = 1; std::getline(in, line); ++n) {
    if (blank(line)) continue;
    const std::string origin = cat("stdin line ", n);
    const Json j = parse_json(line, origin);
    const JsonFields f(j, origin);
    const Json& arr = f.at("ids");
    if (!arr.is_array()) fail(origin, ": field \"ids\" must be an array");
    std::vector<int32_t> ids;
    ids.reserve(arr.size());
    for (size_t k = 0; k < arr.size(); ++k) {
      const Json& v = arr[k];
      if (!v.is_number_integer() || v.get<int64_t>() < INT32_MIN || v.get<int64_t>() > INT32_MAX)
        fail(origin, ": field \"ids\"[", k, "] must be a 32-bit integer, found ", v.dump());
      ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
    }
    const bool skip = f.get_or<bool>("skip_special_tokens", false);
    Json answer = Json::object();
    answer["text"] = tokenizer.decode(ids, skip);
    out << dump(answer) << '\n';
  }
  out.flush();
}

}  // namespace lathe
