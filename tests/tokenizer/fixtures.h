// Loading the tokenizer conformance fixtures (tests/fixtures/tokenizers, made by
// tools/tokenizer_goldens/make_goldens.py).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace lathe::test {

struct GoldenLine {
  std::string input;  // corpus text (encode lines)
  bool is_decode = false;
  std::vector<int32_t> ids, ids_special;  // for decode lines: ids_special holds the input ids
  std::string text, text_skip;
};

struct Fixture {
  std::string name;
  std::filesystem::path tokenizer_dir;  // holds tokenizer.json (+ tokenizer_config.json)
  std::filesystem::path goldens;
  int64_t vocab_size = -1;
};

// gtest prints parameters with this (test names then stay readable in ctest).
inline void PrintTo(const Fixture& f, std::ostream* os) {
  *os << f.name;
}

std::filesystem::path fixtures_dir();
std::vector<std::string> read_corpus();
std::vector<GoldenLine> read_goldens(const Fixture& f, const std::vector<std::string>& corpus);
// Trained fixtures and the real tokenizers; real ones have an empty tokenizer_dir when the
// shared folder is absent.
std::vector<Fixture> all_fixtures();

}  // namespace lathe::test
