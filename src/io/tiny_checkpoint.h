// Tiny checkpoints for tests and the bundled lab catalog: a fixture folder holds config.json,
// generation_config.json and weights.json (a tensor list with a seed); the weights are
// regenerated bit for bit by the counter-based generator that tools/reference/weightgen.py
// also implements, so the repository carries configs and goldens, not weights.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace lathe {

// Value i of tensor `name`: center + scale * u, u in [-1, 1) from splitmix64.
std::vector<float> generate_weights(uint64_t seed, const std::string& name, int64_t count,
                                    double center, double scale);

struct TinyBuildOptions {
  DType dtype = DType::F32;  // F32, BF16 or F16 storage
  int shards = 1;            // > 1 writes model-0000i-of-0000N.safetensors + index
};

// Writes a checkpoint folder `out` from `fixture`. Returns the number of tensors written.
size_t build_tiny_checkpoint(const std::filesystem::path& fixture, const std::filesystem::path& out,
                             const TinyBuildOptions& opts);

// Multiplies every value of F32 tensor `name` in the single-file checkpoint `dir` by `factor`
// (a fault the lab and the golden tests must catch). Throws when the tensor is absent.
void scale_checkpoint_tensor(const std::filesystem::path& dir, const std::string& name,
                             float factor);

// Sets the number `field` of `dir`/config.json to value * factor + offset (a config fault the
// lab and the golden tests must catch: an off-by-one rope base, a wrong norm eps). Throws
// when the field is absent or not a number.
void edit_config_number(const std::filesystem::path& dir, const std::string& field, double factor,
                        double offset);

}  // namespace lathe
