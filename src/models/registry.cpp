#include "models/registry.h"

#include "core/error.h"

namespace lathe {

const std::vector<ArchitectureEntry>& architectures() {
  static const std::vector<ArchitectureEntry> table = {
      {"LlamaForCausalLM", "llama", load_llama},
      {"MistralForCausalLM", "mistral", load_mistral},
      {"Qwen2ForCausalLM", "qwen2", load_qwen2},
      {"Qwen3ForCausalLM", "qwen3", load_qwen3},
  };
  return table;
}

const ArchitectureEntry* find_architecture(const std::string& name) {
  for (const auto& e : architectures())
    if (name == e.name) return &e;
  return nullptr;
}

std::unique_ptr<Model> load_model(const Checkpoint& ckpt, const ModelOptions& opts) {
  const std::string arch = ckpt.architecture();
  if (arch.empty())
    fail(ckpt.config_path(), ": field \"architectures\" is missing or not a list of names");
  const ArchitectureEntry* e = find_architecture(arch);
  if (!e) {
    std::string known;
    for (const auto& a : architectures())
      known += (known.empty() ? "" : ", ") + std::string(a.name);
    fail(ckpt.config_path(), ": field \"architectures\" names ", arch,
         ", which lathe does not support (supported: ", known, ")");
  }
  return e->load(ckpt, opts);
}

}  // namespace lathe
