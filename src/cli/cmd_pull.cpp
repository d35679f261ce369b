// lathe pull ORG/NAME[@REVISION]: a Hub model's files into the Hugging Face cache.
#include <unistd.h>

#include <iomanip>
#include <iostream>

#include "cli/commands.h"
#include "core/error.h"
#include "io/hub_pull.h"

namespace lathe {

int cmd_pull(int argc, char** argv) {
  Args args("pull",
            "Downloads the files of a Hugging Face Hub model that lathe reads (config.json, "
            "generation_config.json, the safetensors weights and their index, the tokenizer "
            "and chat template files) into the Hugging Face cache ($HF_HUB_CACHE, else "
            "$HF_HOME/hub, else ~/.cache/huggingface/hub) in the layout huggingface_hub uses, "
            "so transformers finds them too, and prints the snapshot folder. REVISION is a "
            "branch, tag or commit (default main). Files are verified (sha256 of weights, git "
            "blob id of the rest) before they appear; an interrupted pull resumes where it "
            "stopped. A gated model needs a token (--token or $HF_TOKEN) of an account that "
            "accepted its licence on the model page. $HF_ENDPOINT names a mirror; "
            "HF_HUB_OFFLINE=1 or --offline only looks the model up in the cache. See "
            "docs/hub.md.",
            {"ORG/NAME[@REVISION]"},
            {{"token", "TOKEN", "Hub access token (default: $HF_TOKEN, else $HF_HOME/token)"},
             {"endpoint", "URL",
              "the Hub or a mirror (default: $HF_ENDPOINT, else "
              "https://huggingface.co)"},
             {"cache", "DIR", "the cache folder (default: as huggingface_hub chooses)"},
             {"jobs", "N", "parallel downloads (default 8)"},
             {"offline", "", "no network: print the cached snapshot, or fail"}});
  args.parse(argc, argv, 2);
  if (args.help()) {
    std::cout << args.usage();
    return 0;
  }
  const std::string text = args.positionals()[0];
  const auto ref = hub::parse_model_ref(text);
  if (!ref)
    throw UsageError(
        cat("lathe pull: \"", text, "\" is not a Hub model id ORG/NAME[@REVISION] (see --help)"));
  hub::PullOptions o;
  o.cache = args.get_or("cache", hub::cache_dir().string());
  o.jobs = static_cast<int>(args.get_int("jobs", 8, 1, 64));
  if (args.flag("offline") || hub::offline_from_env()) {
    const auto snap = hub::cached_snapshot(o.cache, *ref);
    if (!snap)
      fail(ref->text(), ": not in the Hugging Face cache ", o.cache.string(),
           ", and offline mode (--offline or HF_HUB_OFFLINE=1) forbids downloading it");
    std::cout << snap->string() << "\n";
    return 0;
  }
  std::string endpoint = args.get_or("endpoint", hub::endpoint_from_env());
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
  if (endpoint.rfind("http://", 0) != 0 && endpoint.rfind("https://", 0) != 0)
    throw UsageError(
        cat("lathe pull: the endpoint must be an http:// or https:// URL, got \"", endpoint, "\""));
  o.endpoint = endpoint;
  o.token = args.has("token") ? args.get("token") : hub::token_from_env();
  const bool tty = ::isatty(STDERR_FILENO) == 1;
  o.progress = tty;
  const hub::PullResult r = hub::pull(*ref, o);
  if (tty)
    std::cerr << std::fixed << std::setprecision(1) << ref->text() << ": commit " << r.commit
              << ", " << r.files.size() << " files, " << r.bytes_total / 1048576.0 << " MiB ("
              << r.bytes_downloaded / 1048576.0 << " MiB downloaded)\n";
  std::cout << r.snapshot.string() << "\n";
  return 0;
}

}  // namespace lathe
