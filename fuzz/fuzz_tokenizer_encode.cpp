// Arbitrary bytes through real tokenizers (Qwen3's byte-level BPE, a SentencePiece-style
// BPE, gpt-oss's o200k): encode, decode, and stream-decode the ids. The first byte picks the
// tokenizer and whether special tokens are added; invalid UTF-8 must be refused cleanly.
// The tokenizers come from the shared data folder beside the checkout when it exists, else
// from the small fixtures in tests/fixtures/tokenizers.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "fuzz_support.h"
#include "tokenizer/tokenizer.h"

namespace {

namespace fs = std::filesystem;

const std::vector<lathe::Tokenizer>& tokenizers() {
  static const std::vector<lathe::Tokenizer> all = [] {
    std::vector<lathe::Tokenizer> v;
    const fs::path shared = lathe::fuzz::shared_dir() / "data/tokenizers";
    for (const char* name : {"qwen3", "spm-bpe-32k", "gpt-oss"}) {
      if (fs::exists(shared / name / "tokenizer.json"))
        v.push_back(lathe::Tokenizer::load(shared / name));
    }
    if (v.empty()) {
      const fs::path fixtures = lathe::fuzz::source_dir() / "tests/fixtures/tokenizers";
      for (const char* name : {"bpe_bytelevel", "bpe_spm", "unigram_precompiled", "wordpiece"})
        v.push_back(lathe::Tokenizer::load(fixtures / name));
    }
    return v;
  }();
  return all;
}

}  // namespace

// Loads the fixed data once, before the first input (so it does not count against -timeout).
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tokenizers();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const auto& all = tokenizers();
  const lathe::Tokenizer& tok = all[data[0] % all.size()];
  const bool special = (data[0] / all.size()) % 2 == 1;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    const std::vector<int32_t> ids = tok.encode(text, special);
    (void)tok.decode(ids, false);
    (void)tok.decode(ids, true);
    lathe::StreamDecoder stream(tok, false);
    for (int32_t id : ids) (void)stream.feed(id);
    (void)stream.finish();
  } catch (const lathe::Error&) {
  }
  // The same bytes read as ids (hostile or out-of-range ids for decode).
  std::vector<int32_t> raw(size / 4);
  if (!raw.empty()) std::memcpy(raw.data(), data, raw.size() * 4);
  (void)tok.decode(raw, data[0] & 1);
  return 0;
}
