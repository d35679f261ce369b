// lathe tokenize MODEL | detokenize MODEL | chat-template MODEL: JSON lines in, JSON lines out.
#include <iostream>

#include "cli/commands.h"
#include "core/error.h"
#include "tokenizer/chat_template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace lathe {
namespace {

Args text_args(const std::string& command, const std::string& summary) {
  return Args(command, summary, {"MODEL"}, model_options());
}

}  // namespace

int cmd_tokenize(int argc, char** argv) {
  Args args = text_args("tokenize",
                        "Encodes JSON lines {\"text\": ..., \"add_special_tokens\": true} from "
                        "stdin with MODEL's tokenizer.json (a folder or a Hub id); prints "
                        "{\"ids\": [...]} per line.");
  args.parse(argc, argv, 2);
  if (args.help()) {
    std::cout << args.usage();
    return 0;
  }
  run_tokenize_jsonl(Tokenizer::load(resolve_model_arg(args.positionals()[0], args)), std::cin,
                     std::cout);
  return 0;
}

int cmd_detokenize(int argc, char** argv) {
  Args args = text_args("detokenize",
                        "Decodes JSON lines {\"ids\": [...], \"skip_special_tokens\": false} "
                        "from stdin; prints {\"text\": ...} per line.");
  args.parse(argc, argv, 2);
  if (args.help()) {
    std::cout << args.usage();
    return 0;
  }
  run_detokenize_jsonl(Tokenizer::load(resolve_model_arg(args.positionals()[0], args)), std::cin,
                       std::cout);
  return 0;
}

int cmd_chat_template(int argc, char** argv) {
  Args args = text_args("chat-template",
                        "Renders JSON lines {\"messages\": [...], \"add_generation_prompt\": "
                        "bool, \"tools\": [...]} from stdin with the folder's chat template, "
                        "as transformers' apply_chat_template; prints {\"text\": ...} per line.");
  args.parse(argc, argv, 2);
  if (args.help()) {
    std::cout << args.usage();
    return 0;
  }
  // Every line gets its answer; a template that raised on any line makes the exit code 1.
  const size_t failed = run_chat_template_jsonl(
      ChatTemplate::load(resolve_model_arg(args.positionals()[0], args)), std::cin, std::cout);
  if (failed) std::cerr << "error: the template raised on " << failed << " line(s)\n";
  return failed ? 1 : 0;
}

}  // namespace lathe
