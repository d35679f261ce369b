#include "tokenizer/chat_template/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace lathe::jinja {

void runtime_fail(const std::string& message) {
  throw RuntimeError(message);
}

Value Value::undefined(std::string name) {
  Value v;
  v.s = std::move(name);
  return v;
}
Value Value::none() {
  Value v;
  v.kind = Kind::None;
  return v;
}
Value Value::boolean(bool x) {
  Value v;
  v.kind = Kind::Bool;
  v.b = x;
  return v;
}
Value Value::integer(int64_t x) {
  Value v;
  v.kind = Kind::Int;
  v.i = x;
  return v;
}
Value Value::number(double x) {
  Value v;
  v.kind = Kind::Float;
  v.f = x;
  return v;
}
Value Value::string(std::string x) {
  Value v;
  v.kind = Kind::String;
  v.s = std::move(x);
  return v;
}
namespace {
int child_depth(const Value& v) {
  return v.depth;
}
void check_depth(int depth) {
  if (depth > kMaxValueDepth)
    runtime_fail("value nested deeper than " + std::to_string(kMaxValueDepth) + " levels");
}
}  // namespace

Value Value::make_list(List items) {
  Value v;
  v.kind = Kind::List;
  int deepest = 0;
  for (const Value& x : items) deepest = std::max(deepest, child_depth(x));
  v.depth = deepest + 1;
  check_depth(v.depth);
  v.list = std::make_shared<List>(std::move(items));
  return v;
}

void Value::finish_dict() {
  int deepest = 0;
  for (const auto& [k, x] : dict->items) deepest = std::max(deepest, std::max(k.depth, x.depth));
  depth = deepest + 1;
  check_depth(depth);
}
Value Value::make_tuple(List items) {
  Value v = make_list(std::move(items));
  v.is_tuple = true;
  return v;
}
Value Value::make_dict() {
  Value v;
  v.kind = Kind::Dict;
  v.depth = 1;
  v.dict = std::make_shared<Dict>();
  return v;
}
Value Value::callable(std::string name, NativeFn fn) {
  Value v;
  v.kind = Kind::Callable;
  v.fn = std::make_shared<Callable>(Callable{std::move(name), std::move(fn)});
  return v;
}

double Value::as_double() const {
  switch (kind) {
    case Kind::Float:
      return f;
    case Kind::Int:
      return static_cast<double>(i);
    case Kind::Bool:
      return b ? 1.0 : 0.0;
    default:
      runtime_fail(std::string("expected a number, got ") + type_name(*this));
  }
}

const Value* Dict::find(const Value& key) const {
  for (const auto& [k, v] : items)
    if (equals(k, key)) return &v;
  return nullptr;
}

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : items)
    if (k.kind == Kind::String && k.s == key) return &v;
  return nullptr;
}

void Dict::set(const Value& key, Value value) {
  for (auto& [k, v] : items) {
    if (equals(k, key)) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(key, std::move(value));
}

const Value* CallArgs::get(size_t index, std::string_view name) const {
  if (index < positional.size()) return &positional[index];
  for (const auto& [k, v] : keyword)
    if (k == name) return &v;
  return nullptr;
}

const char* type_name(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined:
      return "Undefined";
    case Kind::None:
      return "NoneType";
    case Kind::Bool:
      return "bool";
    case Kind::Int:
      return "int";
    case Kind::Float:
      return "float";
    case Kind::String:
      return "str";
    case Kind::List:
      return "list";
    case Kind::Dict:
      return v.is_namespace ? "Namespace" : "dict";
    case Kind::Callable:
      return "function";
  }
  return "?";
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined:
    case Kind::None:
      return false;
    case Kind::Bool:
      return v.b;
    case Kind::Int:
      return v.i != 0;
    case Kind::Float:
      return v.f != 0.0;
    case Kind::String:
      return !v.s.empty();
    case Kind::List:
      return !v.list->empty();
    case Kind::Dict:
      return v.is_namespace || !v.dict->items.empty();
    case Kind::Callable:
      return true;
  }
  return false;
}

// CPython's float repr: shortest round-trip digits, scientific when exponent < -4 or >= 16.
std::string python_float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  const size_t e_pos = sci.find('e');
  const int exp = std::stoi(sci.substr(e_pos + 1));
  std::string mantissa = sci.substr(0, e_pos);
  std::string sign;
  if (mantissa[0] == '-') {
    sign = "-";
    mantissa.erase(0, 1);
  }
  std::string digits;
  for (char c : mantissa)
    if (c != '.') digits += c;
  if (exp < -4 || exp >= 16) {
    std::string out = sign + digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char e[16];
    std::snprintf(e, sizeof e, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    return out + e;
  }
  const int point = exp + 1;  // digits before the decimal point
  std::string out;
  if (point <= 0) {
    out = "0." + std::string(-point, '0') + digits;
  } else if (point >= static_cast<int>(digits.size())) {
    out = digits + std::string(point - digits.size(), '0') + ".0";
  } else {
    out = digits.substr(0, point) + "." + digits.substr(point);
  }
  return sign + out;
}

namespace {

uint32_t decode_utf8(std::string_view s, size_t& i) {
  const unsigned char c = s[i];
  int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
  if (i + len > s.size()) len = 1;
  uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
  for (int k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
  i += len;
  return cp;
}

std::string repr_string(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == quote)
      out += std::string("\\") + static_cast<char>(c);
    else if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += quote;
  return out;
}

void dump_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = s[i];
    if (c == '"')
      out += "\\\"", ++i;
    else if (c == '\\')
      out += "\\\\", ++i;
    else if (c == '\n')
      out += "\\n", ++i;
    else if (c == '\r')
      out += "\\r", ++i;
    else if (c == '\t')
      out += "\\t", ++i;
    else if (c == '\b')
      out += "\\b", ++i;
    else if (c == '\f')
      out += "\\f", ++i;
    else if (c < 0x20 || (ensure_ascii && c == 0x7f)) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
      ++i;
    } else if (c >= 0x80 && ensure_ascii) {
      uint32_t cp = decode_utf8(s, i);
      char buf[16];
      if (cp >= 0x10000) {
        cp -= 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xd800 + (cp >> 10),
                      0xdc00 + (cp & 0x3ff));
      } else {
        std::snprintf(buf, sizeof buf, "\\u%04x", cp);
      }
      out += buf;
    } else {
      out += static_cast<char>(c);
      ++i;
    }
  }
  out += '"';
}

// json.dumps turns non-string keys into strings: True -> "true", 1 -> "1", None -> "null".
std::string json_key(const Value& k) {
  switch (k.kind) {
    case Kind::String:
      return k.s;
    case Kind::Bool:
      return k.b ? "true" : "false";
    case Kind::None:
      return "null";
    case Kind::Int:
      return std::to_string(k.i);
    case Kind::Float:
      return python_float_repr(k.f);
    default:
      runtime_fail(std::string("keys must be str, int, float, bool or None, not ") + type_name(k));
  }
}

void dump_value(std::string& out, const Value& v, const JsonDumpOptions& o, int level) {
  auto newline = [&](int lvl) {
    if (o.indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(o.indent) * lvl, ' ');
  };
  switch (v.kind) {
    case Kind::None:
      out += "null";
      return;
    case Kind::Bool:
      out += v.b ? "true" : "false";
      return;
    case Kind::Int:
      out += std::to_string(v.i);
      return;
    case Kind::Float:
      if (std::isnan(v.f))
        out += "NaN";
      else if (std::isinf(v.f))
        out += v.f < 0 ? "-Infinity" : "Infinity";
      else
        out += python_float_repr(v.f);
      return;
    case Kind::String:
      dump_string(out, v.s, o.ensure_ascii);
      return;
    case Kind::List: {
      if (v.list->empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k > 0) out += o.item_sep;
        newline(level + 1);
        dump_value(out, (*v.list)[k], o, level + 1);
      }
      newline(level);
      out += ']';
      return;
    }
    case Kind::Dict: {
      if (v.dict->items.empty()) {
        out += "{}";
        return;
      }
      std::vector<std::pair<std::string, const Value*>> entries;
      for (const auto& [k, val] : v.dict->items) entries.emplace_back(json_key(k), &val);
      if (o.sort_keys)
        std::stable_sort(entries.begin(), entries.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
      out += '{';
      for (size_t k = 0; k < entries.size(); ++k) {
        if (k > 0) out += o.item_sep;
        newline(level + 1);
        dump_string(out, entries[k].first, o.ensure_ascii);
        out += o.key_sep;
        dump_value(out, *entries[k].second, o, level + 1);
      }
      newline(level);
      out += '}';
      return;
    }
    case Kind::Undefined:
    case Kind::Callable:
      runtime_fail(std::string("Object of type ") + type_name(v) + " is not JSON serializable");
  }
}

}  // namespace

std::string to_str(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined:
      return "";
    case Kind::String:
      return v.s;
    default:
      return repr(v);
  }
}

std::string repr(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined:
      return "Undefined";
    case Kind::None:
      return "None";
    case Kind::Bool:
      return v.b ? "True" : "False";
    case Kind::Int:
      return std::to_string(v.i);
    case Kind::Float:
      return python_float_repr(v.f);
    case Kind::String:
      return repr_string(v.s);
    case Kind::List: {
      std::string out = v.is_tuple ? "(" : "[";
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k > 0) out += ", ";
        out += repr((*v.list)[k]);
      }
      if (v.is_tuple) return out + (v.list->size() == 1 ? ",)" : ")");
      return out + "]";
    }
    case Kind::Dict: {
      std::string out = v.is_namespace ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [k, val] : v.dict->items) {
        if (!first) out += ", ";
        first = false;
        out += repr(k) + ": " + repr(val);
      }
      return out + (v.is_namespace ? "}>" : "}");
    }
    case Kind::Callable:
      return "<function " + v.fn->name + ">";
  }
  return "";
}

bool equals(const Value& a, const Value& b) {
  if (a.is_numeric() && b.is_numeric()) {
    if (a.kind == Kind::Float || b.kind == Kind::Float) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::Undefined:
    case Kind::None:
      return true;
    case Kind::String:
      return a.s == b.s;
    case Kind::List:
      if (a.list->size() != b.list->size()) return false;
      for (size_t k = 0; k < a.list->size(); ++k)
        if (!equals((*a.list)[k], (*b.list)[k])) return false;
      return true;
    case Kind::Dict:
      if (a.dict == b.dict) return true;
      if (a.is_namespace || b.is_namespace) return false;
      if (a.dict->items.size() != b.dict->items.size()) return false;
      for (const auto& [k, val] : a.dict->items) {
        const Value* other = b.dict->find(k);
        if (!other || !equals(val, *other)) return false;
      }
      return true;
    case Kind::Callable:
      return a.fn == b.fn;
    default:
      return false;
  }
}

int compare(const Value& a, const Value& b) {
  if (a.is_numeric() && b.is_numeric()) {
    if (a.kind == Kind::Float || b.kind == Kind::Float) {
      const double x = a.as_double(), y = b.as_double();
      return x < y ? -1 : x > y ? 1 : 0;
    }
    const int64_t x = a.as_int(), y = b.as_int();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.kind == Kind::String && b.kind == Kind::String)
    return a.s.compare(b.s) < 0 ? -1 : a.s == b.s ? 0 : 1;
  if (a.kind == Kind::List && b.kind == Kind::List) {
    const size_t n = std::min(a.list->size(), b.list->size());
    for (size_t k = 0; k < n; ++k) {
      if (equals((*a.list)[k], (*b.list)[k])) continue;
      return compare((*a.list)[k], (*b.list)[k]);
    }
    return a.list->size() < b.list->size() ? -1 : a.list->size() > b.list->size() ? 1 : 0;
  }
  runtime_fail(std::string("'<' not supported between instances of '") + type_name(a) + "' and '" +
               type_name(b) + "'");
}

namespace {

template <class J>
Value from_json_impl(const J& j) {
  switch (j.type()) {
    case nlohmann::detail::value_t::null:
      return Value::none();
    case nlohmann::detail::value_t::boolean:
      return Value::boolean(j.template get<bool>());
    case nlohmann::detail::value_t::number_integer:
      return Value::integer(j.template get<int64_t>());
    case nlohmann::detail::value_t::number_unsigned: {
      const uint64_t u = j.template get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::number(static_cast<double>(u));
      return Value::integer(static_cast<int64_t>(u));
    }
    case nlohmann::detail::value_t::number_float:
      return Value::number(j.template get<double>());
    case nlohmann::detail::value_t::string:
      return Value::string(j.template get<std::string>());
    case nlohmann::detail::value_t::array: {
      List items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json_impl(e));
      return Value::make_list(std::move(items));
    }
    case nlohmann::detail::value_t::object: {
      Value d = Value::make_dict();
      for (auto it = j.begin(); it != j.end(); ++it)
        d.dict->items.emplace_back(Value::string(it.key()), from_json_impl(it.value()));
      d.finish_dict();
      return d;
    }
    default:
      return Value::none();
  }
}

}  // namespace

Value from_json(const Json& j) {
  return from_json_impl(j);
}
Value from_json(const OrderedJson& j) {
  return from_json_impl(j);
}

std::string dump_json(const Value& v, const JsonDumpOptions& options) {
  std::string out;
  dump_value(out, v, options, 0);
  return out;
}

std::vector<std::string> utf8_chars(std::string_view s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const size_t start = i;
    decode_utf8(s, i);
    out.emplace_back(s.substr(start, i - start));
  }
  return out;
}

size_t utf8_length(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s)
    if ((c & 0xc0) != 0x80) ++n;
  return n;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

}  // namespace lathe::jinja
