// Chat templates: load a model folder's template and render a conversation to the prompt text,
// exactly as transformers' tokenizer.apply_chat_template(..., tokenize=False) does.
#pragma once

#include <ctime>
#include <filesystem>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "io/json.h"
#include "tokenizer/chat_template/evaluator.h"

namespace lathe {

namespace jinja {
class Template;
}

// Conversations arrive as JSON whose object key order is kept (Python dicts keep insertion
// order, and templates print tools with tojson). A lathe::Json converts implicitly, but its
// keys are already sorted.
using OrderedJson = nlohmann::ordered_json;

struct ChatRenderOptions {
  bool add_generation_prompt = false;
  std::optional<OrderedJson> tools;           // unset: the template sees `tools` as None
  std::optional<OrderedJson> documents;       // unset: None
  OrderedJson extra = OrderedJson::object();  // more template variables (enable_thinking, ...);
                                              // they win over the special tokens, as
                                              // transformers' kwargs do
  std::optional<std::string> template_name;   // pick one of several named templates
  std::optional<std::time_t> now;             // time for strftime_now(); unset: now
  jinja::Limits limits;
};

class ChatTemplate {
 public:
  // Reads the template of a model folder with transformers' precedence: chat_template.jinja
  // (plus additional_chat_templates/*.jinja) over `chat_template` in tokenizer_config.json
  // (a string, or a list of {"name", "template"}), then chat_template.json (the processor
  // file). Special tokens (bos_token, eos_token, ...) come from tokenizer_config.json.
  // `name` selects a named template; without it rendering picks "tool_use" when tools are
  // given and the folder has one, else "default".
  static ChatTemplate load(const std::filesystem::path& dir, std::optional<std::string> name = {});

  // One template from text. `special_tokens` is an object like {"bos_token": "<s>"}.
  static ChatTemplate from_string(const std::string& source, const std::string& origin,
                                  const Json& special_tokens = Json::object());

  // `messages` is a JSON array of message objects. Throws lathe::Error when the template
  // fails (raise_exception, undefined values, limits) or the input is malformed.
  std::string render(const OrderedJson& messages, const ChatRenderOptions& options = {}) const;

  // The template text a render without a name would use (for `chat-template --show`).
  const std::string& source(const std::optional<std::string>& name = {}) const;

  // Special-token variables passed to the template, e.g. {"eos_token": "<|im_end|>"}.
  const Json& special_tokens() const { return special_tokens_; }

 private:
  struct Entry {
    std::string source;
    std::shared_ptr<const jinja::Template> compiled;
  };
  const Entry& pick(const std::optional<std::string>& name, bool has_tools) const;

  std::map<std::string, Entry> templates_;  // "default" for a single template
  std::optional<std::string> default_name_;
  Json special_tokens_ = Json::object();
  std::string origin_;
};

// Reads special-token strings (string or {"content": ...} AddedToken form) from a
// tokenizer_config.json object: bos_token, eos_token, unk_token, sep_token, pad_token,
// cls_token, mask_token, and named entries of extra_special_tokens.
Json special_tokens_from_config(const Json& tokenizer_config);

// JSON lines: each input line {"messages": [...], "add_generation_prompt": bool,
// "tools": [...]?, "documents": [...]?, plus any other keys as template variables}
// gives one output line {"text": "..."}, in order. A line whose template raises gives
// {"error": "..."} instead. Malformed input lines throw lathe::Error naming the line.
// Returns the number of lines whose template raised.
size_t run_chat_template_jsonl(const ChatTemplate& tmpl, std::istream& in, std::ostream& out);

}  // namespace lathe
