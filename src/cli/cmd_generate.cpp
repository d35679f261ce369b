// lathe generate MODEL_DIR (--prompt TEXT [--chat] | --prompt-ids JSON) [--json] ...
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>

#include "cli/commands.h"
#include "core/error.h"
#include "generate/generate.h"
#include "io/json.h"
#include "tokenizer/chat_template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace lathe {

int cmd_generate(int argc, char** argv) {
  std::vector<OptionSpec> options = {
      {"prompt", "TEXT", "the prompt text, encoded with the folder's tokenizer.json"},
      {"prompt-file", "FILE", "read the prompt text from FILE (kept byte for byte)"},
      {"chat", "", "send --prompt as a user message through the chat template"},
      {"system", "TEXT", "with --chat: a system message before the user message"},
      {"prompt-ids", "JSON|@FILE", "the prompt as a JSON list of token ids (no tokenizer needed)"},
      {"max-new-tokens", "N", "tokens to generate (default: generation_config's, else 32)"},
      {"greedy", "", "pick the most likely token (the default unless generation_config samples)"},
      {"sample", "", "sample instead of greedy decoding"},
      {"temperature", "T", "sampling temperature (default: generation_config's, else 1)"},
      {"top-k", "K", "keep the K most likely tokens (0: off)"},
      {"top-p", "P", "keep the smallest set of tokens whose probability reaches P"},
      {"min-p", "P", "drop tokens below P times the top token's probability"},
      {"repetition-penalty", "R", "divide (multiply when negative) logits of seen tokens by R"},
      {"seed", "N", "random seed for sampling (default 0)"},
      {"json", "", "print one JSON object: prompt ids, generated ids, text, timings"},
  };
  for (auto& o : runtime_options()) options.push_back(o);
  Args args("generate", "Generates tokens from a Hugging Face checkpoint folder.", {"MODEL_DIR"},
            options);
  args.parse(argc, argv, 2);
  if (args.help()) {
    std::cout << args.usage();
    return 0;
  }
  if (args.has("prompt") + args.has("prompt-file") + args.has("prompt-ids") != 1)
    throw UsageError("lathe generate: give one of --prompt, --prompt-file or --prompt-ids");
  std::optional<std::string> text = args.get("prompt");
  if (auto file = args.get("prompt-file")) text = read_text_file(*file);
  if ((args.flag("chat") || args.has("system")) && !text)
    throw UsageError("lathe generate: --chat and --system need --prompt or --prompt-file");
  const std::filesystem::path dir = args.positionals()[0];
  // The tokenizer is optional with --prompt-ids: generated text is shown when there is one.
  std::optional<Tokenizer> tokenizer;
  if (text || std::filesystem::exists(dir / "tokenizer.json"))
    tokenizer.emplace(Tokenizer::load(dir));
  std::vector<int32_t> prompt;
  if (text) {
    if (args.flag("chat")) {
      // As transformers: apply_chat_template(..., add_generation_prompt=True) and encode the
      // text without adding special tokens again.
      OrderedJson messages = OrderedJson::array();
      if (args.has("system"))
        messages.push_back({{"role", "system"}, {"content", *args.get("system")}});
      messages.push_back({{"role", "user"}, {"content", *text}});
      ChatRenderOptions ro;
      ro.add_generation_prompt = true;
      prompt = tokenizer->encode(ChatTemplate::load(dir).render(messages, ro), false);
    } else {
      prompt = tokenizer->encode(*text, true);
    }
  } else {
    prompt = parse_ids(*args.get("prompt-ids"), "--prompt-ids");
  }
  auto rt = load_runtime(dir.string(), args);
  const GenerationConfig& gc = rt->checkpoint.generation();

  GenerateOptions go;
  go.max_new_tokens = args.get_int("max-new-tokens", gc.max_new_tokens.value_or(32), 0, 1 << 20);
  go.eos_token_ids = gc.eos_token_ids;
  SamplingOptions& s = go.sampling;
  s.do_sample = args.flag("sample") || (gc.do_sample && !args.flag("greedy"));
  s.temperature = args.get_double("temperature", gc.temperature);
  s.top_k = args.get_int("top-k", gc.top_k, 0, int64_t{1} << 31);
  s.top_p = args.get_double("top-p", gc.top_p);
  s.min_p = args.get_double("min-p", gc.min_p);
  s.repetition_penalty = args.get_double("repetition-penalty", gc.repetition_penalty);
  s.seed = static_cast<uint64_t>(args.get_int("seed", 0, 0, INT64_MAX));
  for (int32_t id : prompt)
    if (id >= rt->model->info().vocab_size)
      fail("--prompt-ids: token id ", id, " is outside the vocabulary of ",
           rt->model->info().vocab_size);

  KVCache cache = rt->model->new_cache(rt->max_seq);
  const bool json = args.flag("json");
  std::optional<StreamDecoder> stream;
  if (tokenizer) stream.emplace(*tokenizer, true);
  auto on_token = [&](int32_t id) {
    if (json) return;
    if (stream)
      std::cout << stream->feed(id) << std::flush;
    else
      std::cout << id << ' ' << std::flush;
  };
  GenerateResult r = generate(*rt->model, rt->ctx, cache, prompt, go, on_token);
  if (json) {
    const double tps = r.decode_seconds > 0 && r.tokens.size() > 1
                           ? static_cast<double>(r.tokens.size() - 1) / r.decode_seconds
                           : 0.0;
    Json out = {{"prompt_ids", prompt},
                {"generated_ids", r.tokens},
                {"stopped_on_eos", r.stopped_on_eos},
                {"text", tokenizer ? tokenizer->decode(r.tokens, true) : ""},
                {"timings",
                 {{"prefill_seconds", r.prefill_seconds},
                  {"decode_seconds", r.decode_seconds},
                  {"decode_tokens_per_second", tps}}}};
    std::cout << out.dump() << "\n";
  } else {
    std::cout << (stream ? stream->finish() : "") << "\n";
  }
  return 0;
}

}  // namespace lathe
