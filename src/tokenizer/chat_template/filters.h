// jinja2's built-in filters and tests, Python's str/dict methods, and attribute/item access
// with jinja2's fallbacks (attribute -> item for `a.b`, item -> attribute for `a['b']`).
#pragma once

#include <optional>
#include <string>

#include "tokenizer/chat_template/value.h"

namespace lathe::jinja {

bool has_filter(const std::string& name);
Value apply_filter(const std::string& name, const Value& input, CallArgs& args, Evaluator& ev);

bool has_test(const std::string& name);
bool apply_test(const std::string& name, const Value& input, CallArgs& args, Evaluator& ev);

// `obj.name`: methods and attributes first, then items; Undefined when neither exists.
// Throws RuntimeError when obj itself is undefined (jinja2's default Undefined).
Value get_attribute(const Value& obj, const std::string& name);
// `obj[key]`: items first, then attributes for string keys.
Value get_item(const Value& obj, const Value& key);
// `obj[start:stop:step]` with Python semantics; null parts are absent.
Value slice_value(const Value& obj, const std::optional<int64_t>& start,
                  const std::optional<int64_t>& stop, const std::optional<int64_t>& step);

// Python iteration: list items, dict keys, string characters, nothing for Undefined.
List iterate(const Value& v);
int64_t length_of(const Value& v);

}  // namespace lathe::jinja
