// The versions of the libraries the tokenizer is built on, for the lab's stack record.
#include <oniguruma.h>
#include <unicode/uvernum.h>
#include <utf8proc.h>

#include "tokenizer/tokenizer.h"

namespace lathe {

std::vector<std::pair<std::string, std::string>> tokenizer_library_versions() {
  return {{"oniguruma", onig_version()}, {"utf8proc", utf8proc_version()}, {"icu", U_ICU_VERSION}};
}

}  // namespace lathe
