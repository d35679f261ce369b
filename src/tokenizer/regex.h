// Oniguruma regexes with the syntax and match iteration of the `onig` crate that `tokenizers`
// uses (Ruby syntax, UTF-8).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lathe::tok {

// Backtracking steps (Oniguruma's retry limit) allowed for one match attempt, and for one
// search over its start positions (or 64 per byte searched, when more); beyond them matching
// fails with lathe::Error. Real pre-tokenizer patterns need a few steps per byte.
inline constexpr unsigned long kRegexRetryLimit = 10'000'000;

class Regex {
 public:
  // Throws lathe::Error with `where` and the Oniguruma message on a bad pattern.
  Regex(const std::string& pattern, const std::string& where);
  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) = delete;
  Regex(const Regex&) = delete;
  ~Regex();

  // Non-overlapping matches as byte ranges [start, end), in order; an empty match right after
  // the previous match is skipped and iteration advances one character, as onig's find_iter.
  // Throws lathe::Error when a search exceeds its retry limit (kRegexRetryLimit).
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;

 private:
  void* re_ = nullptr;  // OnigRegex
  std::string where_;   // the component and field, for errors while matching
};

}  // namespace lathe::tok
