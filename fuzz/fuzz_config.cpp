// config.json from hostile bytes, through the config reading of every architecture. The
// bytes replace the config.json of a tiny checkpoint of the architecture they name
// ("architectures"[0]; Llama when they name none), so reading goes as far as it would with a
// real checkpoint: Checkpoint::open, generation fields, load_model (config fields checked
// against the weights), and a two-token forward pass when the model loads.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "fuzz_support.h"
#include "graph/executor.h"
#include "io/checkpoint.h"
#include "io/json.h"
#include "io/tiny_checkpoint.h"
#include "models/registry.h"

namespace {

namespace fs = std::filesystem;

// One tiny fixture per architecture, built once per process.
const std::map<std::string, fs::path>& checkpoints() {
  static const std::map<std::string, fs::path> dirs = [] {
    std::map<std::string, fs::path> m;
    const fs::path fixtures = lathe::fuzz::source_dir() / "tests/fixtures/tiny";
    for (const auto& entry : fs::directory_iterator(fixtures)) {
      const lathe::Json cfg = lathe::read_json_file(entry.path() / "config.json");
      const std::string arch = cfg.at("architectures").at(0).get<std::string>();
      if (m.count(arch)) continue;
      const fs::path out = lathe::fuzz::scratch_dir() / entry.path().filename();
      lathe::build_tiny_checkpoint(entry.path(), out, {});
      m.emplace(arch, out);
    }
    return m;
  }();
  return dirs;
}

fs::path pick(const std::string& text) {
  const auto& dirs = checkpoints();
  try {
    const lathe::Json j = lathe::parse_json(text, "fuzz");
    if (j.is_object()) {
      auto it = j.find("architectures");
      if (it != j.end() && it->is_array() && !it->empty() && (*it)[0].is_string()) {
        auto d = dirs.find((*it)[0].get<std::string>());
        if (d != dirs.end()) return d->second;
      }
    }
  } catch (const lathe::Error&) {
  }
  return dirs.at("LlamaForCausalLM");
}

}  // namespace

// Loads the fixed data once, before the first input (so it does not count against -timeout).
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  checkpoints();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const fs::path dir = pick(text);
  lathe::fuzz::write_text(dir / "config.json", text);
  try {
    const auto ckpt = lathe::Checkpoint::open(dir);
    auto model = lathe::load_model(ckpt, {});
    static lathe::ThreadPool pool(1);
    lathe::Context ctx{&pool, false};
    auto cache = model->new_cache(4);
    const std::vector<int32_t> ids = {1, 2};
    (void)model->forward(ctx, ids, cache, true);
  } catch (const lathe::Error&) {
  }
  return 0;
}
