// UTF-8 and Unicode property helpers with the semantics of Rust's `char` methods, which the
// `tokenizers` crate relies on (utf8proc for categories/normalization, ICU for scripts).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lathe::tok {

// Decodes the code point at s[i] (s must be valid UTF-8) and advances i.
char32_t next_cp(std::string_view s, size_t& i);
size_t cp_len(unsigned char lead);  // byte length of the sequence starting with `lead`
void append_utf8(std::string& out, char32_t cp);
// Byte offset of the first invalid sequence, or npos when s is valid UTF-8.
size_t find_invalid_utf8(std::string_view s);
// Rust's String::from_utf8_lossy: each maximal invalid subpart becomes U+FFFD.
std::string utf8_lossy(std::string_view bytes);

bool is_rust_whitespace(char32_t c);  // char::is_whitespace (White_Space property)
bool is_rust_numeric(char32_t c);     // char::is_numeric (Nd, Nl, No)
bool is_punctuation(char32_t c);      // ASCII punctuation or general category P*
bool is_mark(char32_t c);             // general category M*
bool is_nonspacing_mark(char32_t c);  // general category Mn
bool is_other(char32_t c);            // general category C*
bool is_word_char(char32_t c);        // regex \w (Unicode)

enum class NormForm { NFC, NFD, NFKC, NFKD };
std::string normalize(std::string_view s, NormForm form);
// Per-character full lowercase mapping (Rust's char::to_lowercase, no final-sigma context).
std::string lowercase(std::string_view s);

// Script used by the UnicodeScripts pre-tokenizer; -1 stands for "Any" (the space).
int fixed_script(char32_t c);

// Extended grapheme clusters, as byte lengths.
std::vector<size_t> grapheme_lengths(std::string_view s);

}  // namespace lathe::tok
