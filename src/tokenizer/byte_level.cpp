#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/unicode.h"

namespace lathe::tok {

namespace {

// Printable bytes map to themselves; the others to U+0100 upwards, in byte order
// (GPT-2's bytes_to_unicode).
struct Table {
  std::array<std::string, 256> enc;
  std::array<int, 512> dec;
  Table() {
    dec.fill(-1);
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const int cp = printable ? b : next++;
      append_utf8(enc[b], static_cast<char32_t>(cp));
      dec[cp] = b;
    }
  }
};

const Table& table() {
  static const Table t;
  return t;
}

}  // namespace

std::string bytes_to_unicode(std::string_view s) {
  const Table& t = table();
  std::string out;
  out.reserve(s.size() * 2);
  for (unsigned char c : s) out += t.enc[c];
  return out;
}

int unicode_to_byte(char32_t c) {
  return c < 512 ? table().dec[c] : -1;
}

}  // namespace lathe::tok
