// The text commands (tokenize, detokenize, chat-template) and generate --prompt / --chat,
// end to end through the binary.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "support/run.h"
#include "support/skip.h"

namespace lathe {
namespace {
using testing::run_lathe;
using testing::ScratchDir;
using Json = nlohmann::ordered_json;

const std::string kFixtures = std::string(LATHE_SOURCE_DIR) + "/tests/fixtures";

std::vector<Json> read_lines(const std::string& path, size_t limit) {
  std::ifstream in(path);
  std::vector<Json> out;
  std::string line;
  while (out.size() < limit && std::getline(in, line))
    if (!line.empty()) out.push_back(Json::parse(line));
  return out;
}

std::vector<Json> output_lines(const std::string& out) {
  std::vector<Json> lines;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) lines.push_back(Json::parse(line));
  return lines;
}

TEST(TextCli, TokenizeAndDetokenizeMatchTheTokenizersPackage) {
  ScratchDir dir("tok");
  const std::string fixture = kFixtures + "/tokenizers/bpe_bytelevel";
  const auto corpus = read_lines(kFixtures + "/tokenizers/corpus.jsonl", 60);
  const auto golden = read_lines(fixture + "/goldens.jsonl", 60);
  ASSERT_EQ(corpus.size(), 60u);
  // Alternate add_special_tokens so both modes and the line order are checked.
  std::ofstream enc(dir / "enc.jsonl"), dec(dir / "dec.jsonl");
  for (size_t i = 0; i < corpus.size(); ++i) {
    enc << Json{{"text", corpus[i]["text"]}, {"add_special_tokens", i % 2 == 0}}.dump() << "\n";
    dec << Json{{"ids", golden[i]["ids_special"]}, {"skip_special_tokens", i % 2 == 1}}.dump()
        << "\n";
  }
  enc.close();
  dec.close();
  auto r = run_lathe("tokenize " + fixture + " < " + (dir / "enc.jsonl").string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto lines = output_lines(r.out);
  ASSERT_EQ(lines.size(), corpus.size());
  for (size_t i = 0; i < lines.size(); ++i)
    EXPECT_EQ(lines[i]["ids"], golden[i][i % 2 == 0 ? "ids_special" : "ids"]) << "line " << i;
  r = run_lathe("detokenize " + fixture + " < " + (dir / "dec.jsonl").string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  lines = output_lines(r.out);
  ASSERT_EQ(lines.size(), corpus.size());
  for (size_t i = 0; i < lines.size(); ++i)
    EXPECT_EQ(lines[i]["text"], golden[i][i % 2 == 1 ? "text_skip" : "text"]) << "line " << i;
}

TEST(TextCli, MalformedTokenizerIsExitOne) {
  ScratchDir dir("badtok");
  testing::write_file(dir / "tokenizer.json",
                      R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}})");
  const auto r = run_lathe("tokenize " + dir.path().string() + " < /dev/null");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("tokenizer.json"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("merge"), std::string::npos) << r.out;
}

TEST(TextCli, ChatTemplateMatchesTransformers) {
  ScratchDir dir("chat");
  const Json conversations =
      Json::parse(testing::read_file(kFixtures + "/chat_templates/conversations.json"));
  const Json golden = Json::parse(testing::read_file(kFixtures + "/chat_templates/goldens.json"));
  std::ofstream in(dir / "in.jsonl");
  std::vector<std::string> expected;
  for (const Json& c : golden["cases"]) {
    if (c["fixture"] != "smollm2" || c.contains("error")) continue;
    const Json& conv = conversations[c["conversation"].get<std::string>()];
    Json line = {{"messages", conv["messages"]},
                 {"add_generation_prompt", c["add_generation_prompt"]}};
    if (conv.contains("tools")) line["tools"] = conv["tools"];
    in << line.dump() << "\n";
    expected.push_back(c["text"]);
  }
  in.close();
  ASSERT_GE(expected.size(), 4u);
  const auto r = run_lathe("chat-template " + kFixtures + "/chat_templates/smollm2 < " +
                           (dir / "in.jsonl").string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto lines = output_lines(r.out);
  ASSERT_EQ(lines.size(), expected.size());
  for (size_t i = 0; i < lines.size(); ++i) EXPECT_EQ(lines[i]["text"], expected[i]) << i;
}

TEST(TextCli, BrokenTemplatesAreExitOneWithPosition) {
  ScratchDir dir("tmpl");
  testing::write_file(dir / "in.jsonl", R"({"messages": [{"role": "user", "content": "Hi"}]})"
                                        "\n");
  const std::string run =
      "chat-template " + dir.path().string() + " < " + (dir / "in.jsonl").string();
  // A syntax error is found when the template loads.
  testing::write_file(dir / "tokenizer_config.json",
                      R"({"chat_template": "{% for m in messages %}{{ m.content }{% endfor %}"})");
  auto r = run_lathe(run);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("tokenizer_config.json:chat_template:1:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("syntax error"), std::string::npos) << r.out;
  // An undefined macro is found when it is called: the line still gets its answer.
  testing::write_file(dir / "tokenizer_config.json",
                      R"({"chat_template": "{{ no_such_macro(1) }}"})");
  r = run_lathe(run);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("{\"error\":"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("chat_template:1:17: 'no_such_macro' is undefined"), std::string::npos)
      << r.out;
}

// The whole text path on the real model: chat template, tokenizer, generation, decoding.
TEST(TextCli, SmolLM2ChatPromptMatchesTransformers) {
  const char* smol = std::getenv("LATHE_SMOLLM2_DIR");
  if (!smol) LATHE_SKIP_OUTSIDE_CI("SmolLM2 checkpoint not built (LATHE_SMOLLM2_DIR unset)");
  const Json golden = Json::parse(testing::read_file(kFixtures + "/smollm2/goldens.json"));
  int checked = 0;
  for (const Json& p : golden["prompts"]) {
    const bool chat = p["chat_template_applied"].get<bool>();
    ScratchDir dir("smol");
    testing::write_file(dir / "prompt.txt", p["prompt"].get<std::string>());
    const auto r =
        run_lathe("generate " + std::string(smol) + " --json --max-new-tokens 32 " +
                  (chat ? "--chat " : "") + "--prompt-file " + (dir / "prompt.txt").string());
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const Json out = Json::parse(r.out);
    EXPECT_EQ(out["prompt_ids"], p["prompt_ids"]) << p["name"];
    EXPECT_EQ(out["generated_ids"], p["generated_ids"]) << p["name"];
    EXPECT_EQ(out["text"], p["generated_text_skip_special"]) << p["name"];
    ++checked;
  }
  EXPECT_GE(checked, 5);
}

}  // namespace
}  // namespace lathe
