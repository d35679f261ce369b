// Runs a tiny fixture (tests/fixtures/tiny/<name>) against the goldens transformers made for
// it: teacher-forced logits, per-layer hidden states and 32 greedy tokens.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "graph/executor.h"
#include "io/tiny_checkpoint.h"
#include "lab/compare.h"
#include "lab/tolerances.h"

namespace lathe {

struct GoldenCheck {
  std::string name, architecture;
  LogitComparison logits;
  LayerReport layers;
  std::vector<int32_t> greedy_reference, greedy_actual;
  std::vector<double> greedy_margins;  // reference top-1 minus top-2 logit per step
  std::optional<int64_t> first_token_mismatch;
  std::string made_by;  // "transformers X, torch Y"
};

// Builds the fixture's checkpoint in `work_dir` with `build` options, runs it and compares.
// `edit`, when given, is called with work_dir once the checkpoint is written (tests inject
// faults there: a perturbed weight must be caught).
GoldenCheck check_golden_fixture(
    const std::filesystem::path& fixture, const std::filesystem::path& work_dir,
    const TinyBuildOptions& build, std::optional<DType> dtype, Context& ctx,
    const std::function<void(const std::filesystem::path&)>& edit = {});

}  // namespace lathe
