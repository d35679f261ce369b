// Small direct checks: JSON-lines front ends, streaming across split UTF-8 characters,
// vocabulary lookups.
#include <gtest/gtest.h>

#include <sstream>

#include "core/error.h"
#include "tokenizer/fixtures.h"
#include "tokenizer/tokenizer.h"

namespace lathe {
namespace {

Tokenizer bytelevel() {
  return Tokenizer::load(test::fixtures_dir() / "bpe_bytelevel");
}

TEST(TokenizerJsonl, TokenizeAndDetokenize) {
  const Tokenizer t = bytelevel();
  std::istringstream in(
      "{\"text\": \"Hello world\", \"add_special_tokens\": true}\n\n"
      "{\"text\": \"h\\u00e9\", \"add_special_tokens\": false}\n");
  std::ostringstream out;
  run_tokenize_jsonl(t, in, out);
  const auto a = t.encode("Hello world", true), b = t.encode("h\xC3\xA9", false);
  std::ostringstream want;
  auto ids = [](const std::vector<int32_t>& v) {
    std::string s = "{\"ids\":[";
    for (size_t k = 0; k < v.size(); ++k) s += (k ? "," : "") + std::to_string(v[k]);
    return s + "]}\n";
  };
  EXPECT_EQ(out.str(), ids(a) + ids(b));

  std::ostringstream ids_line;
  ids_line << "{\"ids\": [";
  for (size_t k = 0; k < a.size(); ++k) ids_line << (k ? "," : "") << a[k];
  ids_line << "], \"skip_special_tokens\": true}\n";
  std::istringstream in2(ids_line.str());
  std::ostringstream out2;
  run_detokenize_jsonl(t, in2, out2);
  EXPECT_EQ(out2.str(), "{\"text\":\"" + t.decode(a, true) + "\"}\n");
}

TEST(TokenizerJsonl, MalformedLineNamesIt) {
  const Tokenizer t = bytelevel();
  std::istringstream in("{\"text\": \"ok\"}\n{\"txt\": 1}\n");
  std::ostringstream out;
  try {
    run_tokenize_jsonl(t, in, out);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("line 2: missing field \"text\""), std::string::npos)
        << e.what();
  }
}

TEST(StreamDecoder, NeverSplitsACharacter) {
  const Tokenizer t = bytelevel();
  const std::string text = "emoji 👨‍👩‍👧‍👦 and 漢字 and é";
  const auto ids = t.encode(text, false);
  StreamDecoder s(t, false);
  std::string all;
  for (int32_t id : ids) {
    const std::string piece = s.feed(id);
    // Each piece is whole characters: no replacement character appears.
    EXPECT_EQ(piece.find("\xEF\xBF\xBD"), std::string::npos) << piece;
    all += piece;
  }
  all += s.finish();
  EXPECT_EQ(all, t.decode(ids, false));
  EXPECT_EQ(all, " " + text);  // add_prefix_space
}

TEST(Vocab, Lookups) {
  const Tokenizer t = bytelevel();
  const auto id = t.token_to_id("<mask>");
  ASSERT_TRUE(id.has_value());
  EXPECT_EQ(t.id_to_token(*id), "<mask>");
  EXPECT_TRUE(t.is_special_id(*id));
  EXPECT_FALSE(t.token_to_id("no such token").has_value());
  EXPECT_EQ(t.id_to_token(1 << 30), "");
  EXPECT_EQ(t.special_tokens().bos, "<s>");
  EXPECT_EQ(t.special_tokens().eos, "</s>");
  EXPECT_EQ(t.bos_id(), t.token_to_id("<s>"));
}

}  // namespace
}  // namespace lathe
