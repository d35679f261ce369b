// Runs a tiny fixture (tests/fixtures/tiny/<name>) against the goldens transformers made for
// it: teacher-forced logits, per-layer hidden states, the logits of the first decode steps and
// 32 greedy tokens.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "graph/executor.h"
#include "io/tiny_checkpoint.h"
#include "lab/compare.h"
#include "lab/tolerances.h"
#include "models/model.h"

namespace lathe {

struct GoldenCheck {
  std::string name, architecture;
  LogitComparison logits;
  LayerReport layers;
  // Decode: the prompt's last row, then one row per reference greedy token fed through the
  // KV cache, against transformers' generate logits (goldens' decode_logits).
  LogitComparison decode;
  std::optional<int64_t> decode_first_diverging_step;  // first row past the tolerance
  std::vector<int32_t> greedy_reference, greedy_actual;
  std::vector<double> greedy_margins;  // reference top-1 minus top-2 logit per step
  std::optional<int64_t> first_token_mismatch;
  std::string made_by;  // "transformers X, torch Y"
  // A checkpoint stored in bf16 or f16 (TinyBuildOptions::dtype) against what transformers
  // computes in f32 from the same rounded weights (goldens' logits_bf16, decode_logits_bf16,
  // rounded_weights.bf16; f16 alike): the same computation, so f32 tolerances apply. Unset
  // for f32 storage, or goldens made before they held these.
  struct Rounded {
    std::string storage;  // "bf16" or "f16"
    LogitComparison logits, decode;
    std::optional<int64_t> decode_first_diverging_step;
    std::vector<int32_t> greedy_reference;
    std::vector<double> greedy_margins;
    std::optional<int64_t> first_token_mismatch;
  };
  std::optional<Rounded> rounded;
  // Mixtures of experts: the experts each MoE layer chose for every teacher-forced token, in
  // the router's order, against transformers' (goldens' route_ids; ties included), and the
  // largest difference of their weights.
  int64_t route_layers = 0;   // MoE layers compared
  int64_t route_choices = 0;  // (layer, token, slot) entries compared
  int64_t route_mismatches = 0;
  std::optional<std::string> first_route_mismatch;  // "layer.1.route, token 5: [3, 1] for [1, 3]"
  double route_weight_max_error = 0;
  // With ModelOptions::quantize: how many matrices were quantized at load.
  int64_t quantized_matrices = 0;
};

// Builds the fixture's checkpoint in `work_dir` with `build` options, loads it with `model`
// options, runs it and compares.
// The fault-injection seams of the must-fail tests: `edit`, when given, is called with
// work_dir once the checkpoint is written (a perturbed weight, an edited config.json);
// `edit_cache` with the decode check's cache after the prompt (a simulated cache bug).
GoldenCheck check_golden_fixture(const std::filesystem::path& fixture,
                                 const std::filesystem::path& work_dir,
                                 const TinyBuildOptions& build, const ModelOptions& model,
                                 Context& ctx,
                                 const std::function<void(const std::filesystem::path&)>& edit = {},
                                 const std::function<void(KVCache&)>& edit_cache = {});

// The decode path's logits: `prompt` in one step (its last row), then each of `fed` one token
// at a time through the KV cache (or, at the step where the model asks for its cache to be
// rebuilt, the whole sequence so far from an empty cache, as generate does):
// [1 + fed.size(), vocab]. `edit_cache`, when given, is
// called with the cache after the prompt: a seam for tests only (a simulated cache bug,
// written through KVCache's public fields), never set on a real run.
Tensor decode_logits(const Model& model, Context& ctx, std::span<const int32_t> prompt,
                     std::span<const int32_t> fed,
                     const std::function<void(KVCache&)>& edit_cache = {});

// Multiplies the values `layer` holds for the cache's last filled position by `factor` (every
// state tensor of a recurrent layer): a cache bug that moves the following decode steps'
// logits but not the prompt's.
void scale_cached_values(KVCache& cache, int64_t layer, float factor);

}  // namespace lathe
