// Added tokens: split out of the text before normalization (or, for normalized=true tokens,
// after it) as tokenizers/src/tokenizer/added_vocabulary.rs does: leftmost-longest matching,
// then single_word / lstrip / rstrip rules.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lathe::tok {

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool single_word = false, lstrip = false, rstrip = false, normalized = true, special = false;
};

// A piece of input: an added token (id >= 0) or text still to tokenize (id < 0).
struct Segment {
  size_t b, e;
  int32_t id;
};

class AddedMatcher {
 public:
  // `patterns[k]` is matched for `tokens[k]` (its content, or normalized content).
  void build(std::vector<std::string> patterns, std::vector<const AddedToken*> tokens);
  bool empty() const { return tokens_.empty(); }
  // Splits `s` into segments covering it, in order (the non-token ones may be empty only
  // when `s` is).
  std::vector<Segment> split(std::string_view s) const;

 private:
  struct Node {
    int32_t token = -1;                                   // index into tokens_
    std::vector<std::pair<unsigned char, int32_t>> kids;  // sorted by byte
  };
  int32_t child(int32_t n, unsigned char c) const;
  std::vector<Node> nodes_{Node{}};
  std::vector<const AddedToken*> tokens_;
  std::array<bool, 256> first_{};
};

}  // namespace lathe::tok
