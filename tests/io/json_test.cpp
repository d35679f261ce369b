#include <gtest/gtest.h>

#include "core/error.h"
#include "io/json.h"

namespace lathe {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Json, NamesFileFieldAndPosition) {
  EXPECT_NE(
      error_of([] { parse_json("{\"a\": }", "x.json"); }).find("x.json: malformed JSON at byte 7"),
      std::string::npos);
  const Json j = parse_json(R"({"n": "7", "f": 1.5, "i": 3.0, "b": true})", "c.json");
  JsonFields f(j, "c.json");
  EXPECT_EQ(f.get<int64_t>("i"), 3);
  EXPECT_EQ(f.get_or<int64_t>("missing", 9), 9);
  EXPECT_EQ(error_of([&] { f.get<int64_t>("n"); }),
            "c.json: field \"n\" must be an integer, found \"7\"");
  EXPECT_EQ(error_of([&] { f.get<int64_t>("f"); }),
            "c.json: field \"f\" must be an integer, found 1.5");
  EXPECT_EQ(error_of([&] { f.get<std::string>("zz"); }), "c.json: missing field \"zz\"");
}

TEST(Json, RejectsDeepNesting) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_NE(error_of([&] { parse_json(deep, "deep.json"); }).find("nested deeper than"),
            std::string::npos);
  EXPECT_NE(
      error_of([] { read_json_file("/nonexistent/config.json"); }).find("/nonexistent/config.json"),
      std::string::npos);
}

// A number beyond double's range made nlohmann throw out_of_range, which escaped as a crash
// (found by fuzz_config: "vocab_size": 11e308).
TEST(Json, NumberOverflowIsAnErrorNamingTheFile) {
  EXPECT_NE(error_of([] {
              parse_json(R"({"vocab_size": 11e308})", "config.json");
            }).find("config.json: malformed JSON"),
            std::string::npos);
  EXPECT_EQ(parse_json("[1e308]", "ok.json")[0].get<double>(), 1e308);
}

}  // namespace
}  // namespace lathe
