#include "tokenizer/chat_template/py_string.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>

#include <utf8proc.h>

namespace lathe::jinja::py {

std::vector<uint32_t> decode(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = s[i];
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (i + len > s.size()) len = 1;
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
    for (int k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
    out.push_back(cp);
    i += len;
  }
  return out;
}

std::string encode(const std::vector<uint32_t>& cps) {
  std::string out;
  out.reserve(cps.size());
  for (uint32_t cp : cps) append_utf8(out, cp);
  return out;
}

bool is_space(uint32_t cp) {
  if (cp == ' ' || (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x1f)) return true;
  if (cp < 0x80) return false;
  if (cp == 0x85 || cp == 0xa0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 ||
      cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000)
    return true;
  return false;
}

std::string strip(std::string_view s, const std::optional<std::string>& chars, Side side) {
  if (!chars) {
    // Fast path for ASCII edges.
    const auto cps = decode(s);
    size_t b = 0, e = cps.size();
    if (side != Side::Right)
      while (b < e && is_space(cps[b])) ++b;
    if (side != Side::Left)
      while (e > b && is_space(cps[e - 1])) --e;
    return encode(std::vector<uint32_t>(cps.begin() + b, cps.begin() + e));
  }
  const auto set = decode(*chars);
  auto in_set = [&](uint32_t cp) { return std::find(set.begin(), set.end(), cp) != set.end(); };
  const auto cps = decode(s);
  size_t b = 0, e = cps.size();
  if (side != Side::Right)
    while (b < e && in_set(cps[b])) ++b;
  if (side != Side::Left)
    while (e > b && in_set(cps[e - 1])) --e;
  return encode(std::vector<uint32_t>(cps.begin() + b, cps.begin() + e));
}

std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep,
                               int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    if (sep->empty()) runtime_fail("empty separator");
    size_t start = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      const size_t at = s.find(*sep, start);
      if (at == std::string_view::npos) break;
      out.emplace_back(s.substr(start, at - start));
      start = at + sep->size();
    }
    out.emplace_back(s.substr(start));
    return out;
  }
  const auto cps = decode(s);
  size_t i = 0;
  while (i < cps.size()) {
    while (i < cps.size() && is_space(cps[i])) ++i;
    if (i == cps.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      size_t e = cps.size();
      while (e > i && is_space(cps[e - 1])) --e;
      out.push_back(encode(std::vector<uint32_t>(cps.begin() + i, cps.begin() + e)));
      break;
    }
    const size_t b = i;
    while (i < cps.size() && !is_space(cps[i])) ++i;
    out.push_back(encode(std::vector<uint32_t>(cps.begin() + b, cps.begin() + i)));
  }
  return out;
}

std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep,
                                int64_t maxsplit) {
  if (maxsplit < 0 || !sep) return split(s, sep, maxsplit);
  if (sep->empty()) runtime_fail("empty separator");
  std::vector<std::string> out;
  size_t end = s.size();
  while (static_cast<int64_t>(out.size()) < maxsplit) {
    if (end < sep->size()) break;
    const size_t at = s.rfind(*sep, end - sep->size());
    if (at == std::string_view::npos) break;
    out.emplace_back(s.substr(at + sep->size(), end - at - sep->size()));
    end = at;
  }
  out.emplace_back(s.substr(0, end));
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
  std::vector<std::string> out;
  const auto cps = decode(s);
  size_t b = 0;
  for (size_t i = 0; i < cps.size(); ++i) {
    const uint32_t c = cps[i];
    const bool brk = c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || (c >= 0x1c && c <= 0x1e) ||
                     c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!brk) continue;
    size_t e = i + 1;
    if (c == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') e = i + 2;
    out.push_back(encode(std::vector<uint32_t>(cps.begin() + b, cps.begin() + (keepends ? e : i))));
    b = e;
    i = e - 1;
  }
  if (b < cps.size()) out.push_back(encode(std::vector<uint32_t>(cps.begin() + b, cps.end())));
  return out;
}

std::string upper(std::string_view s) {
  auto cps = decode(s);
  for (auto& c : cps) c = static_cast<uint32_t>(utf8proc_toupper(static_cast<int32_t>(c)));
  return encode(cps);
}

std::string lower(std::string_view s) {
  auto cps = decode(s);
  for (auto& c : cps) c = static_cast<uint32_t>(utf8proc_tolower(static_cast<int32_t>(c)));
  return encode(cps);
}

namespace {
bool is_cased_letter(uint32_t c) {
  const auto cat = utf8proc_category(static_cast<int32_t>(c));
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
}
}  // namespace

std::string title(std::string_view s) {
  auto cps = decode(s);
  bool prev_cased = false;
  for (auto& c : cps) {
    const int32_t ci = static_cast<int32_t>(c);
    const bool cased = is_cased_letter(c);
    c = static_cast<uint32_t>(prev_cased ? utf8proc_tolower(ci) : utf8proc_totitle(ci));
    prev_cased = cased;
  }
  return encode(cps);
}

std::string capitalize(std::string_view s) {
  auto cps = decode(s);
  for (size_t i = 0; i < cps.size(); ++i) {
    const int32_t ci = static_cast<int32_t>(cps[i]);
    cps[i] = static_cast<uint32_t>(i == 0 ? utf8proc_totitle(ci) : utf8proc_tolower(ci));
  }
  return encode(cps);
}

std::string replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count,
                    size_t max_bytes) {
  // Result size first: 'x' * 10**5 with every '' replaced by itself is 10 GB.
  const auto n = static_cast<size_t>(py::count(s, old));  // `count` is the parameter here
  const size_t times = count < 0 ? n : std::min<size_t>(n, static_cast<size_t>(count));
  const size_t removed = old.empty() ? 0 : times * old.size();
  if (repl.size() != 0 && times > (max_bytes + removed) / repl.size())
    runtime_fail("template output exceeded " + std::to_string(max_bytes) + " bytes");
  if (s.size() - removed + times * repl.size() > max_bytes)
    runtime_fail("template output exceeded " + std::to_string(max_bytes) + " bytes");
  std::string out;
  if (old.empty()) {
    // Python inserts the replacement between every character (and at both ends).
    const auto chars = utf8_chars(s);
    int64_t done = 0;
    for (const auto& ch : chars) {
      if (count < 0 || done < count) out += repl, ++done;
      out += ch;
    }
    if (count < 0 || done < count) out += repl;
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t at = s.find(old, start);
    if (at == std::string_view::npos) break;
    out.append(s.substr(start, at - start));
    out.append(repl);
    start = at + old.size();
    ++done;
  }
  out.append(s.substr(start));
  return out;
}

int64_t count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return static_cast<int64_t>(utf8_length(s)) + 1;
  int64_t n = 0;
  for (size_t at = s.find(sub); at != std::string_view::npos; at = s.find(sub, at + sub.size()))
    ++n;
  return n;
}

int64_t find(std::string_view s, std::string_view sub, bool last) {
  const size_t at = last ? s.rfind(sub) : s.find(sub);
  if (at == std::string_view::npos) return -1;
  return static_cast<int64_t>(utf8_length(s.substr(0, at)));
}

std::string percent_format(const std::string& fmt, const CallArgs& args) {
  std::string out;
  size_t next_arg = 0;
  const Value* mapping =
      args.positional.size() == 1 && args.positional[0].is_dict() ? &args.positional[0] : nullptr;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    if (++i >= fmt.size()) runtime_fail("incomplete format");
    const Value* arg = nullptr;
    if (fmt[i] == '(') {
      const size_t close = fmt.find(')', i);
      if (close == std::string::npos || !mapping) runtime_fail("format requires a mapping");
      arg = mapping->dict->find(std::string_view(fmt).substr(i + 1, close - i - 1));
      if (!arg) runtime_fail("missing key in format mapping");
      i = close + 1;
    }
    std::string spec = "%";
    while (i < fmt.size() &&
           std::string_view("-+ #0123456789.").find(fmt[i]) != std::string_view::npos)
      spec += fmt[i++];
    if (i >= fmt.size()) runtime_fail("incomplete format");
    const char conv = fmt[i];
    if (conv == '%') {
      out += '%';
      continue;
    }
    if (!arg) {
      if (next_arg >= args.positional.size())
        runtime_fail("not enough arguments for format string");
      arg = &args.positional[next_arg++];
    }
    char buf[512];
    switch (conv) {
      case 's':
      case 'r': {
        const std::string text = conv == 's' ? to_str(*arg) : repr(*arg);
        std::snprintf(buf, sizeof buf, (spec + "s").c_str(), text.c_str());
        out += text.size() < 400 ? std::string(buf) : text;
        break;
      }
      case 'd':
      case 'i':
      case 'x':
      case 'X':
      case 'o': {
        if (!arg->is_numeric())
          runtime_fail(std::string("%d format: a number is required, not ") + type_name(*arg));
        const long long v =
            arg->kind == Kind::Float ? static_cast<long long>(arg->f) : arg->as_int();
        std::snprintf(buf, sizeof buf, (spec + "ll" + (conv == 'i' ? 'd' : conv)).c_str(), v);
        out += buf;
        break;
      }
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G':
        std::snprintf(buf, sizeof buf, (spec + conv).c_str(), arg->as_double());
        out += buf;
        break;
      default:
        runtime_fail(std::string("unsupported format character '") + conv + "'");
    }
  }
  return out;
}

std::string brace_format(const std::string& fmt, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '{' && i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
    } else if (c == '}' && i + 1 < fmt.size() && fmt[i + 1] == '}') {
      out += '}';
      ++i;
    } else if (c == '{') {
      const size_t close = fmt.find('}', i);
      if (close == std::string::npos) runtime_fail("Single '{' encountered in format string");
      std::string field = fmt.substr(i + 1, close - i - 1);
      const size_t colon = field.find(':');
      std::string spec;
      if (colon != std::string::npos) {
        spec = field.substr(colon + 1);
        field.resize(colon);
      }
      const Value* v = nullptr;
      if (field.empty()) {
        v = auto_index < args.positional.size() ? &args.positional[auto_index++] : nullptr;
      } else if (std::all_of(field.begin(), field.end(),
                             [](char d) { return d >= '0' && d <= '9'; })) {
        // More than 18 digits is past any argument list (and would make stoul throw).
        const size_t k = field.size() > 18 ? SIZE_MAX : std::stoul(field);
        v = k < args.positional.size() ? &args.positional[k] : nullptr;
      } else {
        for (const auto& [key, val] : args.keyword)
          if (key == field) v = &val;
      }
      if (!v) runtime_fail("format(): missing argument for {" + field + "}");
      if (!spec.empty() && (spec.back() == 'f' || spec.back() == 'd')) {
        // The spec goes to snprintf: only flags, width and precision, never '*' (which would
        // read an argument that is not there) or a length modifier.
        if (spec.find_first_not_of("0123456789.+- #") < spec.size() - 1)
          runtime_fail("format(): unsupported format spec '" + spec + "'");
        char buf[128];
        if (spec.back() == 'f')
          std::snprintf(buf, sizeof buf, ("%" + spec).c_str(), v->as_double());
        else
          std::snprintf(buf, sizeof buf, ("%" + spec.substr(0, spec.size() - 1) + "lld").c_str(),
                        static_cast<long long>(v->as_int()));
        out += buf;
      } else {
        out += to_str(*v);
      }
      i = close;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace lathe::jinja::py
