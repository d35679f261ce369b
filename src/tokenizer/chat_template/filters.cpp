// jinja2 3.1 filters (jinja2/filters.py) and tests (jinja2/tests.py), plus transformers'
// tojson override (json.dumps with ensure_ascii=False, sort_keys=False).
#include "tokenizer/chat_template/filters.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <unordered_map>

#include "tokenizer/chat_template/evaluator.h"
#include "tokenizer/chat_template/py_string.h"

namespace lathe::jinja {
namespace {

using FilterFn = Value (*)(const Value&, CallArgs&, Evaluator&);
using TestFn = bool (*)(const Value&, CallArgs&, Evaluator&);

const Value* arg(const CallArgs& a, size_t i, const char* name) {
  return a.get(i, name);
}

// A width or count of characters the template asks for, checked against the output limit
// before a string that large is allocated; negative counts as 0, as in Python's ' ' * -1.
size_t checked_width(int64_t width, const Evaluator& ev) {
  if (width <= 0) return 0;
  ev.check_size(static_cast<size_t>(width));
  return static_cast<size_t>(width);
}

bool flag(const CallArgs& a, size_t i, const char* name, bool fallback) {
  const Value* v = a.get(i, name);
  return v ? truthy(*v) : fallback;
}

// jinja2 soft_str: Undefined -> "", strings as they are, everything else str().
std::string soft_str(const Value& v) {
  return to_str(v);
}

// jinja2 make_attrgetter: "a.b.0" walks items (then attributes) one part at a time.
Value attr_path(const Value& item, const std::string& path) {
  Value cur = item;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    // 18 digits always fit int64 (stoll throws beyond); a longer index is past any list.
    const bool numeric = !part.empty() && std::all_of(part.begin(), part.end(),
                                                      [](char c) { return c >= '0' && c <= '9'; });
    if (numeric && part.size() > 18) return Value::undefined("index " + part + " out of range");
    cur = get_item(cur, numeric ? Value::integer(std::stoll(part)) : Value::string(part));
    if (dot == std::string::npos) return cur;
    if (cur.is_undefined()) return cur;
    start = dot + 1;
  }
}

// Sort / unique key: strings lowercased unless case_sensitive.
Value fold_case(const Value& v, bool case_sensitive) {
  return (!case_sensitive && v.is_string()) ? Value::string(py::lower(v.s)) : v;
}

Value f_abs(const Value& v, CallArgs&, Evaluator&) {
  if (v.kind == Kind::Float) return Value::number(std::fabs(v.f));
  if (v.is_int_like()) {
    if (v.as_int() == std::numeric_limits<int64_t>::min()) runtime_fail("integer overflow");
    return Value::integer(std::llabs(v.as_int()));
  }
  runtime_fail(std::string("bad operand type for abs(): '") + type_name(v) + "'");
}

Value f_attr(const Value& v, CallArgs& a, Evaluator&) {
  const Value* name = arg(a, 0, "name");
  if (!name || !name->is_string()) runtime_fail("attr() needs an attribute name");
  // jinja2 do_attr looks up attributes only, never items.
  Value r = get_attribute(v, name->s);
  if (v.is_dict() && !v.is_namespace && r.kind != Kind::Callable)
    return Value::undefined("'dict object' has no attribute '" + name->s + "'");
  return r;
}

Value f_batch(const Value& v, CallArgs& a, Evaluator& ev) {
  const Value* n = arg(a, 0, "linecount");
  if (!n || !n->is_int_like() || n->as_int() <= 0) runtime_fail("batch() needs a positive count");
  const Value* fill = arg(a, 1, "fill_with");
  List out, cur;
  for (const Value& x : iterate(v)) {
    cur.push_back(x);
    if (static_cast<int64_t>(cur.size()) == n->as_int())
      out.push_back(Value::make_list(std::move(cur))), cur.clear();
  }
  if (!cur.empty()) {
    if (fill && !fill->is_none()) {
      // The fill count comes from the template: count it as loop work before filling.
      ev.count_iterations(n->as_int() - static_cast<int64_t>(cur.size()));
      while (static_cast<int64_t>(cur.size()) < n->as_int()) cur.push_back(*fill);
    }
    out.push_back(Value::make_list(std::move(cur)));
  }
  return Value::make_list(std::move(out));
}

Value f_capitalize(const Value& v, CallArgs&, Evaluator&) {
  return Value::string(py::capitalize(soft_str(v)));
}

Value f_center(const Value& v, CallArgs& a, Evaluator& ev) {
  const Value* w = arg(a, 0, "width");
  const int64_t width = static_cast<int64_t>(checked_width(w ? w->as_int() : 80, ev));
  const std::string s = soft_str(v);
  const int64_t len = static_cast<int64_t>(utf8_length(s));
  if (width <= len) return Value::string(s);
  const int64_t pad = width - len;
  const int64_t left = pad / 2 + (pad & width & 1);  // CPython's str.center rounding
  return Value::string(std::string(left, ' ') + s + std::string(pad - left, ' '));
}

Value f_default(const Value& v, CallArgs& a, Evaluator&) {
  const Value* d = arg(a, 0, "default_value");
  const bool boolean = flag(a, 1, "boolean", false);
  if (v.is_undefined() || (boolean && !truthy(v))) return d ? *d : Value::string("");
  return v;
}

Value f_dictsort(const Value& v, CallArgs& a, Evaluator&) {
  if (!v.is_dict()) runtime_fail("dictsort expects a mapping");
  const bool cs = flag(a, 0, "case_sensitive", false);
  const Value* by = arg(a, 1, "by");
  const bool by_value = by && by->is_string() && by->s == "value";
  const bool rev = flag(a, 2, "reverse", false);
  std::vector<std::pair<Value, Value>> items = v.dict->items;
  std::stable_sort(items.begin(), items.end(), [&](const auto& x, const auto& y) {
    const int c = compare(fold_case(by_value ? x.second : x.first, cs),
                          fold_case(by_value ? y.second : y.first, cs));
    return rev ? c > 0 : c < 0;
  });
  List out;
  for (auto& [k, val] : items) out.push_back(Value::make_tuple({k, val}));
  return Value::make_list(std::move(out));
}

Value f_escape(const Value& v, CallArgs&, Evaluator&) {
  std::string out;
  for (char c : soft_str(v)) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return Value::string(std::move(out));
}

Value f_first(const Value& v, CallArgs&, Evaluator&) {
  const List items = iterate(v);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value f_last(const Value& v, CallArgs&, Evaluator&) {
  const List items = iterate(v);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

std::optional<double> parse_float(const std::string& text) {
  const std::string s = py::strip(text, std::nullopt, py::Side::Both);
  if (s.empty()) return std::nullopt;
  try {
    size_t used = 0;
    const double d = std::stod(s, &used);
    if (used == s.size()) return d;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

Value f_float(const Value& v, CallArgs& a, Evaluator&) {
  const Value* d = arg(a, 0, "default");
  if (v.is_numeric()) return Value::number(v.as_double());
  if (v.is_string())
    if (auto f = parse_float(v.s)) return Value::number(*f);
  return d ? *d : Value::number(0.0);
}

Value f_int(const Value& v, CallArgs& a, Evaluator&) {
  const Value* d = arg(a, 0, "default");
  const Value fallback = d ? *d : Value::integer(0);
  if (v.is_int_like()) return Value::integer(v.as_int());
  if (v.kind == Kind::Float)
    return std::isfinite(v.f) ? Value::integer(static_cast<int64_t>(v.f)) : fallback;
  if (v.is_string()) {
    std::string s = py::strip(v.s, std::nullopt, py::Side::Both);
    s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
    try {
      size_t used = 0;
      const long long n = std::stoll(s, &used, 10);
      if (used == s.size() && !s.empty()) return Value::integer(n);
    } catch (const std::exception&) {
    }
    if (auto f = parse_float(v.s)) return Value::integer(static_cast<int64_t>(*f));
  }
  return fallback;
}

Value f_format(const Value& v, CallArgs& a, Evaluator&) {
  return Value::string(py::percent_format(soft_str(v), a));
}

Value f_indent(const Value& v, CallArgs& a, Evaluator& ev) {
  const Value* w = arg(a, 0, "width");
  std::string indention =
      w && w->is_string() ? w->s : std::string(checked_width(w ? w->as_int() : 4, ev), ' ');
  const bool first = flag(a, 1, "first", false);
  const bool blank = flag(a, 2, "blank", false);
  const std::string s =
      soft_str(v) + "\n";  // jinja2 appends a newline so splitlines keeps the last
  const auto lines = py::splitlines(s, false);
  std::string rv;
  if (blank) {
    for (size_t k = 0; k < lines.size(); ++k) rv += (k ? "\n" + indention : "") + lines[k];
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t k = 1; k < lines.size(); ++k)
      rv += "\n" + (lines[k].empty() ? "" : indention + lines[k]);
  }
  if (first) rv = indention + rv;
  return Value::string(std::move(rv));
}

Value f_items(const Value& v, CallArgs&, Evaluator&) {
  if (v.is_undefined()) return Value::make_list();
  if (!v.is_dict())
    runtime_fail(std::string("Can only get item pairs from a mapping, not ") + type_name(v));
  List out;
  for (const auto& [k, val] : v.dict->items) out.push_back(Value::make_tuple({k, val}));
  return Value::make_list(std::move(out));
}

Value f_join(const Value& v, CallArgs& a, Evaluator& ev) {
  const Value* d = arg(a, 0, "d");
  const Value* attribute = arg(a, 1, "attribute");
  const std::string sep = d ? soft_str(*d) : "";
  std::string out;
  bool first = true;
  for (const Value& x : iterate(v)) {
    if (!first) out += sep;
    first = false;
    out += soft_str(attribute && !attribute->is_none() ? attr_path(x, to_str(*attribute)) : x);
    ev.check_size(out.size());
  }
  return Value::string(std::move(out));
}

Value f_length(const Value& v, CallArgs&, Evaluator&) {
  return Value::integer(length_of(v));
}
Value f_list(const Value& v, CallArgs&, Evaluator&) {
  return Value::make_list(iterate(v));
}
Value f_lower(const Value& v, CallArgs&, Evaluator&) {
  return Value::string(py::lower(soft_str(v)));
}
Value f_upper(const Value& v, CallArgs&, Evaluator&) {
  return Value::string(py::upper(soft_str(v)));
}
Value f_safe(const Value& v, CallArgs&, Evaluator&) {
  return v;
}
Value f_string(const Value& v, CallArgs&, Evaluator&) {
  return Value::string(soft_str(v));
}

Value f_map(const Value& v, CallArgs& a, Evaluator& ev) {
  List out;
  const Value* attribute = arg(a, 99, "attribute");
  if (attribute) {
    const Value* d = arg(a, 99, "default");
    for (const Value& x : iterate(v)) {
      Value r = attr_path(x, to_str(*attribute));
      out.push_back(r.is_undefined() && d ? *d : r);
    }
    return Value::make_list(std::move(out));
  }
  if (a.positional.empty() || !a.positional[0].is_string())
    runtime_fail("map() needs a filter name or attribute=");
  const std::string name = a.positional[0].s;
  if (!has_filter(name)) runtime_fail("no filter named '" + name + "'");
  CallArgs rest;
  rest.positional.assign(a.positional.begin() + 1, a.positional.end());
  rest.keyword = a.keyword;
  for (const Value& x : iterate(v)) {
    CallArgs copy = rest;
    out.push_back(apply_filter(name, x, copy, ev));
  }
  return Value::make_list(std::move(out));
}

Value minmax(const Value& v, CallArgs& a, bool want_max) {
  const bool cs = flag(a, 0, "case_sensitive", false);
  const Value* attribute = arg(a, 1, "attribute");
  const List items = iterate(v);
  if (items.empty())
    return Value::undefined(std::string("No aggregated item, sequence was empty."));
  const Value* best = &items[0];
  auto key = [&](const Value& x) {
    return fold_case(attribute ? attr_path(x, to_str(*attribute)) : x, cs);
  };
  for (const Value& x : items) {
    const int c = compare(key(x), key(*best));
    if (want_max ? c > 0 : c < 0) best = &x;
  }
  return *best;
}
Value f_max(const Value& v, CallArgs& a, Evaluator&) {
  return minmax(v, a, true);
}
Value f_min(const Value& v, CallArgs& a, Evaluator&) {
  return minmax(v, a, false);
}

// select / reject / selectattr / rejectattr share jinja2's select_or_reject.
Value select_impl(const Value& v, CallArgs& a, Evaluator& ev, bool by_attr, bool keep) {
  size_t next = 0;
  std::string attribute;
  if (by_attr) {
    if (a.positional.empty()) runtime_fail("selectattr/rejectattr need an attribute name");
    attribute = to_str(a.positional[next++]);
  }
  std::string test;
  if (next < a.positional.size()) test = to_str(a.positional[next++]);
  if (!test.empty() && !has_test(test)) runtime_fail("no test named '" + test + "'");
  CallArgs rest;
  rest.positional.assign(a.positional.begin() + std::min(next, a.positional.size()),
                         a.positional.end());
  rest.keyword = a.keyword;
  List out;
  for (const Value& x : iterate(v)) {
    const Value probe = by_attr ? attr_path(x, attribute) : x;
    bool ok;
    if (test.empty()) {
      ok = truthy(probe);
    } else {
      CallArgs copy = rest;
      ok = apply_test(test, probe, copy, ev);
    }
    if (ok == keep) out.push_back(x);
  }
  return Value::make_list(std::move(out));
}
Value f_select(const Value& v, CallArgs& a, Evaluator& ev) {
  return select_impl(v, a, ev, false, true);
}
Value f_reject(const Value& v, CallArgs& a, Evaluator& ev) {
  return select_impl(v, a, ev, false, false);
}
Value f_selectattr(const Value& v, CallArgs& a, Evaluator& ev) {
  return select_impl(v, a, ev, true, true);
}
Value f_rejectattr(const Value& v, CallArgs& a, Evaluator& ev) {
  return select_impl(v, a, ev, true, false);
}

Value f_replace(const Value& v, CallArgs& a, Evaluator& ev) {
  const Value* old = arg(a, 0, "old");
  const Value* repl = arg(a, 1, "new");
  const Value* count = arg(a, 2, "count");
  if (!old || !repl) runtime_fail("replace() needs old and new");
  return Value::string(py::replace(soft_str(v), soft_str(*old), soft_str(*repl),
                                   count && !count->is_none() ? count->as_int() : -1,
                                   ev.options().limits.max_output_bytes));
}

Value f_reverse(const Value& v, CallArgs&, Evaluator&) {
  if (v.is_string()) {
    auto chars = utf8_chars(v.s);
    std::string out;
    for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += *it;
    return Value::string(std::move(out));
  }
  List items = iterate(v);
  std::reverse(items.begin(), items.end());
  return Value::make_list(std::move(items));
}

Value f_round(const Value& v, CallArgs& a, Evaluator&) {
  const Value* p = arg(a, 0, "precision");
  const int64_t precision = p ? p->as_int() : 0;
  const Value* m = arg(a, 1, "method");
  const std::string method = m ? to_str(*m) : "common";
  if (method != "common" && method != "ceil" && method != "floor")
    runtime_fail("method must be 'common', 'ceil' or 'floor'");
  if (method == "common" && v.is_int_like()) return Value::integer(v.as_int());
  if (method == "common" && precision >= 0 && precision < 300) {
    // Python's round() is correctly rounded, half to even, on the exact binary value;
    // glibc's printf rounds the same way.
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(precision), v.as_double());
    return Value::number(std::strtod(buf, nullptr));
  }
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = v.as_double() * scale;
  double r;
  if (method == "ceil")
    r = std::ceil(x);
  else if (method == "floor")
    r = std::floor(x);
  else
    r = std::nearbyint(x);
  return Value::number(r / scale);
}

Value f_sort(const Value& v, CallArgs& a, Evaluator&) {
  const bool rev = flag(a, 0, "reverse", false);
  const bool cs = flag(a, 1, "case_sensitive", false);
  const Value* attribute = arg(a, 2, "attribute");
  List items = iterate(v);
  auto key = [&](const Value& x) {
    return fold_case(attribute && !attribute->is_none() ? attr_path(x, to_str(*attribute)) : x, cs);
  };
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    const int c = compare(key(x), key(y));
    return rev ? c > 0 : c < 0;
  });
  return Value::make_list(std::move(items));
}

Value f_sum(const Value& v, CallArgs& a, Evaluator&) {
  const Value* attribute = arg(a, 0, "attribute");
  const Value* start = arg(a, 1, "start");
  Value total = start ? *start : Value::integer(0);
  for (const Value& x : iterate(v)) {
    const Value item = attribute && !attribute->is_none() ? attr_path(x, to_str(*attribute)) : x;
    if (total.is_int_like() && item.is_int_like()) {
      int64_t r;
      if (__builtin_add_overflow(total.as_int(), item.as_int(), &r))
        runtime_fail("integer overflow");
      total = Value::integer(r);
    } else
      total = Value::number(total.as_double() + item.as_double());
  }
  return total;
}

Value f_title(const Value& v, CallArgs&, Evaluator&) {
  // jinja2 do_title: split on runs of [-\s({\[<], uppercase each piece's first character.
  const auto cps = py::decode(soft_str(v));
  auto is_sep = [](uint32_t c) {
    return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || py::is_space(c);
  };
  std::string out;
  bool at_start = true;
  for (uint32_t c : cps) {
    if (is_sep(c)) {
      append_utf8(out, c);
      at_start = true;
      continue;
    }
    std::string one;
    append_utf8(one, c);
    out += at_start ? py::upper(one) : py::lower(one);
    at_start = false;
  }
  return Value::string(std::move(out));
}

Value f_tojson(const Value& v, CallArgs& a, Evaluator& ev) {
  // transformers: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
  JsonDumpOptions o;
  o.ensure_ascii = flag(a, 0, "ensure_ascii", false);
  const Value* indent = arg(a, 1, "indent");
  if (indent && !indent->is_none()) {
    if (!indent->is_int_like()) runtime_fail("tojson indent must be an integer");
    // Every line of a value nested kMaxValueDepth deep may carry that many indents.
    const size_t width = checked_width(indent->as_int(), ev);
    ev.check_size(width * kMaxValueDepth);
    o.indent = static_cast<int>(width);
    o.item_sep = ",";
  }
  const Value* seps = arg(a, 2, "separators");
  if (seps && !seps->is_none()) {
    if (!seps->is_list() || seps->list->size() != 2)
      runtime_fail("tojson separators must be a pair");
    o.item_sep = to_str((*seps->list)[0]);
    o.key_sep = to_str((*seps->list)[1]);
  }
  o.sort_keys = flag(a, 3, "sort_keys", false);
  return Value::string(dump_json(v, o));
}

Value f_trim(const Value& v, CallArgs& a, Evaluator&) {
  const Value* chars = arg(a, 0, "chars");
  return Value::string(py::strip(
      soft_str(v), chars && !chars->is_none() ? std::optional(to_str(*chars)) : std::nullopt,
      py::Side::Both));
}

Value f_truncate(const Value& v, CallArgs& a, Evaluator&) {
  const Value* l = arg(a, 0, "length");
  const int64_t length = l ? l->as_int() : 255;
  const bool killwords = flag(a, 1, "killwords", false);
  const Value* e = arg(a, 2, "end");
  const std::string end = e ? to_str(*e) : "...";
  const Value* lw = arg(a, 3, "leeway");
  const int64_t leeway = lw && !lw->is_none() ? lw->as_int() : 5;
  // jinja2's do_truncate asserts both; they also keep length + leeway from overflowing.
  if (length < static_cast<int64_t>(utf8_length(end)))
    runtime_fail("truncate: expected length >= " + std::to_string(utf8_length(end)) + ", got " +
                 std::to_string(length));
  if (leeway < 0) runtime_fail("truncate: expected leeway >= 0, got " + std::to_string(leeway));
  const std::string s = soft_str(v);
  const auto chars = utf8_chars(s);
  const int64_t n = static_cast<int64_t>(chars.size());
  if (length > std::numeric_limits<int64_t>::max() - leeway || n <= length + leeway)
    return Value::string(s);
  const int64_t keep = std::max<int64_t>(0, length - static_cast<int64_t>(utf8_length(end)));
  std::string head;
  for (int64_t k = 0; k < keep; ++k) head += chars[k];
  if (killwords) return Value::string(head + end);
  const size_t space = head.rfind(' ');
  if (space != std::string::npos) head.resize(space);
  return Value::string(head + end);
}

Value f_unique(const Value& v, CallArgs& a, Evaluator&) {
  const bool cs = flag(a, 0, "case_sensitive", false);
  const Value* attribute = arg(a, 1, "attribute");
  List out, seen;
  for (const Value& x : iterate(v)) {
    const Value key =
        fold_case(attribute && !attribute->is_none() ? attr_path(x, to_str(*attribute)) : x, cs);
    bool dup = false;
    for (const Value& s : seen) dup = dup || equals(s, key);
    if (dup) continue;
    seen.push_back(key);
    out.push_back(x);
  }
  return Value::make_list(std::move(out));
}

Value f_wordcount(const Value& v, CallArgs&, Evaluator&) {
  int64_t n = 0;
  bool in_word = false;
  for (uint32_t c : py::decode(soft_str(v))) {
    const bool word = c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
                      (c >= 'A' && c <= 'Z') || c >= 0x80;
    if (word && !in_word) ++n;
    in_word = word;
  }
  return Value::integer(n);
}

const std::unordered_map<std::string, FilterFn>& filters() {
  static const std::unordered_map<std::string, FilterFn> table = {
      {"abs", f_abs},           {"attr", f_attr},
      {"batch", f_batch},       {"capitalize", f_capitalize},
      {"center", f_center},     {"count", f_length},
      {"d", f_default},         {"default", f_default},
      {"dictsort", f_dictsort}, {"e", f_escape},
      {"escape", f_escape},     {"forceescape", f_escape},
      {"first", f_first},       {"float", f_float},
      {"format", f_format},     {"indent", f_indent},
      {"int", f_int},           {"items", f_items},
      {"join", f_join},         {"last", f_last},
      {"length", f_length},     {"list", f_list},
      {"lower", f_lower},       {"map", f_map},
      {"max", f_max},           {"min", f_min},
      {"reject", f_reject},     {"rejectattr", f_rejectattr},
      {"replace", f_replace},   {"reverse", f_reverse},
      {"round", f_round},       {"safe", f_safe},
      {"select", f_select},     {"selectattr", f_selectattr},
      {"sort", f_sort},         {"string", f_string},
      {"sum", f_sum},           {"title", f_title},
      {"tojson", f_tojson},     {"trim", f_trim},
      {"truncate", f_truncate}, {"unique", f_unique},
      {"upper", f_upper},       {"wordcount", f_wordcount},
  };
  return table;
}

// ---- tests ----

const Value& test_arg(const CallArgs& a) {
  if (a.positional.empty()) runtime_fail("test needs an argument");
  return a.positional[0];
}

bool t_defined(const Value& v, CallArgs&, Evaluator&) {
  return !v.is_undefined();
}
bool t_undefined(const Value& v, CallArgs&, Evaluator&) {
  return v.is_undefined();
}
bool t_none(const Value& v, CallArgs&, Evaluator&) {
  return v.is_none();
}
bool t_boolean(const Value& v, CallArgs&, Evaluator&) {
  return v.kind == Kind::Bool;
}
bool t_true(const Value& v, CallArgs&, Evaluator&) {
  return v.kind == Kind::Bool && v.b;
}
bool t_false(const Value& v, CallArgs&, Evaluator&) {
  return v.kind == Kind::Bool && !v.b;
}
bool t_integer(const Value& v, CallArgs&, Evaluator&) {
  return v.kind == Kind::Int;
}
bool t_float(const Value& v, CallArgs&, Evaluator&) {
  return v.kind == Kind::Float;
}
bool t_number(const Value& v, CallArgs&, Evaluator&) {
  return v.is_numeric();
}  // bool is a Number
bool t_string(const Value& v, CallArgs&, Evaluator&) {
  return v.is_string();
}
bool t_mapping(const Value& v, CallArgs&, Evaluator&) {
  return v.is_dict() && !v.is_namespace;
}
bool t_iterable(const Value& v, CallArgs&, Evaluator&) {
  return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
}
bool t_sequence(const Value& v, CallArgs&, Evaluator&) {
  return v.is_undefined() || v.is_string() || v.is_list() || (v.is_dict() && !v.is_namespace);
}
bool t_callable(const Value& v, CallArgs&, Evaluator&) {
  return v.kind == Kind::Callable;
}
bool t_odd(const Value& v, CallArgs&, Evaluator&) {
  if (!v.is_int_like()) runtime_fail("odd test needs an integer");
  return (v.as_int() & 1) != 0;
}
bool t_even(const Value& v, CallArgs&, Evaluator&) {
  if (!v.is_int_like()) runtime_fail("even test needs an integer");
  return (v.as_int() & 1) == 0;
}
bool t_divisibleby(const Value& v, CallArgs& a, Evaluator&) {
  const Value& n = test_arg(a);
  if (v.is_int_like() && n.is_int_like()) {
    if (n.as_int() == 0) runtime_fail("integer division or modulo by zero");
    if (n.as_int() == -1) return true;  // INT64_MIN % -1 overflows (and traps on x86)
    return v.as_int() % n.as_int() == 0;
  }
  return std::fmod(v.as_double(), n.as_double()) == 0;
}
bool t_eq(const Value& v, CallArgs& a, Evaluator&) {
  return equals(v, test_arg(a));
}
bool t_ne(const Value& v, CallArgs& a, Evaluator&) {
  return !equals(v, test_arg(a));
}
bool t_lt(const Value& v, CallArgs& a, Evaluator&) {
  return compare(v, test_arg(a)) < 0;
}
bool t_le(const Value& v, CallArgs& a, Evaluator&) {
  return compare(v, test_arg(a)) <= 0;
}
bool t_gt(const Value& v, CallArgs& a, Evaluator&) {
  return compare(v, test_arg(a)) > 0;
}
bool t_ge(const Value& v, CallArgs& a, Evaluator&) {
  return compare(v, test_arg(a)) >= 0;
}
bool t_in(const Value& v, CallArgs& a, Evaluator&) {
  const Value& seq = test_arg(a);
  if (seq.is_string()) return v.is_string() && seq.s.find(v.s) != std::string::npos;
  if (seq.is_dict()) return seq.dict->find(v) != nullptr;
  for (const Value& x : iterate(seq))
    if (equals(x, v)) return true;
  return false;
}
bool t_sameas(const Value& v, CallArgs& a, Evaluator&) {
  const Value& o = test_arg(a);
  if (v.kind != o.kind) return false;
  switch (v.kind) {
    case Kind::List:
      return v.list == o.list;
    case Kind::Dict:
      return v.dict == o.dict;
    case Kind::Callable:
      return v.fn == o.fn;
    default:
      return equals(v, o);
  }
}
bool t_lower(const Value& v, CallArgs&, Evaluator&) {
  const std::string s = to_str(v);
  return py::lower(s) == s && py::upper(s) != s;
}
bool t_upper(const Value& v, CallArgs&, Evaluator&) {
  const std::string s = to_str(v);
  return py::upper(s) == s && py::lower(s) != s;
}
bool t_filter(const Value& v, CallArgs&, Evaluator&) {
  return v.is_string() && has_filter(v.s);
}
bool t_test(const Value& v, CallArgs&, Evaluator&) {
  return v.is_string() && has_test(v.s);
}
bool t_escaped(const Value&, CallArgs&, Evaluator&) {
  return false;
}

const std::unordered_map<std::string, TestFn>& tests() {
  static const std::unordered_map<std::string, TestFn> table = {
      {"defined", t_defined},
      {"undefined", t_undefined},
      {"none", t_none},
      {"boolean", t_boolean},
      {"true", t_true},
      {"false", t_false},
      {"integer", t_integer},
      {"float", t_float},
      {"number", t_number},
      {"string", t_string},
      {"mapping", t_mapping},
      {"iterable", t_iterable},
      {"sequence", t_sequence},
      {"callable", t_callable},
      {"odd", t_odd},
      {"even", t_even},
      {"divisibleby", t_divisibleby},
      {"eq", t_eq},
      {"equalto", t_eq},
      {"==", t_eq},
      {"ne", t_ne},
      {"!=", t_ne},
      {"lt", t_lt},
      {"lessthan", t_lt},
      {"<", t_lt},
      {"le", t_le},
      {"<=", t_le},
      {"gt", t_gt},
      {"greaterthan", t_gt},
      {">", t_gt},
      {"ge", t_ge},
      {">=", t_ge},
      {"in", t_in},
      {"sameas", t_sameas},
      {"lower", t_lower},
      {"upper", t_upper},
      {"filter", t_filter},
      {"test", t_test},
      {"escaped", t_escaped},
  };
  return table;
}

}  // namespace

bool has_filter(const std::string& name) {
  return filters().count(name) > 0;
}

Value apply_filter(const std::string& name, const Value& input, CallArgs& args, Evaluator& ev) {
  const auto it = filters().find(name);
  if (it == filters().end()) runtime_fail("no filter named '" + name + "'");
  return it->second(input, args, ev);
}

bool has_test(const std::string& name) {
  return tests().count(name) > 0;
}

bool apply_test(const std::string& name, const Value& input, CallArgs& args, Evaluator& ev) {
  const auto it = tests().find(name);
  if (it == tests().end()) runtime_fail("no test named '" + name + "'");
  return it->second(input, args, ev);
}

}  // namespace lathe::jinja
