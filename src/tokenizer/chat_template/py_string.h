// Python str semantics over UTF-8 (code points, Unicode whitespace and case mapping).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/chat_template/value.h"

namespace lathe::jinja::py {

std::vector<uint32_t> decode(std::string_view s);
std::string encode(const std::vector<uint32_t>& cps);
bool is_space(uint32_t cp);  // str.isspace()

enum class Side { Both, Left, Right };
// str.strip / lstrip / rstrip; chars unset: whitespace.
std::string strip(std::string_view s, const std::optional<std::string>& chars, Side side);
// str.split(sep, maxsplit); sep unset: runs of whitespace.
std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep,
                               int64_t maxsplit);
std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep,
                                int64_t maxsplit);
std::vector<std::string> splitlines(std::string_view s, bool keepends);
std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string title(std::string_view s);       // str.title()
std::string capitalize(std::string_view s);  // str.capitalize()
// Fails (template output exceeded) once the result would pass max_bytes, before building it.
std::string replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count,
                    size_t max_bytes);
int64_t count(std::string_view s, std::string_view sub);
// Code-point index of the first (or last) occurrence, -1 when absent.
int64_t find(std::string_view s, std::string_view sub, bool last);

// "%s %d" % args (printf-style formatting) and "{} {name}".format(...).
std::string percent_format(const std::string& fmt, const CallArgs& args);
std::string brace_format(const std::string& fmt, const CallArgs& args);

}  // namespace lathe::jinja::py
