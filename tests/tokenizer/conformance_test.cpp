// Every corpus string, every fixture: ids and decoded text identical to the `tokenizers`
// package; the streaming decoder's pieces concatenate to the full decode.
#include <gtest/gtest.h>

#include <sstream>

#include "support/skip.h"
#include "tokenizer/fixtures.h"
#include "tokenizer/tokenizer.h"

namespace lathe {
namespace {

using test::Fixture;

std::string show(const std::vector<int32_t>& v) {
  std::ostringstream o;
  o << '[';
  for (size_t k = 0; k < v.size(); ++k) o << (k ? "," : "") << v[k];
  o << ']';
  return o.str();
}

class Conformance : public ::testing::TestWithParam<Fixture> {
 protected:
  void SetUp() override {
    if (GetParam().tokenizer_dir.empty())
      LATHE_SKIP_OUTSIDE_CI("tokenizer files for "
                            << GetParam().name << " are not under " << LATHE_SHARED_DIR
                            << "/data/tokenizers (a clone without ../shared)");
  }
};

TEST_P(Conformance, EncodeMatchesGoldens) {
  const Fixture& f = GetParam();
  const Tokenizer tok = Tokenizer::load(f.tokenizer_dir);
  const auto corpus = test::read_corpus();
  const auto lines = test::read_goldens(f, corpus);
  size_t checked = 0, bad = 0;
  for (const auto& g : lines) {
    if (g.is_decode) continue;
    ++checked;
    const auto plain = tok.encode(g.input, false);
    const auto special = tok.encode(g.input, true);
    if (plain != g.ids || special != g.ids_special) {
      if (++bad <= 5) {
        ADD_FAILURE() << f.name << ": text " << ::testing::PrintToString(g.input) << "\n  expected "
                      << show(g.ids) << " / " << show(g.ids_special) << "\n  got      "
                      << show(plain) << " / " << show(special);
      }
    }
  }
  EXPECT_EQ(bad, 0u) << f.name << ": " << bad << " of " << checked << " strings differ";
  EXPECT_GE(checked, 500u);
  if (f.vocab_size >= 0) {
    EXPECT_EQ(tok.vocab_size(), f.vocab_size);
  }
}

TEST_P(Conformance, DecodeMatchesGoldens) {
  const Fixture& f = GetParam();
  const Tokenizer tok = Tokenizer::load(f.tokenizer_dir);
  const auto lines = test::read_goldens(f, test::read_corpus());
  size_t bad = 0;
  for (const auto& g : lines) {
    const std::string a = tok.decode(g.ids_special, false);
    const std::string b = tok.decode(g.ids_special, true);
    if ((a != g.text || b != g.text_skip) && ++bad <= 5) {
      ADD_FAILURE() << f.name << ": ids " << show(g.ids_special) << "\n  expected "
                    << ::testing::PrintToString(g.text) << " / "
                    << ::testing::PrintToString(g.text_skip) << "\n  got      "
                    << ::testing::PrintToString(a) << " / " << ::testing::PrintToString(b);
    }
  }
  EXPECT_EQ(bad, 0u) << f.name << ": " << bad << " of " << lines.size() << " decodes differ";
}

TEST_P(Conformance, StreamingConcatenationEqualsDecode) {
  const Fixture& f = GetParam();
  const Tokenizer tok = Tokenizer::load(f.tokenizer_dir);
  const auto lines = test::read_goldens(f, test::read_corpus());
  size_t bad = 0;
  for (const auto& g : lines) {
    for (bool skip : {false, true}) {
      StreamDecoder stream(tok, skip);
      std::string all;
      for (int32_t id : g.ids_special) all += stream.feed(id);
      all += stream.finish();
      const std::string want = tok.decode(g.ids_special, skip);
      if (all != want && ++bad <= 5) {
        ADD_FAILURE() << f.name << ": ids " << show(g.ids_special) << " skip=" << skip
                      << "\n  stream " << ::testing::PrintToString(all) << "\n  decode "
                      << ::testing::PrintToString(want);
      }
    }
  }
  EXPECT_EQ(bad, 0u);
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, Conformance, ::testing::ValuesIn(test::all_fixtures()),
                         [](const auto& info) {
                           std::string n = info.param.name;
                           for (char& c : n)
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

}  // namespace
}  // namespace lathe
