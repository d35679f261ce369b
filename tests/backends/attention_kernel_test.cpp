// The fast attention kernels' decode pass shared between heads (isa_kernels.inc attend_heads:
// a kv head's keys and values past half of L2) gives each head the bits of its own pass, and
// stays within tolerance of the reference kernel, on every level this CPU runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cpu/isa.h"
#include "backends/cpu/kernels.h"

namespace lathe::cpu {
namespace {

struct Case {
  const char* what;
  int64_t heads, kv_heads, head_dim, v_dim, pos0;
  bool bf16 = false;
  int64_t window = 0;
  float softcap = 0.0f;
  bool sinks = false;
  int64_t chosen_k = 0;  // DeepSeek sparse attention: that many chosen keys, -1 ended
};

// The output of one decode step over seeded caches, with scratch rows for `pass_heads` heads
// (1: every head its own pass).
std::vector<float> run(const Case& c, bool reference, int64_t pass_heads, int threads) {
  const int64_t seq = c.pos0 + 1, k_row = c.kv_heads * c.head_dim, v_row = c.kv_heads * c.v_dim;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto values = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = u(rng);
    return v;
  };
  std::vector<float> kf = values(seq * k_row), vf = values(seq * v_row);
  const std::vector<float> q = values(c.heads * c.head_dim), sinks = values(c.heads);
  std::vector<uint16_t> kb(kf.size()), vb(vf.size());
  if (c.bf16) {
    auto top = [](float f) {
      uint32_t w;
      std::memcpy(&w, &f, 4);
      return static_cast<uint16_t>(w >> 16);
    };
    std::transform(kf.begin(), kf.end(), kb.begin(), top);
    std::transform(vf.begin(), vf.end(), vb.begin(), top);
  }
  std::vector<int32_t> chosen(static_cast<size_t>(std::max<int64_t>(c.chosen_k, 1)), -1);
  if (c.chosen_k > 0) {
    std::vector<int32_t> all(static_cast<size_t>(seq));
    for (int64_t i = 0; i < seq; ++i) all[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    std::shuffle(all.begin(), all.end(), rng);
    const int64_t n = c.chosen_k - 3;  // the last three end the list
    std::sort(all.begin(), all.begin() + n);
    std::copy(all.begin(), all.begin() + n, chosen.begin());
  }
  const AttentionScratch rows = attention_scratch(c.heads, seq + 16, c.v_dim);
  const int64_t stride = rows.head_floats * pass_heads;
  std::vector<float> scratch(static_cast<size_t>(threads * stride)), out(c.heads * c.v_dim);
  AttentionArgs a{q.data(),
                  c.bf16 ? static_cast<const void*>(kb.data()) : kf.data(),
                  c.bf16 ? static_cast<const void*>(vb.data()) : vf.data(),
                  out.data(),
                  1,
                  c.pos0,
                  c.heads,
                  c.kv_heads,
                  c.head_dim,
                  c.window,
                  0.125f,
                  c.softcap,
                  nullptr,
                  0,
                  0,
                  scratch.data(),
                  stride,
                  c.v_dim,
                  v_row,
                  c.v_dim,
                  c.sinks ? sinks.data() : nullptr};
  a.kv_bf16 = c.bf16;
  a.scratch_heads = pass_heads;
  if (c.chosen_k > 0) {
    a.chosen = chosen.data();
    a.chosen_k = c.chosen_k;
  }
  ThreadPool pool(threads);
  if (reference)
    attention_reference(a);
  else
    attention_fast(a, pool);
  return out;
}

const Case kCases[] = {
    {"gqa_f32", 6, 2, 64, 64, 2100},
    {"gqa_bf16", 6, 2, 64, 64, 2100, true},
    {"odd_dims_window_cap_sinks", 5, 5, 80, 48, 1700, false, 1600, 30.0f, true},
    {"chosen", 4, 1, 96, 96, 1500, false, 0, 0.0f, false, 1400},
};

TEST(AttentionKernel, SharedDecodePassGivesEachHeadsOwnBits) {
  const Isa saved = active_isa();
  for (Isa isa : {Isa::Avx2, Isa::Avx512}) {
    if (isa > detected_isa()) continue;
    set_active_isa(isa);
    for (const Case& c : kCases) {
      for (int threads : {1, 2}) {
        SCOPED_TRACE(std::string(isa_name(isa)) + " " + c.what + " threads " +
                     std::to_string(threads));
        const std::vector<float> alone = run(c, false, 1, threads);
        const std::vector<float> shared =
            run(c, false, attention_scratch(c.heads, c.pos0 + 17, c.v_dim).heads, threads);
        ASSERT_EQ(0, std::memcmp(alone.data(), shared.data(), alone.size() * sizeof(float)));
        const std::vector<float> ref = run(c, true, 1, 1);
        double err = 0, norm = 0;
        for (size_t i = 0; i < ref.size(); ++i) {
          err += (shared[i] - ref[i]) * double(shared[i] - ref[i]);
          norm += ref[i] * double(ref[i]);
        }
        EXPECT_LT(err / norm, 1e-10);
      }
    }
  }
  set_active_isa(saved);
}

// The cases above take the shared pass: a kv head's keys and values past 512 KiB, and room
// for more than one head in the scratch.
TEST(AttentionKernel, CasesAreLargeEnoughToShareAPass) {
  for (const Case& c : kCases) {
    const int64_t keys = c.chosen_k > 0 ? c.chosen_k : c.window > 0 ? c.window : c.pos0 + 1;
    EXPECT_GT(keys * (c.head_dim + c.v_dim) * (c.bf16 ? 2 : 4), 512 << 10) << c.what;
    EXPECT_GT(attention_scratch(c.heads, c.pos0 + 17, c.v_dim).heads, 1) << c.what;
  }
}

}  // namespace
}  // namespace lathe::cpu
