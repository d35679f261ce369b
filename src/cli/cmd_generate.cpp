// lathe generate MODEL (--prompt TEXT [--chat] | --prompt-ids JSON) [--json] ...
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <limits>
#include <optional>
#include <sstream>

#include "cli/commands.h"
#include "core/error.h"
#include "generate/generate.h"
#include "io/json.h"
#include "tokenizer/chat_template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace lathe {
namespace {

// --batch FILE: JSON lines {"prompt": TEXT} or {"prompt_ids": [...]}, each with an optional
// "max_new_tokens"; every field error names the file and line.
std::vector<BatchRequest> read_batch(const std::string& path, const Tokenizer* tokenizer,
                                     int64_t default_new_tokens) {
  std::istringstream in(read_text_file(path));
  std::vector<BatchRequest> requests;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string origin = cat(path, ":", number);
    const Json j = parse_json(line, origin);
    if (!j.is_object()) fail(origin, ": each line must be a JSON object");
    JsonFields f(j, origin);
    BatchRequest r;
    if (f.has("prompt") == f.has("prompt_ids"))
      fail(origin, ": give one of \"prompt\" or \"prompt_ids\"");
    if (f.has("prompt")) {
      if (!tokenizer) fail(origin, ": field \"prompt\" needs the folder's tokenizer.json");
      r.prompt = tokenizer->encode_prompt(f.get<std::string>("prompt"), true);
    } else {
      r.prompt = ids_from_json(f.at("prompt_ids"), origin, "field \"prompt_ids\"");
    }
    r.max_new_tokens = f.get_or<int64_t>("max_new_tokens", default_new_tokens);
    if (r.max_new_tokens < 0 || r.max_new_tokens > (1 << 20))
      fail(origin, ": field \"max_new_tokens\" is ", r.max_new_tokens, ", out of range");
    requests.push_back(std::move(r));
  }
  if (requests.empty()) fail(path, ": no requests (one JSON object per line)");
  return requests;
}

// Runs the requests as one batch and prints one JSON result per request, in order.
void run_batch(Runtime& rt, const std::vector<BatchRequest>& requests,
               const std::optional<Tokenizer>& tokenizer, const GenerateOptions& go) {
  const auto* model = dynamic_cast<const GraphModel*>(rt.model.get());
  if (!model) fail("internal: ", rt.model->info().architecture, " builds no step graph");
  for (size_t i = 0; i < requests.size(); ++i)
    for (int32_t id : requests[i].prompt)
      if (id >= model->info().vocab_size)
        fail("request ", i + 1, ": token id ", id, " is outside the vocabulary of ",
             model->info().vocab_size);
  std::vector<KVCache> caches;
  std::vector<KVCache*> ptrs;
  for (size_t i = 0; i < requests.size(); ++i)
    caches.push_back(model->new_cache(rt.max_seq, rt.ctx.kv_dtype));
  for (KVCache& c : caches) ptrs.push_back(&c);
  const auto results = generate_batch(*model, rt.ctx, ptrs, requests, go);
  for (size_t i = 0; i < results.size(); ++i) {
    const GenerateResult& r = results[i];
    Json out = {{"prompt_ids", requests[i].prompt},
                {"generated_ids", r.tokens},
                {"stopped_on_eos", r.stopped_on_eos},
                {"text", tokenizer ? tokenizer->decode(r.tokens, true) : ""}};
    std::cout << out.dump() << "\n";
  }
}

// The sampling options given on the command line, checked before anything is loaded; those
// not given come from generation_config.json.
struct SamplingArgs {
  std::optional<double> temperature, top_p, min_p, repetition_penalty;
  std::optional<int64_t> top_k;
  uint64_t seed = 0;
};

SamplingArgs read_sampling_args(const Args& args) {
  // The ranges transformers' logits processors accept; nan and inf are refused, as they
  // would turn every probability into nan.
  const double inf = std::numeric_limits<double>::infinity();
  auto number = [&](const char* name, double min, double max,
                    bool min_open) -> std::optional<double> {
    if (!args.has(name)) return std::nullopt;
    return args.get_double(name, 0, min, max, min_open);
  };
  SamplingArgs s;
  s.temperature = number("temperature", 0, inf, true);
  s.top_p = number("top-p", 0, 1, true);
  s.min_p = number("min-p", 0, 1, false);
  s.repetition_penalty = number("repetition-penalty", 0, inf, true);
  if (args.has("top-k")) s.top_k = args.get_int("top-k", 0, 0, int64_t{1} << 31);
  s.seed = static_cast<uint64_t>(args.get_int("seed", 0, 0, INT64_MAX));
  return s;
}

}  // namespace

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
      {"ignore-eos", "",
       "never stop at an end-of-sequence token: always generate --max-new-tokens (benchmarks)"},
      {"json", "", "print one JSON object: prompt ids, generated ids, text, timings"},
      {"batch", "FILE",
       "JSON lines of {\"prompt\": TEXT} or {\"prompt_ids\": [...]} (optional "
       "\"max_new_tokens\"), run as one batch; prints one JSON result per line, in order"},
  };
  for (auto& o : runtime_options()) options.push_back(o);
  for (auto& o : model_options()) options.push_back(o);
  Args args("generate",
            "Generates tokens from a Hugging Face checkpoint: a folder, or a Hub id "
            "ORG/NAME[@REVISION] in the Hugging Face cache (docs/hub.md).",
            {"MODEL"}, options);
  args.parse(argc, argv, 2);
  if (args.help()) {
    std::cout << args.usage();
    return 0;
  }
  if (args.has("prompt") + args.has("prompt-file") + args.has("prompt-ids") + args.has("batch") !=
      1)
    throw UsageError(
        "lathe generate: give one of --prompt, --prompt-file, --prompt-ids or --batch");
  if (args.has("batch") && (args.flag("chat") || args.has("system")))
    throw UsageError("lathe generate: --batch takes no --chat or --system");
  const SamplingArgs sampling = read_sampling_args(args);
  std::optional<std::string> text = args.get("prompt");
  if (auto file = args.get("prompt-file")) text = read_text_file(*file);
  if ((args.flag("chat") || args.has("system")) && !text)
    throw UsageError("lathe generate: --chat and --system need --prompt or --prompt-file");
  const std::filesystem::path dir = resolve_model_arg(args.positionals()[0], args);
  // The tokenizer is optional with --prompt-ids: generated text is shown when there is one.
  std::optional<Tokenizer> tokenizer;
  if (text || std::filesystem::exists(dir / "tokenizer.json"))
    tokenizer.emplace(Tokenizer::load(dir));
  std::vector<int32_t> prompt;
  if (args.has("batch")) {
    // read below, once the defaults from generation_config.json are known
  } else if (text) {
    if (args.flag("chat")) {
      // As transformers: apply_chat_template(..., add_generation_prompt=True) and encode the
      // text without adding special tokens again.
      OrderedJson messages = OrderedJson::array();
      if (args.has("system"))
        messages.push_back({{"role", "system"}, {"content", *args.get("system")}});
      messages.push_back({{"role", "user"}, {"content", *text}});
      ChatRenderOptions ro;
      ro.add_generation_prompt = true;
      prompt = tokenizer->encode_prompt(ChatTemplate::load(dir).render(messages, ro), false);
    } else {
      prompt = tokenizer->encode_prompt(*text, true);
    }
  } else {
    prompt = parse_ids(*args.get("prompt-ids"), "--prompt-ids");
  }
  auto rt = load_runtime(dir.string(), args);
  const GenerationConfig& gc = rt->checkpoint.generation();

  GenerateOptions go;
  go.max_new_tokens = args.get_int("max-new-tokens", gc.max_new_tokens.value_or(32), 0, 1 << 20);
  if (!args.flag("ignore-eos")) go.eos_token_ids = gc.eos_token_ids;
  SamplingOptions& s = go.sampling;
  s.do_sample = args.flag("sample") || (gc.do_sample && !args.flag("greedy"));
  s.temperature = sampling.temperature.value_or(gc.temperature);
  s.top_k = sampling.top_k.value_or(gc.top_k);
  s.top_p = sampling.top_p.value_or(gc.top_p);
  s.min_p = sampling.min_p.value_or(gc.min_p);
  s.repetition_penalty = sampling.repetition_penalty.value_or(gc.repetition_penalty);
  s.seed = sampling.seed;
  if (auto batch = args.get("batch")) {
    const auto requests = read_batch(*batch, tokenizer ? &*tokenizer : nullptr, go.max_new_tokens);
    run_batch(*rt, requests, tokenizer, go);
    return 0;
  }
  for (int32_t id : prompt)
    if (id >= rt->model->info().vocab_size)
      fail("--prompt-ids: token id ", id, " is outside the vocabulary of ",
           rt->model->info().vocab_size);

  KVCache cache = rt->model->new_cache(rt->max_seq, rt->ctx.kv_dtype);
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
