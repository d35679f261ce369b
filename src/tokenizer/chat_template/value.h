// The dynamic value of the Jinja engine: Python's None, bool, int, float, str, list, dict and
// callables, with Jinja's Undefined. Semantics follow CPython (str(), repr(), ==, <, truthiness).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "io/json.h"

namespace lathe::jinja {

// A failure while evaluating; the evaluator adds the template origin and line:column.
class RuntimeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] void runtime_fail(const std::string& message);

// Values nested deeper than this are refused: printing, comparing and freeing them recurse.
inline constexpr int kMaxValueDepth = 256;

enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Callable };

struct Value;
struct Dict;
struct CallArgs;
class Evaluator;
using List = std::vector<Value>;
using NativeFn = std::function<Value(CallArgs&, Evaluator&)>;

struct Callable {
  std::string name;
  NativeFn fn;
};

struct Value {
  Kind kind = Kind::Undefined;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;  // the string, or the name of an undefined value (for error messages)
  std::shared_ptr<List> list;
  std::shared_ptr<Dict> dict;
  std::shared_ptr<Callable> fn;
  bool is_namespace = false;  // a namespace() object: the one mutable dict
  bool is_tuple = false;      // a list that prints as a Python tuple: (1, 2)
  int depth = 0;              // container nesting: 1 + the deepest element (0 for scalars)

  Value() = default;
  static Value undefined(std::string name = {});
  static Value none();
  static Value boolean(bool v);
  static Value integer(int64_t v);
  static Value number(double v);
  static Value string(std::string v);
  static Value make_list(List items = {});
  static Value make_tuple(List items);
  static Value make_dict();
  // Sets `depth` of a dict built item by item; throws when nesting exceeds kMaxValueDepth.
  void finish_dict();
  static Value callable(std::string name, NativeFn fn);

  bool is_undefined() const { return kind == Kind::Undefined; }
  bool is_none() const { return kind == Kind::None; }
  bool is_string() const { return kind == Kind::String; }
  bool is_list() const { return kind == Kind::List; }
  bool is_dict() const { return kind == Kind::Dict; }
  bool is_int_like() const { return kind == Kind::Int || kind == Kind::Bool; }
  bool is_numeric() const { return kind == Kind::Int || kind == Kind::Bool || kind == Kind::Float; }
  int64_t as_int() const { return kind == Kind::Bool ? (b ? 1 : 0) : i; }
  double as_double() const;
};

// Insertion-ordered dict (Python 3.7+ semantics).
struct Dict {
  std::vector<std::pair<Value, Value>> items;
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(const Value& key, Value value);
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  // Takes argument `index` or keyword `name`, else nullptr.
  const Value* get(size_t index, std::string_view name) const;
};

const char* type_name(const Value& v);  // Python's type name: 'str', 'NoneType', ...
bool truthy(const Value& v);
std::string to_str(const Value& v);  // Python str()
std::string repr(const Value& v);    // Python repr()
std::string python_float_repr(double v);
bool equals(const Value& a, const Value& b);
int compare(const Value& a, const Value& b);  // <0, 0, >0; throws for unorderable types

// JSON to Value. Use OrderedJson where key order matters (messages, tools): Python dicts keep
// insertion order, and tojson / iteration show it; lathe::Json sorts keys.
using OrderedJson = nlohmann::ordered_json;
Value from_json(const Json& j);
Value from_json(const OrderedJson& j);

struct JsonDumpOptions {
  int indent = -1;  // -1: no newlines
  bool ensure_ascii = false;
  bool sort_keys = false;
  std::string item_sep = ", ";
  std::string key_sep = ": ";
};
// Python's json.dumps over a Value.
std::string dump_json(const Value& v, const JsonDumpOptions& options);

// UTF-8 helpers: Python strings index by code point.
std::vector<std::string> utf8_chars(std::string_view s);
size_t utf8_length(std::string_view s);
void append_utf8(std::string& out, uint32_t cp);

}  // namespace lathe::jinja
