// Attribute and item access (jinja2 sandbox getattr/getitem) and the str/dict/list methods
// that templates call. Mutating methods are refused as ImmutableSandboxedEnvironment does.
#include <algorithm>

#include "tokenizer/chat_template/evaluator.h"
#include "tokenizer/chat_template/filters.h"
#include "tokenizer/chat_template/py_string.h"

namespace lathe::jinja {
namespace {

std::string object_type_repr(const Value& v) {
  if (v.is_none()) return "None";
  return std::string(type_name(v)) + " object";
}

Value missing_attribute(const Value& obj, const std::string& name) {
  return Value::undefined("'" + object_type_repr(obj) + "' has no attribute '" + name + "'");
}

std::optional<std::string> opt_string(const CallArgs& a, size_t index, const char* name) {
  const Value* v = a.get(index, name);
  if (!v || v->is_none()) return std::nullopt;
  if (!v->is_string())
    runtime_fail(std::string(name) + " must be str or None, not " + type_name(*v));
  return v->s;
}

int64_t opt_int(const CallArgs& a, size_t index, const char* name, int64_t fallback) {
  const Value* v = a.get(index, name);
  if (!v || v->is_none()) return fallback;
  if (!v->is_int_like()) runtime_fail(std::string(name) + " must be an integer");
  return v->as_int();
}

const std::string& req_string(const CallArgs& a, size_t index, const char* name) {
  const Value* v = a.get(index, name);
  if (!v || !v->is_string()) runtime_fail(std::string("argument '") + name + "' must be str");
  return v->s;
}

Value string_list(const std::vector<std::string>& parts) {
  List items;
  items.reserve(parts.size());
  for (const auto& p : parts) items.push_back(Value::string(p));
  return Value::make_list(std::move(items));
}

// str.startswith / endswith accept a string or a tuple of strings.
bool affix_match(const std::string& s, const Value& affix, bool start) {
  auto one = [&](const Value& a) {
    if (!a.is_string()) runtime_fail("startswith/endswith arg must be str or a tuple of str");
    if (a.s.size() > s.size()) return false;
    return start ? s.compare(0, a.s.size(), a.s) == 0
                 : s.compare(s.size() - a.s.size(), a.s.size(), a.s) == 0;
  };
  if (affix.is_list()) {
    for (const Value& a : *affix.list)
      if (one(a)) return true;
    return false;
  }
  return one(affix);
}

template <class Pred>
bool all_chars(const std::string& s, Pred pred) {
  const auto cps = py::decode(s);
  return !cps.empty() && std::all_of(cps.begin(), cps.end(), pred);
}

Value string_method(const std::string& s, const std::string& name) {
  using A = CallArgs;
  auto bind = [&](auto fn) {
    return Value::callable(name, [s, fn](A& a, Evaluator&) { return fn(s, a); });
  };
  // For methods whose result size the template controls: they check it against the limits.
  auto bind_ev = [&](auto fn) {
    return Value::callable(name, [s, fn](A& a, Evaluator& ev) { return fn(s, a, ev); });
  };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const py::Side side = name == "strip"    ? py::Side::Both
                          : name == "lstrip" ? py::Side::Left
                                             : py::Side::Right;
    return bind([side](const std::string& str, A& a) {
      return Value::string(py::strip(str, opt_string(a, 0, "chars"), side));
    });
  }
  if (name == "split" || name == "rsplit")
    return bind([right = name == "rsplit"](const std::string& str, A& a) {
      const auto sep = opt_string(a, 0, "sep");
      const int64_t max = opt_int(a, 1, "maxsplit", -1);
      return string_list(right ? py::rsplit(str, sep, max) : py::split(str, sep, max));
    });
  if (name == "splitlines")
    return bind([](const std::string& str, A& a) {
      const Value* keep = a.get(0, "keepends");
      return string_list(py::splitlines(str, keep && truthy(*keep)));
    });
  if (name == "startswith" || name == "endswith")
    return bind([start = name == "startswith"](const std::string& str, A& a) {
      const Value* affix = a.get(0, "prefix");
      if (!affix) runtime_fail("startswith/endswith takes at least 1 argument");
      return Value::boolean(affix_match(str, *affix, start));
    });
  if (name == "upper")
    return bind([](const std::string& str, A&) { return Value::string(py::upper(str)); });
  if (name == "lower" || name == "casefold")
    return bind([](const std::string& str, A&) { return Value::string(py::lower(str)); });
  if (name == "title")
    return bind([](const std::string& str, A&) { return Value::string(py::title(str)); });
  if (name == "capitalize")
    return bind([](const std::string& str, A&) { return Value::string(py::capitalize(str)); });
  if (name == "replace")
    return bind_ev([](const std::string& str, A& a, Evaluator& ev) {
      return Value::string(py::replace(str, req_string(a, 0, "old"), req_string(a, 1, "new"),
                                       opt_int(a, 2, "count", -1),
                                       ev.options().limits.max_output_bytes));
    });
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex")
    return bind([name](const std::string& str, A& a) {
      const int64_t at = py::find(str, req_string(a, 0, "sub"), name[0] == 'r');
      if (at < 0 && name.find("index") != std::string::npos) runtime_fail("substring not found");
      return Value::integer(at);
    });
  if (name == "count")
    return bind([](const std::string& str, A& a) {
      return Value::integer(py::count(str, req_string(a, 0, "x")));
    });
  if (name == "join")
    return bind_ev([](const std::string& str, A& a, Evaluator& ev) {
      const Value* items = a.get(0, "iterable");
      if (!items) runtime_fail("join() takes exactly one argument");
      std::string out;
      bool first = true;
      for (const Value& v : iterate(*items)) {
        if (!v.is_string())
          runtime_fail(std::string("sequence item: expected str instance, ") + type_name(v) +
                       " found");
        if (!first) out += str;
        first = false;
        out += v.s;
        ev.check_size(out.size());
      }
      return Value::string(std::move(out));
    });
  if (name == "format")
    return bind(
        [](const std::string& str, A& a) { return Value::string(py::brace_format(str, a)); });
  if (name == "removeprefix" || name == "removesuffix")
    return bind([prefix = name == "removeprefix"](const std::string& str, A& a) {
      const std::string& affix = req_string(a, 0, "affix");
      if (affix_match(str, Value::string(affix), prefix))
        return Value::string(prefix ? str.substr(affix.size())
                                    : str.substr(0, str.size() - affix.size()));
      return Value::string(str);
    });
  if (name == "isdigit" || name == "isnumeric" || name == "isdecimal")
    return bind([](const std::string& str, A&) {
      return Value::boolean(all_chars(str, [](uint32_t c) { return c >= '0' && c <= '9'; }));
    });
  if (name == "isspace")
    return bind(
        [](const std::string& str, A&) { return Value::boolean(all_chars(str, py::is_space)); });
  if (name == "isalpha" || name == "isalnum")
    return bind([alnum = name == "isalnum"](const std::string& str, A&) {
      return Value::boolean(all_chars(str, [alnum](uint32_t c) {
        const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80;
        return alpha || (alnum && c >= '0' && c <= '9');
      }));
    });
  if (name == "isupper" || name == "islower")
    return bind([up = name == "isupper"](const std::string& str, A&) {
      const std::string mapped = up ? py::upper(str) : py::lower(str);
      const std::string other = up ? py::lower(str) : py::upper(str);
      return Value::boolean(mapped == str && other != str);
    });
  return Value();  // not a str method
}

Value dict_method(const Value& d, const std::string& name) {
  if (name == "items" || name == "keys" || name == "values")
    return Value::callable(name, [d, name](CallArgs&, Evaluator&) {
      List out;
      for (const auto& [k, v] : d.dict->items) {
        if (name == "items")
          out.push_back(Value::make_tuple({k, v}));
        else
          out.push_back(name == "keys" ? k : v);
      }
      return Value::make_list(std::move(out));
    });
  if (name == "get")
    return Value::callable(name, [d](CallArgs& a, Evaluator&) {
      const Value* key = a.get(0, "key");
      if (!key) runtime_fail("get expected at least 1 argument");
      const Value* found = d.dict->find(*key);
      if (found) return *found;
      const Value* fallback = a.get(1, "default");
      return fallback ? *fallback : Value::none();
    });
  if (name == "copy")
    return Value::callable(name, [d](CallArgs&, Evaluator&) {
      Value c = Value::make_dict();
      *c.dict = *d.dict;
      c.depth = d.depth;
      return c;
    });
  return Value();
}

Value list_method(const Value& l, const std::string& name) {
  if (name == "index")
    return Value::callable(name, [l](CallArgs& a, Evaluator&) {
      const Value* x = a.get(0, "value");
      if (!x) runtime_fail("index expected 1 argument");
      for (size_t k = 0; k < l.list->size(); ++k)
        if (equals((*l.list)[k], *x)) return Value::integer(static_cast<int64_t>(k));
      runtime_fail(repr(*x) + " is not in list");
    });
  if (name == "count")
    return Value::callable(name, [l](CallArgs& a, Evaluator&) {
      const Value* x = a.get(0, "value");
      if (!x) runtime_fail("count expected 1 argument");
      int64_t n = 0;
      for (const Value& v : *l.list) n += equals(v, *x) ? 1 : 0;
      return Value::integer(n);
    });
  return Value();
}

bool is_mutator(const Value& obj, const std::string& name) {
  static const char* const kList[] = {"append", "clear", "pop",    "reverse",
                                      "insert", "sort",  "extend", "remove"};
  static const char* const kDict[] = {"clear", "pop", "popitem", "setdefault", "update"};
  if (obj.is_list()) return std::find(std::begin(kList), std::end(kList), name) != std::end(kList);
  if (obj.is_dict() && !obj.is_namespace)
    return std::find(std::begin(kDict), std::end(kDict), name) != std::end(kDict);
  return false;
}

Value unsafe(const Value& obj, const std::string& name) {
  const std::string msg = "access to attribute '" + name + "' of '" + type_name(obj) +
                          "' object is unsafe (templates may not modify their inputs)";
  return Value::callable(name, [msg](CallArgs&, Evaluator&) -> Value { runtime_fail(msg); });
}

}  // namespace

List iterate(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined:
      return {};
    case Kind::List:
      return *v.list;
    case Kind::Dict: {
      List keys;
      for (const auto& [k, val] : v.dict->items) keys.push_back(k);
      return keys;
    }
    case Kind::String: {
      List chars;
      for (auto& c : utf8_chars(v.s)) chars.push_back(Value::string(std::move(c)));
      return chars;
    }
    default:
      runtime_fail(std::string("'") + type_name(v) + "' object is not iterable");
  }
}

int64_t length_of(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined:
      return 0;
    case Kind::String:
      return static_cast<int64_t>(utf8_length(v.s));
    case Kind::List:
      return static_cast<int64_t>(v.list->size());
    case Kind::Dict:
      return static_cast<int64_t>(v.dict->items.size());
    default:
      runtime_fail(std::string("object of type '") + type_name(v) + "' has no len()");
  }
}

Value get_attribute(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) runtime_fail(obj.s.empty() ? "value is undefined" : obj.s);
  if (is_mutator(obj, name)) return unsafe(obj, name);
  if (obj.is_string()) {
    Value m = string_method(obj.s, name);
    return m.kind == Kind::Callable ? m : missing_attribute(obj, name);
  }
  if (obj.is_dict()) {
    if (!obj.is_namespace) {
      Value m = dict_method(obj, name);
      if (m.kind == Kind::Callable) return m;
    }
    const Value* v = obj.dict->find(std::string_view(name));
    return v ? *v : missing_attribute(obj, name);
  }
  if (obj.is_list()) {
    Value m = list_method(obj, name);
    return m.kind == Kind::Callable ? m : missing_attribute(obj, name);
  }
  return missing_attribute(obj, name);
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) runtime_fail(obj.s.empty() ? "value is undefined" : obj.s);
  if ((obj.is_list() || obj.is_string()) && key.is_int_like()) {
    // A string is indexed by what utf8_chars splits it into, as slice_value does (utf8_length
    // counts invalid UTF-8 differently, and chars[k] read past the end: found by fuzzing).
    std::vector<std::string> chars;
    if (obj.is_string()) chars = utf8_chars(obj.s);
    const int64_t n =
        obj.is_list() ? static_cast<int64_t>(obj.list->size()) : static_cast<int64_t>(chars.size());
    int64_t k = key.as_int();
    if (k < 0) k += n;
    if (k < 0 || k >= n)
      return Value::undefined("'" + object_type_repr(obj) + "' has no element " +
                              std::to_string(key.as_int()));
    if (obj.is_list()) return (*obj.list)[static_cast<size_t>(k)];
    return Value::string(chars[static_cast<size_t>(k)]);
  }
  if (obj.is_dict() && !obj.is_namespace) {
    const Value* v = obj.dict->find(key);
    if (v) return *v;
  }
  if (key.is_string()) return get_attribute(obj, key.s);
  return Value::undefined("'" + object_type_repr(obj) + "' has no element " + repr(key));
}

Value slice_value(const Value& obj, const std::optional<int64_t>& start,
                  const std::optional<int64_t>& stop, const std::optional<int64_t>& step) {
  if (obj.is_undefined()) runtime_fail(obj.s.empty() ? "value is undefined" : obj.s);
  if (!obj.is_list() && !obj.is_string())
    runtime_fail(std::string("'") + type_name(obj) + "' object is not subscriptable");
  // A string is indexed by what utf8_chars splits it into, so every index below is in range
  // (utf8_length counts invalid UTF-8 differently: chars[k] used to read past the end).
  const bool ascii = obj.is_string() && std::all_of(obj.s.begin(), obj.s.end(), [](char c) {
                       return static_cast<unsigned char>(c) < 0x80;
                     });
  const std::vector<std::string> chars =
      obj.is_string() && !ascii ? utf8_chars(obj.s) : std::vector<std::string>{};
  const int64_t n = obj.is_list() ? length_of(obj)
                    : ascii       ? static_cast<int64_t>(obj.s.size())
                                  : static_cast<int64_t>(chars.size());
  const int64_t st = step.value_or(1);
  if (st == 0) runtime_fail("slice step cannot be zero");
  // CPython's PySlice_AdjustIndices.
  auto adjust = [&](std::optional<int64_t> v, int64_t def) {
    if (!v) return def;
    int64_t x = *v;
    if (x < 0) {
      x += n;
      if (x < 0) x = st < 0 ? -1 : 0;
    } else if (x >= n) {
      x = st < 0 ? n - 1 : n;
    }
    return x;
  };
  const int64_t b = adjust(start, st < 0 ? n - 1 : 0);
  const int64_t e = adjust(stop, st < 0 ? -1 : n);
  std::vector<int64_t> idx;
  for (int64_t k = b; st > 0 ? k < e : k > e; k += st) idx.push_back(k);
  if (obj.is_list()) {
    List out;
    for (int64_t k : idx) out.push_back((*obj.list)[static_cast<size_t>(k)]);
    Value r = Value::make_list(std::move(out));
    r.is_tuple = obj.is_tuple;
    return r;
  }
  std::string out;
  if (ascii) {
    for (int64_t k : idx) out += obj.s[static_cast<size_t>(k)];
  } else {
    for (int64_t k : idx) out += chars[static_cast<size_t>(k)];
  }
  return Value::string(std::move(out));
}

}  // namespace lathe::jinja
