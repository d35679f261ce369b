// tokenizer.json from hostile bytes: every component's reader (normalizers, pre-tokenizers,
// models, post-processors, decoders, added tokens). When it loads, a short fixed text is
// encoded and decoded, so a component that reads but cannot run is found too.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "fuzz_support.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto file = lathe::fuzz::scratch_dir() / "tokenizer.json";
  lathe::fuzz::write_bytes(file, data, size);
  try {
    const auto tok = lathe::Tokenizer::load_files(file, std::nullopt);
    const auto ids = tok.encode("Hello, wörld!  12 345 <s> 日本\n\tend", true);
    (void)tok.decode(ids, false);
    (void)tok.decode(ids, true);
    (void)tok.vocab_size();
  } catch (const lathe::Error&) {
  }
  return 0;
}
