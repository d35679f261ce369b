#include "models/weights.h"

#include <gtest/gtest.h>

#include <fstream>

#include "core/pages.h"
#include "io/safetensors.h"
#include "support/mappings.h"
#include "support/run.h"

namespace lathe {
namespace {

// A checkpoint folder holding "big", an f32 matrix of 64 MiB, and "norm", a vector.
void write_checkpoint(const std::filesystem::path& dir) {
  std::ofstream(dir / "config.json") << R"({"architectures": ["LlamaForCausalLM"]})";
  Tensor big = Tensor::zeros(DType::F32, {1024, 16384});
  for (int64_t i = 0; i < big.numel(); i += 4099) big.mut<float>()[i] = static_cast<float>(i % 251);
  Tensor norm = Tensor::zeros(DType::F32, {16});
  norm.mut<float>()[3] = 2.5f;
  write_safetensors(dir / "model.safetensors", {{"big", big}, {"norm", norm}});
}

// Checkpoint::copy_views (ModelOptions::copy_weights, --copy-weights): a tensor used as stored is
// copied once into memory of its own, 2 MiB-aligned for huge pages, and its mapped pages are given
// back, so that the copy does not double what the process holds; fetched again, the copy is
// shared.
TEST(Weights, CopiesTheTensorsUsedAsStoredAndGivesTheirMappingBack) {
  testing::ScratchDir dir("weights-copy");
  write_checkpoint(dir.path());
  Checkpoint ckpt = Checkpoint::open(dir.path());
  ckpt.set_copy_views(true);
  Weights w(ckpt, DType::F32);
  const int64_t before = testing::vm_size_kib();
  const Tensor big = w.matrix("big", {1024, 16384});
  const int64_t after = testing::vm_size_kib();
  ASSERT_TRUE(big.owned());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big.data<void>()) % kHugePage, 0u);
  EXPECT_LT(after, before + 16 * 1024) << "VmSize " << before << " -> " << after << " KiB";
  for (int64_t i = 0; i < big.numel(); i += 4099 * 7)
    ASSERT_EQ(big.data<float>()[i], static_cast<float>(i % 251)) << i;
  EXPECT_EQ(w.matrix("big", {1024, 16384}).data<void>(), big.data<void>());
  const Tensor norm = w.vector("norm", {16});
  EXPECT_TRUE(norm.owned());
  EXPECT_EQ(norm.data<float>()[3], 2.5f);
}

// Without it (the default), the tensors stay views of the mapping.
TEST(Weights, KeepsViewsOfTheMappingWhenAskedTo) {
  testing::ScratchDir dir("weights-map");
  write_checkpoint(dir.path());
  const Checkpoint ckpt = Checkpoint::open(dir.path());
  Weights w(ckpt, DType::F32);
  const Tensor big = w.matrix("big", {1024, 16384});
  EXPECT_FALSE(big.owned());
  EXPECT_EQ(big.data<float>()[4099 * 2], static_cast<float>(4099 * 2 % 251));
  EXPECT_FALSE(w.vector("norm", {16}).owned());
}

}  // namespace
}  // namespace lathe
