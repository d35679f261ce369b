// lathe logits MODEL --ids FILE.json --out FILE.safetensors [--hidden-states]
#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "core/error.h"
#include "io/safetensors.h"

namespace lathe {

int cmd_logits(int argc, char** argv) {
  std::vector<OptionSpec> options = {
      {"ids", "JSON|@FILE", "the token ids, a JSON list (or @FILE holding one)"},
      {"out", "FILE", "the safetensors file to write (tensor \"logits\", F32 [seq, vocab])"},
      {"hidden-states", "", "also write every named intermediate as \"hidden.<name>\""},
  };
  for (auto& o : runtime_options()) options.push_back(o);
  for (auto& o : model_options()) options.push_back(o);
  Args args("logits", "Writes teacher-forced logits for every position of a token sequence.",
            {"MODEL"}, options);
  args.parse(argc, argv, 2);
  if (args.help()) {
    std::cout << args.usage();
    return 0;
  }
  if (!args.has("ids") || !args.has("out"))
    throw UsageError("lathe logits: --ids and --out are required");
  const std::filesystem::path out = *args.get("out");
  std::error_code ec;
  if (std::filesystem::is_directory(out, ec))
    fail(out.string(), ": is a folder; --out names the safetensors file to write");
  const auto ids = parse_ids(*args.get("ids"), "--ids");
  if (ids.empty()) fail("--ids: the sequence is empty");
  auto rt = load_runtime(resolve_model_arg(args.positionals()[0], args), args);
  for (int32_t id : ids)
    if (id >= rt->model->info().vocab_size)
      fail("--ids: token id ", id, " is outside the vocabulary of ", rt->model->info().vocab_size);
  KVCache cache = rt->model->new_cache(
      std::max<int64_t>(rt->max_seq, static_cast<int64_t>(ids.size())), rt->ctx.kv_dtype);
  std::vector<NamedTensor> tensors;
  Trace trace = [&](const std::string& name, const Tensor& t) {
    tensors.push_back({"hidden." + name, t.clone()});  // the model reuses its buffers
  };
  Tensor logits =
      rt->model->forward(rt->ctx, ids, cache, true, args.flag("hidden-states") ? &trace : nullptr);
  tensors.insert(tensors.begin(), {"logits", logits});
  write_safetensors(out, tensors);  // no temporary file is left when this fails
  return 0;
}

}  // namespace lathe
