// Real chat templates rendered by lathe against transformers' apply_chat_template (goldens.json,
// made by tools/chat_template_goldens/make_goldens.py), plus template loading and JSON lines.
#include <gtest/gtest.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "support/skip.h"
#include "tokenizer/chat_template/chat_template.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;

const fs::path kFixtures = fs::path(LATHE_SOURCE_DIR) / "tests/fixtures/chat_templates";

OrderedJson read_ordered(const fs::path& path) {
  std::ifstream in(path);
  return OrderedJson::parse(in);
}

// goldens.json records the local time that make_goldens.py pinned datetime.now() to.
std::time_t golden_now(const std::string& iso) {
  std::tm tm{};
  std::istringstream(iso) >> std::get_time(&tm, "%Y-%m-%dT%H:%M:%S");
  tm.tm_isdst = -1;
  return std::mktime(&tm);
}

struct GoldenCase {
  std::string name;
  OrderedJson json;
};

std::vector<GoldenCase> load_goldens() {
  const OrderedJson doc = read_ordered(kFixtures / "goldens.json");
  std::vector<GoldenCase> cases;
  for (const auto& c : doc.at("cases")) {
    std::string name = c.at("fixture").get<std::string>() + "_" +
                       c.at("conversation").get<std::string>() +
                       (c.at("add_generation_prompt").get<bool>() ? "_gen" : "");
    for (char& ch : name)
      if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
    OrderedJson with_now = c;
    with_now["now"] = doc.at("now");
    cases.push_back({name, with_now});
  }
  return cases;
}

void PrintTo(const GoldenCase& c, std::ostream* os) {
  *os << c.name;
}

class RealTemplate : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(RealTemplate, MatchesTransformers) {
  const OrderedJson& c = GetParam().json;
  static const OrderedJson conversations = read_ordered(kFixtures / "conversations.json");
  const OrderedJson& conv = conversations.at(c.at("conversation").get<std::string>());
  const ChatTemplate tmpl = ChatTemplate::load(kFixtures / c.at("fixture").get<std::string>());
  ChatRenderOptions opt;
  opt.add_generation_prompt = c.at("add_generation_prompt").get<bool>();
  if (conv.contains("tools")) opt.tools = conv["tools"];
  if (conv.contains("documents")) opt.documents = conv["documents"];
  if (conv.contains("kwargs")) opt.extra = conv["kwargs"];
  opt.now = golden_now(c.at("now").get<std::string>());
  if (c.contains("error")) {
    EXPECT_THROW(tmpl.render(conv.at("messages"), opt), lathe::Error)
        << "transformers raised: " << c.at("error").get<std::string>();
    return;
  }
  try {
    EXPECT_EQ(tmpl.render(conv.at("messages"), opt), c.at("text").get<std::string>());
  } catch (const lathe::Error& e) {
    ADD_FAILURE() << "lathe raised: " << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Goldens, RealTemplate, ::testing::ValuesIn(load_goldens()),
                         [](const auto& info) { return info.param.name; });

// ---- loading ----

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("lathe_chat_template_" +
             std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }
  void write(const std::string& name, const std::string& text) const {
    fs::create_directories((path_ / name).parent_path());
    std::ofstream(path_ / name) << text;
  }

 private:
  fs::path path_;
};

const OrderedJson kUser = OrderedJson::parse(R"([{"role": "user", "content": "hi"}])");

TEST(ChatTemplateLoad, JinjaFileTakesPriorityOverConfig) {
  TempDir dir;
  dir.write("tokenizer_config.json", R"({"chat_template": "config", "eos_token": "</s>"})");
  dir.write("chat_template.jinja", "file {{ eos_token }}\n");
  EXPECT_EQ(ChatTemplate::load(dir.path()).render(kUser), "file </s>");
}

// docs/limits.md: a chat template file may hold 4 MiB; one byte more is refused, naming it.
TEST(ChatTemplateLoad, TemplateFilesAbove4MiBAreRefused) {
  constexpr size_t kLimit = size_t{4} << 20;
  const std::string tail = "#}{{ messages[0].content }}";
  std::string text = "{#" + std::string(kLimit - 2 - tail.size(), 'x') + tail;
  ASSERT_EQ(text.size(), kLimit);
  TempDir dir;
  dir.write("chat_template.jinja", text);
  EXPECT_EQ(ChatTemplate::load(dir.path()).render(kUser), "hi");
  dir.write("chat_template.jinja", "{#x" + text.substr(2));
  try {
    ChatTemplate::load(dir.path());
    ADD_FAILURE() << "a template of 4 MiB + 1 byte loaded";
  } catch (const lathe::Error& e) {
    EXPECT_NE(std::string(e.what()).find("chat_template.jinja: " + std::to_string(kLimit + 1) +
                                         " bytes is too large for a chat template (limit " +
                                         std::to_string(kLimit) + ")"),
              std::string::npos)
        << e.what();
  }
}

TEST(ChatTemplateLoad, ConfigStringAndAddedTokenForm) {
  TempDir dir;
  dir.write(
      "tokenizer_config.json",
      R"({"chat_template": "{{ bos_token }}|{{ eos_token }}|{{ unk_token is defined }}|{{ pad_token }}",
                "bos_token": {"__type": "AddedToken", "content": "<s>"}, "eos_token": "</s>",
                "unk_token": null, "pad_token": "<pad>"})");
  EXPECT_EQ(ChatTemplate::load(dir.path()).render(kUser), "<s>|</s>|False|<pad>");
}

TEST(ChatTemplateLoad, NamedTemplates) {
  TempDir dir;
  dir.write(
      "tokenizer_config.json",
      R"({"chat_template": [{"name": "default", "template": "D"}, {"name": "tool_use", "template": "T"},
                                  {"name": "rag", "template": "R"}]})");
  const ChatTemplate t = ChatTemplate::load(dir.path());
  EXPECT_EQ(t.render(kUser), "D");
  ChatRenderOptions with_tools;
  with_tools.tools = OrderedJson::array();
  EXPECT_EQ(t.render(kUser, with_tools), "T");  // transformers picks tool_use when tools are given
  EXPECT_EQ(ChatTemplate::load(dir.path(), "rag").render(kUser), "R");
  ChatRenderOptions named;
  named.template_name = "rag";
  EXPECT_EQ(t.render(kUser, named), "R");
  EXPECT_THROW(ChatTemplate::load(dir.path(), "nope"), lathe::Error);
}

TEST(ChatTemplateLoad, AdditionalTemplatesFolderAndProcessorJson) {
  TempDir dir;
  dir.write("chat_template.jinja", "main");
  dir.write("additional_chat_templates/extra.jinja", "extra");
  EXPECT_EQ(ChatTemplate::load(dir.path()).render(kUser), "main");
  EXPECT_EQ(ChatTemplate::load(dir.path(), "extra").render(kUser), "extra");
  TempDir proc;
  proc.write("chat_template.json", R"({"chat_template": "processor"})");
  EXPECT_EQ(ChatTemplate::load(proc.path()).render(kUser), "processor");
}

TEST(ChatTemplateLoad, MissingTemplateAndErrorsNameTheOrigin) {
  TempDir dir;
  dir.write("tokenizer_config.json", R"({"eos_token": "</s>"})");
  EXPECT_THROW(ChatTemplate::load(dir.path()), lathe::Error);
  dir.write("chat_template.jinja", "line1\n{% if %}");
  try {
    ChatTemplate::load(dir.path());
    ADD_FAILURE() << "no error";
  } catch (const lathe::Error& e) {
    EXPECT_NE(std::string(e.what()).find("chat_template.jinja:2:7: syntax error"),
              std::string::npos)
        << e.what();
  }
}

TEST(ChatTemplateRender, MessagesAreNormalisedLikeTransformers) {
  const ChatTemplate t = ChatTemplate::from_string(
      "{% for m in messages %}{{ m|tojson }}{% endfor %}|{{ tools }}|{{ documents }}|{{ "
      "add_generation_prompt }}",
      "inline");
  // None values are dropped; reasoning is aliased to thinking and reasoning_content.
  const OrderedJson msgs =
      OrderedJson::parse(R"([{"role": "assistant", "content": null, "reasoning": "why", "z": 1}])");
  EXPECT_EQ(
      t.render(msgs),
      R"({"thinking": "why", "role": "assistant", "reasoning": "why", "z": 1, "reasoning_content": "why"}|None|None|False)");
  EXPECT_THROW(t.render(OrderedJson::array()), lathe::Error);  // empty conversation
  EXPECT_THROW(t.render(OrderedJson::parse(R"(["not an object"])")), lathe::Error);
}

TEST(ChatTemplateRender, ExtraVariablesOverrideSpecialTokens) {
  const ChatTemplate t = ChatTemplate::from_string("{{ bos_token }}{{ enable_thinking }}", "inline",
                                                   Json{{"bos_token", "<s>"}});
  ChatRenderOptions opt;
  opt.extra = OrderedJson{{"enable_thinking", false}};
  EXPECT_EQ(t.render(kUser, opt), "<s>False");
  opt.extra["bos_token"] = "X";
  EXPECT_EQ(t.render(kUser, opt), "XFalse");
}

TEST(ChatTemplateJsonl, OneOutputLinePerInputLine) {
  const ChatTemplate t = ChatTemplate::from_string(
      "{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}{% if "
      "add_generation_prompt %}>{% endif %}"
      "{% if tools %}{{ tools|length }} tools{% endif %}{% if documents %}{{ documents[0].title "
      "}}{% endif %}"
      "{% if messages[0].content == 'boom' %}{{ raise_exception('no') }}{% endif %}{{ extra_var }}",
      "inline");
  std::istringstream in(
      R"({"messages": [{"role": "user", "content": "a"}], "add_generation_prompt": true}
{"messages": [{"role": "user", "content": "b"}], "tools": [{"type": "function"}], "documents": [{"title": "T", "text": "x"}]}

{"messages": [{"role": "user", "content": "boom"}]}
{"messages": [{"role": "user", "content": "ü"}], "extra_var": "!"}
)");
  std::ostringstream out;
  run_chat_template_jsonl(t, in, out);
  std::istringstream lines(out.str());
  std::vector<Json> results;
  for (std::string line; std::getline(lines, line);) results.push_back(Json::parse(line));
  ASSERT_EQ(results.size(), 4u);
  EXPECT_EQ(results[0]["text"], "[user:a]>");
  EXPECT_EQ(results[1]["text"], "[user:b]1 toolsT");
  EXPECT_NE(results[2]["error"].get<std::string>().find("raise_exception: no"), std::string::npos);
  EXPECT_EQ(results[3]["text"], "[user:ü]!");
  std::istringstream bad("{\"messages\": [}\n");
  EXPECT_THROW(run_chat_template_jsonl(t, bad, out), lathe::Error);
}

// The shared data folder sits beside the checkout and may be absent on a user's clone; the
// fixtures above are copies, this only checks they have not drifted from it.
TEST(SharedTemplates, FixturesMatchSharedCopies) {
  const fs::path shared = fs::path(LATHE_SHARED_DIR) / "data/chat_templates";
  if (!fs::exists(shared)) LATHE_SKIP_OUTSIDE_CI("shared data folder not found at " << shared);
  for (const char* family : {"qwen3", "llama3.1", "deepseek-v3", "gemma3"}) {
    std::ifstream a(shared / (std::string(family) + ".jinja"));
    std::stringstream sa;
    sa << a.rdbuf();
    const ChatTemplate t = ChatTemplate::load(kFixtures / family);
    if (std::string(family) == "qwen3") continue;  // stored as its tokenizer_config.json
    EXPECT_EQ(t.source(), sa.str()) << family;
  }
}

}  // namespace
}  // namespace lathe
