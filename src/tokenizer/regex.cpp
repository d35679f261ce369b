#include "tokenizer/regex.h"

#include <algorithm>
#include <memory>
#include <mutex>

#include <oniguruma.h>

#include "core/error.h"
#include "tokenizer/unicode.h"

namespace lathe::tok {

namespace {

void init_onig_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    OnigEncoding enc[] = {ONIG_ENCODING_UTF8};
    onig_initialize(enc, 1);
    // A pattern from tokenizer.json can backtrack exponentially ((a+)+$): bound the work of
    // one match attempt (the search's limit is set per call, from the text's length).
    onig_set_retry_limit_in_match(kRegexRetryLimit);
  });
}

struct RegionFree {
  void operator()(OnigRegion* r) const { onig_region_free(r, 1); }
};
struct MatchParamFree {
  void operator()(OnigMatchParam* p) const { onig_free_match_param(p); }
};

}  // namespace

Regex::Regex(const std::string& pattern, const std::string& where) {
  init_onig_once();
  OnigErrorInfo info;
  OnigRegex re = nullptr;
  const auto* p = reinterpret_cast<const OnigUChar*>(pattern.data());
  const int r = onig_new(&re, p, p + pattern.size(), ONIG_OPTION_NONE, ONIG_ENCODING_UTF8,
                         ONIG_SYNTAX_RUBY, &info);
  if (r != ONIG_NORMAL) {
    OnigUChar msg[ONIG_MAX_ERROR_MESSAGE_LEN];
    onig_error_code_to_str(msg, r, &info);
    fail(where, ": invalid regex /", pattern, "/: ", reinterpret_cast<const char*>(msg));
  }
  re_ = re;
  where_ = where;
}

Regex::Regex(Regex&& other) noexcept : re_(other.re_), where_(std::move(other.where_)) {
  other.re_ = nullptr;
}

Regex::~Regex() {
  if (re_) onig_free(static_cast<OnigRegex>(re_));
}

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> out;
  auto re = static_cast<OnigRegex>(re_);
  std::unique_ptr<OnigRegion, RegionFree> region(onig_region_new());
  std::unique_ptr<OnigMatchParam, MatchParamFree> param(onig_new_match_param());
  onig_initialize_match_param(param.get());
  onig_set_retry_limit_in_match_of_match_param(param.get(), kRegexRetryLimit);
  const auto* base = reinterpret_cast<const OnigUChar*>(text.data());
  const auto* end = base + text.size();
  size_t pos = 0;
  bool have_last = false;
  size_t last_end = 0;
  while (pos <= text.size()) {
    onig_region_clear(region.get());
    // One search tries every start position up to its match: allow a few steps per byte.
    onig_set_retry_limit_in_search_of_match_param(
        param.get(), std::max<unsigned long>(kRegexRetryLimit, 64 * (text.size() - pos)));
    const int r = onig_search_with_param(re, base, end, base + pos, end, region.get(),
                                         ONIG_OPTION_NONE, param.get());
    if (r == ONIG_MISMATCH) break;
    if (r < 0) {
      // An error (the retry limit, mostly) must not read as "no further matches": the text
      // would be split wrongly without a word.
      OnigUChar msg[ONIG_MAX_ERROR_MESSAGE_LEN];
      onig_error_code_to_str(msg, r);
      fail(where_, ": regex match at byte ", pos, " of a ", text.size(),
           "-byte text failed: ", reinterpret_cast<const char*>(msg));
    }
    const auto s = static_cast<size_t>(region->beg[0]);
    const auto e = static_cast<size_t>(region->end[0]);
    const auto skip_char = [&] {
      pos = e < text.size() ? e + cp_len(static_cast<unsigned char>(text[e])) : e + 1;
    };
    if (s == e && have_last && last_end == e) {
      skip_char();
      continue;
    }
    out.emplace_back(s, e);
    have_last = true;
    last_end = e;
    if (s == e)
      skip_char();
    else
      pos = e;
  }
  return out;
}

}  // namespace lathe::tok
