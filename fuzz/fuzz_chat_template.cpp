// Chat templates from hostile bytes: parse, then render a fixed conversation (messages with
// tool calls, tools, add_generation_prompt) as transformers' apply_chat_template would.
// Errors (syntax, raise_exception, limits, the work budget) are expected; crashes, hangs and
// leaks are not.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "fuzz_support.h"
#include "io/json.h"
#include "tokenizer/chat_template/chat_template.h"

namespace {

struct Conversation {
  lathe::OrderedJson messages;
  lathe::ChatRenderOptions options;
};

const Conversation& conversation() {
  static const Conversation c = [] {
    Conversation c;
    std::ifstream in(lathe::fuzz::source_dir() /
                     "tests/fixtures/chat_templates/conversations.json");
    const lathe::OrderedJson all = lathe::OrderedJson::parse(in);
    const lathe::OrderedJson& tools = all.at("tools");
    c.messages = tools.at("messages");
    c.options.tools = tools.at("tools");
    c.options.add_generation_prompt = true;
    c.options.extra = {{"enable_thinking", false}};
    c.options.now = 1700000000;  // strftime_now() is then deterministic
    // The limits stay the mechanism under test, scaled down: a million iterations is legal
    // but takes over -timeout=10 under ASan, which would read as a hang.
    c.options.limits.max_loop_iterations = 100000;
    c.options.limits.max_output_bytes = 1u << 20;
    // The work budget (exponential macro calls, loops over big values) scaled down alike: 20
    // million steps take longer than -timeout=10 under ASan.
    c.options.limits.max_steps = 2000000;
    return c;
  }();
  return c;
}

const lathe::Json& special_tokens() {
  static const lathe::Json s = {{"bos_token", "<s>"}, {"eos_token", "</s>"}};
  return s;
}

}  // namespace

// Loads the fixed data once, before the first input (so it does not count against -timeout).
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  conversation();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string source(reinterpret_cast<const char*>(data), size);
  const Conversation& c = conversation();
  try {
    const auto tmpl = lathe::ChatTemplate::from_string(source, "fuzz.jinja", special_tokens());
    (void)tmpl.render(c.messages, c.options);
  } catch (const lathe::Error&) {
  }
  return 0;
}
