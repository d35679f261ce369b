// A planned decode step allocates nothing: every intermediate lives in the plan's arena, the
// kernels take their scratch from it, and the thread pool borrows its jobs. Counted with a
// replacement of the global operator new in this test binary alone.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <new>

#include "io/tiny_checkpoint.h"
#include "models/engine.h"
#include "models/registry.h"
#include "support/run.h"

namespace {
std::atomic<bool> counting{false};
std::atomic<int64_t> allocations{0};
}  // namespace

// Every plain and array form is replaced, so that each pointer is freed by the family that
// allocated it (AddressSanitizer checks); malloc and free underneath, which GCC cannot see
// through.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
namespace {
void* counted(std::size_t n) noexcept {
  if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1);
  return std::malloc(n ? n : 1);
}
}  // namespace

void* operator new(std::size_t n) {
  if (void* p = counted(n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  if (void* p = counted(n)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  return counted(n);
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  return counted(n);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}

namespace lathe {
namespace {

// Schedules that run every Linear group as one (the compiled mode's fused groups).
class GroupedSource : public graph::ScheduleSource {
 public:
  const graph::Schedule* schedule_for(const graph::Graph& bucket, const Backend& backend,
                                      ThreadPool& pool, int64_t max_context, int64_t,
                                      int64_t) override {
    const auto groups = graph::linear_groups(bucket, backend);
    grouped += static_cast<int64_t>(groups.size());
    kept_.push_back(std::make_unique<graph::Schedule>(
        graph::plan_schedule(bucket, backend, pool.size(), max_context, groups)));
    return kept_.back().get();
  }
  int64_t grouped = 0;

 private:
  std::vector<std::unique_ptr<graph::Schedule>> kept_;
};

// Planned decode steps of fixture `name` after warm-up make no heap allocation (with
// `grouped`, on schedules that run Linear groups as one).
void expect_no_decode_allocations(const std::string& name, bool reference, bool bf16_kv,
                                  const ModelOptions& options, bool grouped = false) {
  testing::ScratchDir dir("alloc");
  build_tiny_checkpoint(std::filesystem::path(LATHE_SOURCE_DIR) / "tests/fixtures/tiny" / name,
                        dir.path(), {});
  const Checkpoint ckpt = Checkpoint::open(dir.path());
  auto model = load_model(ckpt, options);
  const auto* graph = dynamic_cast<const GraphModel*>(model.get());
  ASSERT_NE(graph, nullptr);
  ThreadPool pool(2);
  Context ctx{&pool, reference, false};
  GroupedSource source;
  if (grouped) ctx.compiled = &source;
  Engine engine(*graph, ctx);
  KVCache cache = model->new_cache(64, bf16_kv ? DType::BF16 : DType::F32);
  KVCache* caches[] = {&cache};
  const int32_t prompt[] = {1, 5, 9, 2}, positions[] = {0, 1, 2, 3}, seq[] = {0, 0, 0, 0};
  const int32_t last = 3, zero = 0;
  counting = true;  // the first steps build and plan graphs: the counter sees those
  engine.step(prompt, positions, seq, {&last, 1}, caches);
  int32_t id = 7, pos = 4;
  engine.step({&id, 1}, {&pos, 1}, {&zero, 1}, {&zero, 1}, caches);  // builds the decode plan
  counting = false;
  EXPECT_GT(allocations.load(), 100);
  allocations = 0;
  counting = true;
  for (int step = 0; step < 8; ++step) {
    pos = static_cast<int32_t>(cache.length);
    id = (id * 31 + 3) % 50;
    engine.step({&id, 1}, {&pos, 1}, {&zero, 1}, {&zero, 1}, caches);
  }
  counting = false;
  EXPECT_EQ(allocations.load(), 0);
  EXPECT_EQ(engine.plans_built(), 2);
  EXPECT_EQ(cache.length, 13);
  if (grouped && !reference) {
    EXPECT_GT(source.grouped, 0) << name;
  }
}

// (fixture, reference backend, bf16 KV cache)
class DecodeAllocations : public ::testing::TestWithParam<std::tuple<std::string, bool, bool>> {};

TEST_P(DecodeAllocations, NoneAfterWarmUp) {
  const auto& [name, reference, bf16_kv] = GetParam();
  expect_no_decode_allocations(name, reference, bf16_kv, {});
}

// Quantized matrices (--quantize): the activations' quantization takes the plan's workspace.
TEST(QuantizedDecodeAllocations, NoneAfterWarmUp) {
  for (DType type : {DType::Q8_0, DType::Q4_0})
    for (bool reference : {false, true})
      for (const char* name : {"llama_tied_gqa", "qwen3_moe_headdim_mlp_only"})
        expect_no_decode_allocations(name, reference, false, {.quantize = type});
}

// Linear groups run as one take their matrices' parts on the stack.
TEST(GroupedDecodeAllocations, NoneAfterWarmUp) {
  expect_no_decode_allocations("llama_tied_gqa", false, false, {.quantize = DType::Q8_0}, true);
  expect_no_decode_allocations("llama_tied_gqa", false, true, {.quantize = DType::Q4_0}, true);
}

INSTANTIATE_TEST_SUITE_P(
    Engine, DecodeAllocations,
    ::testing::Combine(::testing::Values("llama_tied_gqa", "mistral_window",
                                         "qwen3_untied_headdim_yarn",
                                         "qwen3_5_dense_interval3_tied", "qwen3_next_moe_hybrid",
                                         "deepseek_v3_mla_lora_groups", "mamba2_groups",
                                         "glm_moe_dsa_topk7_dense_first"),
                       ::testing::Bool(), ::testing::Bool()),
    [](const auto& info) {
      return std::get<0>(info.param) + (std::get<1>(info.param) ? "_reference" : "_fast") +
             (std::get<2>(info.param) ? "_bf16kv" : "");
    });

}  // namespace
}  // namespace lathe
