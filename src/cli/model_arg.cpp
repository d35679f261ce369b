// MODEL arguments: a checkpoint folder, or a Hub id resolved through the Hugging Face cache
// (io/hub_pull.h, docs/hub.md).
#include <unistd.h>

#include "cli/commands.h"
#include "io/hub_pull.h"

namespace lathe {

std::vector<OptionSpec> model_options() {
  return {
      {"pull", "",
       "when MODEL is a Hub id (ORG/NAME[@REVISION]) the cache lacks, download it first "
       "(as lathe pull)"},
      {"offline", "", "use only the Hugging Face cache, never the network (as HF_HUB_OFFLINE=1)"},
      {"token", "TOKEN", "Hub token for --pull of a gated or private model (default: $HF_TOKEN)"},
  };
}

std::string resolve_model_arg(const std::string& arg, const Args& args) {
  hub::ResolveOptions o;
  o.pull = args.flag("pull");
  o.offline = args.flag("offline") || hub::offline_from_env();
  o.token = args.get("token");
  o.progress = ::isatty(STDERR_FILENO) == 1;
  return hub::resolve_model(arg, o).string();
}

}  // namespace lathe
