#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "core/error.h"
#include "io/safetensors.h"
#include "io/tiny_checkpoint.h"
#include "support/mappings.h"
#include "support/run.h"

namespace lathe {
namespace {

TEST(Safetensors, WriteThenReadRoundTrips) {
  testing::ScratchDir dir("st");
  Tensor a = Tensor::zeros(DType::F32, {2, 3});
  for (int i = 0; i < 6; ++i) a.mut<float>()[i] = static_cast<float>(i) * 0.25f;
  Tensor b = a.to(DType::BF16).reshape({3, 2});
  write_safetensors(dir / "t.safetensors", {{"a", a}, {"b", b}}, {{"format", "pt"}});
  const auto f = SafetensorsFile::open(dir / "t.safetensors");
  EXPECT_EQ(f.metadata().at("format"), "pt");
  const Tensor ra = f.tensor("a"), rb = f.tensor("b");
  EXPECT_EQ(ra.shape(), (Shape{2, 3}));
  EXPECT_EQ(rb.dtype(), DType::BF16);
  EXPECT_FALSE(ra.owned());  // a view into the mapping, not a copy
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(ra.data<float>()[i], a.data<float>()[i]);
    EXPECT_EQ(rb.to(DType::F32).data<float>()[i], a.data<float>()[i]);
  }
  EXPECT_THROW(f.tensor("c"), Error);
}

using testing::vm_size_kib;

// Issue 19 item 7: an f32 tensor converted to bf16 gives its mapped pages back, so the source
// and the copy are not both held; asked for again, it is mapped anew with the same values.
TEST(Safetensors, ReleaseGivesTheMappedPagesBack) {
  testing::ScratchDir dir("st-release");
  Tensor big = Tensor::zeros(DType::F32, {1024, 16384});  // 64 MiB
  for (int64_t i = 0; i < big.numel(); i += 4099) big.mut<float>()[i] = static_cast<float>(i % 251);
  Tensor small = Tensor::zeros(DType::F32, {3});
  write_safetensors(dir / "t.safetensors", {{"big", big}, {"small", small}});
  big = Tensor();
  const auto f = SafetensorsFile::open(dir / "t.safetensors");
  // Measured around release() alone, with the converted copy alive throughout: a freed copy
  // may stay mapped (AddressSanitizer's quarantine keeps it), which is not what is tested.
  const Tensor bf = f.tensor("big").to(DType::BF16);
  const int64_t before = vm_size_kib();
  f.release("big");
  const int64_t after = vm_size_kib();
  EXPECT_LT(after, before - 60 * 1024) << "VmSize " << before << " -> " << after << " KiB";
  EXPECT_EQ(bf.to(DType::F32).data<float>()[4099 * 3], static_cast<float>(4099 * 3 % 251));
  const Tensor again = f.tensor("big");
  EXPECT_EQ(again.data<float>()[4099 * 5], static_cast<float>(4099 * 5 % 251));
  EXPECT_EQ(f.tensor("small").data<float>()[2], 0.0f);  // the rest of the mapping is intact
}

// A file of 2 MiB and more is mapped from a 2 MiB boundary with huge pages advised
// (core/pages.h), so that its cached pages can be mapped whole where they are 2 MiB folios.
TEST(Safetensors, ALargeFileIsMappedOnAHugePageBoundary) {
  testing::ScratchDir dir("st-huge");
  Tensor big = Tensor::zeros(DType::F32, {3, 1 << 20});  // 12 MiB
  big.mut<float>()[5] = 1.5f;
  write_safetensors(dir / "t.safetensors", {{"big", big}});
  const auto f = SafetensorsFile::open(dir / "t.safetensors");
  const Tensor view = f.tensor("big");
  ASSERT_FALSE(view.owned());
  EXPECT_EQ(view.data<float>()[5], 1.5f);
  uint64_t header = 0;  // the file's first 8 bytes: the header's length
  std::ifstream(dir / "t.safetensors", std::ios::binary)
      .read(reinterpret_cast<char*>(&header), sizeof header);
  const uint64_t offset = 8 + header + f.entries().at("big").begin;
  EXPECT_EQ((reinterpret_cast<uintptr_t>(view.data<void>()) - offset) % (uint64_t{1} << 21), 0u);
  if (testing::kernel_has_huge_pages()) {
    EXPECT_TRUE(testing::huge_pages_advised(view.data<void>()));
  }
}

TEST(TinyCheckpoint, GeneratorMatchesPythonReference) {
  // Values printed by tools/reference/weightgen.py: generate(1, "a", [4], 0, 1).
  const auto v = generate_weights(1, "a", 4, 0.0, 1.0);
  EXPECT_FLOAT_EQ(v[0], 0.50770867f);
  EXPECT_FLOAT_EQ(v[1], -0.12864995f);
  EXPECT_FLOAT_EQ(v[2], 0.6805092f);
  EXPECT_FLOAT_EQ(v[3], -0.25579417f);
}

}  // namespace
}  // namespace lathe
