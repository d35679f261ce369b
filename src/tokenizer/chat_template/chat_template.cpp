#include "tokenizer/chat_template/chat_template.h"

#include <algorithm>
#include <fstream>
#include <istream>
#include <ostream>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "tokenizer/chat_template/jinja.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;

// Chat templates are small; anything this large is not one.
constexpr std::uintmax_t kMaxTemplateBytes = 4u << 20;

std::string read_text(const fs::path& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec) fail(path.string(), ": cannot read: ", ec.message());
  if (size > kMaxTemplateBytes)
    fail(path.string(), ": ", size, " bytes is too large for a chat template (limit ",
         kMaxTemplateBytes, ")");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path.string(), ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string token_string(const Json& v, const std::string& origin, const std::string& key) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string())
    return v["content"].get<std::string>();
  fail(origin, ": field '", key, "' must be a string or an AddedToken object with \"content\"");
}

// transformers' _alias_reasoning_fields: the first non-null of reasoning_content, thinking,
// reasoning is exposed as "thinking" (first key) and "reasoning_content" (last key).
jinja::Value convert_message(const OrderedJson& message, size_t index) {
  if (!message.is_object())
    fail("messages[", index, "]: chat messages must be objects, got ", message.type_name());
  jinja::Value m = jinja::Value::make_dict();
  for (auto it = message.begin(); it != message.end(); ++it) {
    if (it.value().is_null()) continue;  // _normalize_chat_messages drops None values
    m.dict->items.emplace_back(jinja::Value::string(it.key()), jinja::from_json(it.value()));
  }
  const jinja::Value* reasoning = nullptr;
  for (const char* key : {"reasoning_content", "thinking", "reasoning"}) {
    reasoning = m.dict->find(std::string_view(key));
    if (reasoning) break;
  }
  m.finish_dict();
  if (!reasoning) return m;
  const jinja::Value r = *reasoning;
  jinja::Value out = jinja::Value::make_dict();
  out.dict->items.emplace_back(jinja::Value::string("thinking"), r);
  for (const auto& [k, v] : m.dict->items) out.dict->set(k, v);
  out.dict->set(jinja::Value::string("reasoning_content"), r);
  out.finish_dict();
  return out;
}

}  // namespace

Json special_tokens_from_config(const Json& config) {
  Json out = Json::object();
  if (!config.is_object()) return out;
  for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
                          "cls_token", "mask_token"}) {
    if (config.contains(key) && !config[key].is_null())
      out[key] = token_string(config[key], "tokenizer_config.json", key);
  }
  // transformers 5 registers a dict of extra_special_tokens as named special tokens.
  if (config.contains("extra_special_tokens") && config["extra_special_tokens"].is_object()) {
    for (auto it = config["extra_special_tokens"].begin();
         it != config["extra_special_tokens"].end(); ++it)
      if (!it.value().is_null())
        out[it.key()] = token_string(it.value(), "tokenizer_config.json", it.key());
  }
  return out;
}

ChatTemplate ChatTemplate::from_string(const std::string& source, const std::string& origin,
                                       const Json& special_tokens) {
  ChatTemplate t;
  t.origin_ = origin;
  t.templates_["default"] = Entry{source, std::make_shared<jinja::Template>(source, origin)};
  t.special_tokens_ = special_tokens.is_object() ? special_tokens : Json::object();
  return t;
}

ChatTemplate ChatTemplate::load(const fs::path& dir, std::optional<std::string> name) {
  ChatTemplate t;
  t.origin_ = dir.string();
  const fs::path config_path = dir / "tokenizer_config.json";
  Json config = Json::object();
  if (fs::exists(config_path)) config = read_json_file(config_path);
  if (!config.is_object()) fail(config_path.string(), ": expected a JSON object");
  t.special_tokens_ = special_tokens_from_config(config);

  std::vector<std::pair<std::string, fs::path>> files;  // name -> file
  if (fs::exists(dir / "chat_template.jinja"))
    files.emplace_back("default", dir / "chat_template.jinja");
  const fs::path extra_dir = dir / "additional_chat_templates";
  if (fs::is_directory(extra_dir)) {
    for (const auto& entry : fs::directory_iterator(extra_dir))
      if (entry.is_regular_file() && entry.path().extension() == ".jinja")
        files.emplace_back(entry.path().stem().string(), entry.path());
  }
  auto add = [&t](const std::string& tname, const std::string& text, const std::string& origin) {
    t.templates_[tname] = Entry{text, std::make_shared<jinja::Template>(text, origin)};
  };
  if (!files.empty()) {
    // Separate template files take priority over tokenizer_config.json (transformers
    // PreTrainedTokenizerBase._from_pretrained).
    for (const auto& [tname, path] : files) add(tname, read_text(path), path.string());
  } else if (config.contains("chat_template") && !config["chat_template"].is_null()) {
    const Json& ct = config["chat_template"];
    const std::string origin = config_path.string() + ":chat_template";
    if (ct.is_string()) {
      add("default", ct.get<std::string>(), origin);
    } else if (ct.is_array()) {
      for (size_t k = 0; k < ct.size(); ++k) {
        JsonFields entry(ct[k], origin + "[" + std::to_string(k) + "]");
        const std::string tname = entry.get<std::string>("name");
        add(tname, entry.get<std::string>("template"), origin + "[" + tname + "]");
      }
    } else {
      fail(origin, ": expected a string or a list of {name, template}, got ", ct.type_name());
    }
  } else if (fs::exists(dir / "chat_template.json")) {
    const fs::path p = dir / "chat_template.json";
    const Json processor = read_json_file(p);
    JsonFields f(processor, p.string());
    add("default", f.get<std::string>("chat_template"), p.string() + ":chat_template");
  }
  if (t.templates_.empty())
    fail(dir.string(),
         ": no chat template (looked for chat_template.jinja, chat_template in "
         "tokenizer_config.json, chat_template.json)");
  if (name) {
    if (!t.templates_.count(*name)) {
      std::string names;
      for (const auto& [k, v] : t.templates_) names += (names.empty() ? "" : ", ") + k;
      fail(dir.string(), ": no chat template named '", *name, "' (available: ", names, ")");
    }
    t.default_name_ = name;
  }
  return t;
}

const ChatTemplate::Entry& ChatTemplate::pick(const std::optional<std::string>& name,
                                              bool has_tools) const {
  const std::optional<std::string> wanted = name ? name : default_name_;
  if (wanted) {
    const auto it = templates_.find(*wanted);
    if (it == templates_.end()) fail(origin_, ": no chat template named '", *wanted, "'");
    return it->second;
  }
  if (templates_.size() == 1) return templates_.begin()->second;
  // transformers get_chat_template: "tool_use" when tools are given, else "default".
  if (has_tools && templates_.count("tool_use")) return templates_.at("tool_use");
  if (templates_.count("default")) return templates_.at("default");
  fail(origin_, ": several chat templates and none named 'default'; pick one by name");
}

const std::string& ChatTemplate::source(const std::optional<std::string>& name) const {
  return pick(name, false).source;
}

std::string ChatTemplate::render(const OrderedJson& messages,
                                 const ChatRenderOptions& options) const {
  const Entry& entry = pick(options.template_name, options.tools.has_value());
  if (!messages.is_array()) fail(origin_, ": messages must be a JSON array");
  if (messages.empty()) fail(origin_, ": cannot apply a chat template to an empty conversation");
  jinja::List converted;
  for (size_t k = 0; k < messages.size(); ++k) converted.push_back(convert_message(messages[k], k));
  if (options.documents) {
    if (!options.documents->is_array()) fail(origin_, ": documents must be a JSON array");
    for (const auto& d : *options.documents)
      if (!d.is_object()) fail(origin_, ": documents must be objects with 'title' and 'text'");
  }
  if (options.tools) {
    if (!options.tools->is_array()) fail(origin_, ": tools must be a JSON array");
    for (const auto& d : *options.tools)
      if (!d.is_object()) fail(origin_, ": tools must be JSON schema objects");
  }
  // render(messages=..., tools=..., documents=..., add_generation_prompt=..., **kwargs) where
  // kwargs = {**special_tokens_map, **user_kwargs}.
  jinja::Value ctx = jinja::Value::make_dict();
  auto set = [&ctx](const std::string& k, jinja::Value v) {
    ctx.dict->set(jinja::Value::string(k), std::move(v));
  };
  for (auto it = special_tokens_.begin(); it != special_tokens_.end(); ++it)
    set(it.key(), jinja::from_json(it.value()));
  if (options.extra.is_object())
    for (auto it = options.extra.begin(); it != options.extra.end(); ++it)
      set(it.key(), jinja::from_json(it.value()));
  set("messages", jinja::Value::make_list(std::move(converted)));
  set("tools", options.tools ? jinja::from_json(*options.tools) : jinja::Value::none());
  set("documents", options.documents ? jinja::from_json(*options.documents) : jinja::Value::none());
  set("add_generation_prompt", jinja::Value::boolean(options.add_generation_prompt));
  jinja::RenderOptions ro;
  ro.limits = options.limits;
  ro.now = options.now;
  return entry.compiled->render(ctx, ro);
}

size_t run_chat_template_jsonl(const ChatTemplate& tmpl, std::istream& in, std::ostream& out) {
  std::string line;
  size_t line_no = 0, failed = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string origin = "input line " + std::to_string(line_no);
    const Json checked = parse_json(line, origin);  // depth limit and error positions
    if (!checked.is_object()) fail(origin, ": expected a JSON object");
    const OrderedJson req = OrderedJson::parse(line);  // again, keeping key order
    JsonFields f(checked, origin);
    ChatRenderOptions opt;
    opt.add_generation_prompt = f.get_or<bool>("add_generation_prompt", false);
    if (f.has("tools")) opt.tools = req["tools"];
    if (f.has("documents")) opt.documents = req["documents"];
    if (f.has("template_name")) opt.template_name = f.get<std::string>("template_name");
    for (auto it = req.begin(); it != req.end(); ++it) {
      const std::string& k = it.key();
      if (k == "messages" || k == "add_generation_prompt" || k == "tools" || k == "documents" ||
          k == "template_name")
        continue;
      opt.extra[k] = it.value();
    }
    if (!req.contains("messages")) fail(origin, ": missing field 'messages'");
    OrderedJson result = OrderedJson::object();
    try {
      result["text"] = tmpl.render(req["messages"], opt);
    } catch (const Error& e) {
      result["error"] = std::string(e.what());
      ++failed;
    }
    out << result.dump(-1, ' ', false, OrderedJson::error_handler_t::replace) << '\n';
  }
  return failed;
}

}  // namespace lathe
