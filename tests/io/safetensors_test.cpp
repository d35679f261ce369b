#include <gtest/gtest.h>

#include "core/error.h"
#include "io/safetensors.h"
#include "io/tiny_checkpoint.h"
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
