// GPT-2 byte-to-unicode alphabet used by the ByteLevel pre-tokenizer and decoder.
#pragma once

#include <string>
#include <string_view>

namespace lathe::tok {

// Maps every byte of `s` to its printable stand-in character (UTF-8 encoded).
std::string bytes_to_unicode(std::string_view s);
// Inverse for one code point: the byte, or -1 if `c` is not in the alphabet.
int unicode_to_byte(char32_t c);

}  // namespace lathe::tok
