// Which architectures lathe runs: config.json's "architectures"[0] -> a loader.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/model.h"

namespace lathe {

using ModelLoader = std::unique_ptr<Model> (*)(const Checkpoint&, const ModelOptions&);

struct ArchitectureEntry {
  const char* name;        // Hugging Face class name, e.g. "LlamaForCausalLM"
  const char* model_type;  // config.json model_type, e.g. "llama"
  ModelLoader load;
  const char* notes;  // one line for docs/architectures.md: how it differs, what it covers
};

// Every supported architecture, in the order the docs list them.
const std::vector<ArchitectureEntry>& architectures();

// Architectures of the most used models that lathe does not run yet, with what each needs
// beyond what lathe has (docs/architectures.md; the lab names it for an unsupported row).
struct PlannedArchitecture {
  const char* name;
  const char* needs;
};
const std::vector<PlannedArchitecture>& planned_architectures();
const PlannedArchitecture* find_planned_architecture(const std::string& name);
const ArchitectureEntry* find_architecture(const std::string& name);

// Loads the model a checkpoint's config names. Throws lathe::Error naming config.json's
// "architectures" field when it is missing or unsupported.
std::unique_ptr<Model> load_model(const Checkpoint& ckpt, const ModelOptions& opts);

}  // namespace lathe
