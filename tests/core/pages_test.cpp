#include "core/pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "core/tensor.h"
#include "support/mappings.h"

namespace lathe {
namespace {

bool aligned(const void* p, uintptr_t to) {
  return reinterpret_cast<uintptr_t>(p) % to == 0;
}

// A tensor of 2 MiB and more starts on a 2 MiB boundary with huge pages advised, so that the
// kernel can back its whole 2 MiB pages with huge pages; a smaller one is 64-byte aligned, as
// before, and holds no more than it asks for.
TEST(Pages, LargeTensorsAreOnHugePagesAndSmallOnesAreNot) {
  const Tensor big = Tensor::zeros(DType::F32, {3, 1 << 19});  // 6 MiB
  EXPECT_TRUE(aligned(big.data<void>(), kHugePage));
  for (int64_t i = 0; i < big.numel(); i += 4093) EXPECT_EQ(big.data<float>()[i], 0.0f);
  if (testing::kernel_has_huge_pages()) {
    EXPECT_TRUE(testing::huge_pages_advised(big.data<void>()));
  }

  const Tensor small = Tensor::zeros(DType::F32, {100});
  EXPECT_TRUE(aligned(small.data<void>(), 64));

  // clone() allocates as zeros() does, without zeroing first: every byte is the source's, and
  // the bytes past the end up to the 64-byte line are zero.
  Tensor odd = Tensor::zeros(DType::BF16, {1 << 20, 3});  // 6 MiB, not a whole line's multiple
  for (int64_t i = 0; i < odd.numel(); ++i) odd.mut<uint16_t>()[i] = static_cast<uint16_t>(i * 7);
  const Tensor copy = odd.clone();
  EXPECT_TRUE(copy.owned());
  EXPECT_TRUE(aligned(copy.data<void>(), kHugePage));
  for (int64_t i = 0; i < odd.numel(); ++i)
    ASSERT_EQ(copy.data<uint16_t>()[i], static_cast<uint16_t>(i * 7)) << i;
}

// allocate_pages: the 2 MiB boundary from 2 MiB up; only the whole 2 MiB pages inside are
// advised (advise_huge_pages), so a buffer's ragged tail keeps small pages.
TEST(Pages, OnlyWholeHugePagesAreAdvised) {
  const std::shared_ptr<void> below = allocate_pages(kHugePage - 64);
  const std::shared_ptr<void> at = allocate_pages(kHugePage + 4096);
  ASSERT_NE(below, nullptr);
  ASSERT_NE(at, nullptr);
  EXPECT_TRUE(aligned(below.get(), 64));
  EXPECT_TRUE(aligned(at.get(), kHugePage));
  if (testing::kernel_has_huge_pages()) {
    EXPECT_TRUE(testing::huge_pages_advised(at.get()));
    EXPECT_FALSE(testing::huge_pages_advised(static_cast<uint8_t*>(at.get()) + kHugePage));
  }
}

// Large buffers take no more address space than their pages (outside AddressSanitizer, whose
// heap keeps them): the lab's address-space limit counts it.
TEST(Pages, LargeBuffersTakeOnlyTheirPagesOfAddressSpace) {
  const int64_t before = testing::vm_size_kib();
  std::vector<std::shared_ptr<void>> buffers;
  for (int i = 0; i < 40; ++i) buffers.push_back(allocate_pages((size_t{5} << 20) + 4096 * i));
  const int64_t grown = testing::vm_size_kib() - before;
  const int64_t asked = 40 * 5 * 1024 + 4 * (39 * 40 / 2);
  EXPECT_GE(grown, asked);
  if (!LATHE_ASAN) {
    EXPECT_LT(grown, asked + 4 * 1024) << "VmSize grew " << grown << " KiB for " << asked;
  }
}

}  // namespace
}  // namespace lathe
