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
const ArchitectureEntry* find_architecture(const std::string& name);

// Loads the model a checkpoint's config names. Throws lathe::Error naming config.json's
// "architectures" field when it is missing or unsupported.
std::unique_ptr<Model> load_model(const Checkpoint& ckpt, const ModelOptions& opts);

// Loader functions, one per model file.
std::unique_ptr<Model> load_llama(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_mistral(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_qwen2(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_qwen3(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_gemma(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_gemma2(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_granite(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_arcee(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_seed_oss(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_ernie4_5(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_smollm3(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_olmo2(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_phi3(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_starcoder2(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_gemma3(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_gpt2(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_opt(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_gpt_bigcode(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_bloom(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_falcon(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_gpt_neox(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_gptj(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_phi(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_stablelm(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_olmo(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_cohere(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_glm4(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_exaone4(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_apertus(const Checkpoint&, const ModelOptions&);

}  // namespace lathe
