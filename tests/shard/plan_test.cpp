// Shard plans and the core planner on tiny fixtures: every tensor is in the plan once; the
// ranks' slices of every split tensor put back together give the tensor byte for byte; fewer
// kv heads than ranks give each rank the kv head its q heads use; counts that do not divide
// are refused with the numbers; the planner picks 1 core, 2, or none; experts are split
// evenly; and `lathe inspect --plan` reports it.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "io/tiny_checkpoint.h"
#include "models/engine.h"
#include "models/registry.h"
#include "shard/planner.h"
#include "support/run.h"

namespace lathe::shard {
namespace {
namespace fs = std::filesystem;

// A fixture built, loaded with its fetches logged, and analysed. Held by pointer: the
// checkpoint keeps the log's address.
struct Planned {
  testing::ScratchDir dir{"shard"};
  Checkpoint ckpt;
  FetchLog log;
  std::unique_ptr<Model> model;
  Layout layout;
};

std::unique_ptr<Planned> planned(const std::string& name) {
  auto p = std::make_unique<Planned>();
  build_tiny_checkpoint(testing::fixture_dir(name), p->dir.path(), {.dtype = DType::F32});
  p->ckpt = Checkpoint::open(p->dir.path());
  p->ckpt.set_fetch_log(&p->log);
  p->model = load_model(p->ckpt, {});
  p->layout = analyze(*p->model, p->log);
  return p;
}

// Puts the ranks' slices of `t` back where their ranges say; every element must be covered
// (by one rank, or the same bytes by several where the plan replicates), and the result must
// equal the stored tensor.
void expect_reassembles(const Tensor& stored, const TensorShard& s, int degree) {
  SCOPED_TRACE(s.name + " (" + kind_name(s.kind) + ")");
  const Shape& shape = stored.shape();
  const size_t d = static_cast<size_t>(s.dim);
  int64_t outer = 1, inner = 1;
  for (size_t i = 0; i < d; ++i) outer *= shape[i];
  for (size_t i = d + 1; i < shape.size(); ++i) inner *= shape[i];
  const size_t unit = static_cast<size_t>(inner) * dtype_size(stored.dtype());
  const int64_t whole = shape[d];
  std::vector<uint8_t> out(stored.nbytes(), 0);
  std::vector<int> covered(static_cast<size_t>(whole), 0);
  for (int r = 0; r < degree; ++r) {
    const Tensor part = slice(stored, s, r);
    if (s.ranks[r].empty()) continue;
    ASSERT_EQ(part.dim(s.dim), s.extent(r));
    const auto* src = part.data<uint8_t>();
    for (int64_t o = 0; o < outer; ++o)
      for (const Range& range : s.ranks[r]) {
        const size_t bytes = static_cast<size_t>(range.size()) * unit;
        std::memcpy(out.data() + static_cast<size_t>(o * whole + range.begin) * unit, src, bytes);
        src += bytes;
      }
    for (const Range& range : s.ranks[r])
      for (int64_t i = range.begin; i < range.end; ++i) ++covered[static_cast<size_t>(i)];
  }
  for (int64_t i = 0; i < whole; ++i) {
    ASSERT_GE(covered[static_cast<size_t>(i)], 1) << "index " << i << " held by no rank";
    if (s.kind != ShardKind::Replicated && s.note.find("kv heads") == std::string::npos) {
      ASSERT_EQ(covered[static_cast<size_t>(i)], 1) << "index " << i << " held twice";
    }
  }
  EXPECT_EQ(std::memcmp(out.data(), stored.data<uint8_t>(), out.size()), 0);
}

class DenseTp : public ::testing::TestWithParam<std::string> {};

TEST_P(DenseTp, EveryTensorOnceAndSlicesReassemble) {
  auto p = planned(GetParam());
  ASSERT_EQ(p->layout.tp_unsupported, "");
  const ShardPlan plan = make_plan(p->layout, p->ckpt, p->log, Parallelism::Tensor, 2);
  std::vector<std::string> names;
  for (const TensorShard& t : plan.tensors) names.push_back(t.name);
  EXPECT_EQ(names, p->ckpt.tensor_names());
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());
  int split = 0;
  uint64_t total = 0;
  for (const TensorShard& t : plan.tensors) {
    ASSERT_EQ(t.ranks.size(), 2u) << t.name;
    if (t.kind == ShardKind::Unused) continue;
    total += t.bytes;
    expect_reassembles(p->ckpt.tensor(t.name), t, 2);
    split += t.kind == ShardKind::Column || t.kind == ShardKind::Row;
  }
  EXPECT_GT(split, 0);
  EXPECT_GT(plan.count(ShardKind::Column), 0);
  EXPECT_GT(plan.count(ShardKind::Row), 0);
  EXPECT_GT(plan.count(ShardKind::Vocab), 0);
  // Each rank holds less than the whole, and together at least the whole.
  for (uint64_t b : plan.rank_bytes) EXPECT_LT(b, total);
  EXPECT_GE(plan.rank_bytes[0] + plan.rank_bytes[1] + 2, total);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DenseTp,
                         ::testing::Values("llama_tied_gqa", "qwen3_tied", "phi3_untied_window",
                                           "olmo2_untied", "falcon_parallel_mqa_tied",
                                           "gpt_bigcode_mqa_tied", "qwen2_tied",
                                           "starcoder2_tied_window_bias", "gpt2_tied",
                                           "llava_multimodal_text", "gemma4_text_kv_shared"));

// Every fixture at degree 2, tensor-parallel and (with experts) expert-parallel: a plan in
// which every tensor is once and every split one reassembles, or one lathe::Error naming a
// count that does not divide.
TEST(ShardPlan, EveryFixturePlansOrRefusesWithAMessage) {
  int plans = 0, refusals = 0;
  for (const auto& entry :
       fs::directory_iterator(fs::path(LATHE_SOURCE_DIR) / "tests/fixtures/tiny")) {
    const std::string name = entry.path().filename().string();
    SCOPED_TRACE(name);
    auto p = planned(name);
    std::vector<Parallelism> ways = {Parallelism::Tensor};
    if (p->layout.experts > 0) ways.push_back(Parallelism::Expert);
    for (Parallelism par : ways) {
      SCOPED_TRACE(parallelism_name(par));
      ShardPlan plan;
      try {
        plan = make_plan(p->layout, p->ckpt, p->log, par, 2);
      } catch (const Error& e) {
        // The only refusal left at degree 2: a count that does not divide.
        const std::string m = e.what();
        EXPECT_NE(m.find(p->layout.architecture), std::string::npos) << m;
        EXPECT_NE(m.find("divide"), std::string::npos) << m;
        ++refusals;
        continue;
      }
      ++plans;
      ASSERT_EQ(plan.tensors.size(), p->ckpt.tensor_names().size());
      for (const TensorShard& t : plan.tensors) {
        if (t.kind == ShardKind::Unused || t.kind == ShardKind::Replicated) continue;
        if (t.dtype != "F32" && t.dtype != "BF16" && t.dtype != "F16") continue;
        expect_reassembles(p->ckpt.tensor(t.name), t, 2);
      }
    }
  }
  EXPECT_GT(plans, 140);
  EXPECT_GT(refusals, 0);
}

// The plan's tensor whose checkpoint name ends with `suffix`.
const TensorShard& find(const ShardPlan& plan, const std::string& suffix) {
  for (const TensorShard& t : plan.tensors)
    if (t.name.ends_with(suffix)) return t;
  throw std::runtime_error("no tensor ending in " + suffix);
}

TEST(ShardPlan, FusedQkvIsSlicedPartByPart) {
  auto p = planned("phi3_untied_window");  // qkv_proj [(4 + 4 + 4) * 16, 64], gate_up_proj
  const ShardPlan plan = make_plan(p->layout, p->ckpt, p->log, Parallelism::Tensor, 2);
  const TensorShard& qkv = find(plan, "layers.0.self_attn.qkv_proj.weight");
  ASSERT_EQ(qkv.kind, ShardKind::Column);
  const int64_t hd = p->layout.head_dim, q = p->layout.heads * hd, kv = p->layout.kv_heads * hd;
  // Rank 1: the second half of q's rows, of k's and of v's.
  const std::vector<Range> want = {{q / 2, q}, {q + kv / 2, q + kv}, {q + kv + kv / 2, q + 2 * kv}};
  EXPECT_EQ(qkv.ranks[1], want);
  const TensorShard& gate_up = find(plan, "layers.0.mlp.gate_up_proj.weight");
  ASSERT_EQ(gate_up.kind, ShardKind::Column);
  EXPECT_EQ(gate_up.ranks[0].size(), 2u);  // its gate block and its up block
  const TensorShard& o = find(plan, "layers.0.self_attn.o_proj.weight");
  EXPECT_EQ(o.kind, ShardKind::Row);
  EXPECT_EQ(o.dim, 1);
}

TEST(ShardPlan, Conv1dWeightsAreSplitAlongTheirStoredDimensions) {
  // GPT-2 keeps c_attn [hidden, 3 * hidden] (in, out): q, k and v are column blocks.
  auto p = planned("gpt2_tied");
  const ShardPlan plan = make_plan(p->layout, p->ckpt, p->log, Parallelism::Tensor, 2);
  const TensorShard& qkv = find(plan, "h.0.attn.c_attn.weight");
  ASSERT_EQ(qkv.kind, ShardKind::Column);
  EXPECT_EQ(qkv.dim, 1);
  const int64_t h = qkv.shape[0];
  EXPECT_EQ(qkv.ranks[0], (std::vector<Range>{{0, h / 2}, {h, h + h / 2}, {2 * h, 2 * h + h / 2}}));
  const TensorShard& proj = find(plan, "h.0.attn.c_proj.weight");
  EXPECT_EQ(proj.kind, ShardKind::Row);
  EXPECT_EQ(proj.dim, 0);
  EXPECT_EQ(find(plan, "h.0.mlp.c_fc.weight").dim, 1);
}

TEST(ShardPlan, MultimodalCheckpointsKeepTheirOwnNames) {
  auto p = planned("llava_multimodal_text");
  const ShardPlan plan = make_plan(p->layout, p->ckpt, p->log, Parallelism::Tensor, 2);
  // The text model's tensors under the checkpoint's names; the vision tower unused.
  EXPECT_EQ(find(plan, "language_model.model.layers.0.self_attn.q_proj.weight").kind,
            ShardKind::Column);
  int64_t unused = 0;
  for (const TensorShard& t : plan.tensors)
    if (t.name.starts_with("vision_tower.")) unused += t.kind == ShardKind::Unused;
  EXPECT_GT(unused, 0);
}

bool holds(const std::vector<Range>& ranges, Range want) {
  for (const Range& r : ranges)
    if (r.begin <= want.begin && want.end <= r.end) return true;
  return false;
}

TEST(ShardPlan, PerHeadInterleavedQkvGivesEachRankWholeHeads) {
  // GPT-NeoX keeps query_key_value per head [q k v]: rank r's heads are one block of rows.
  auto p = planned("gpt_neox_sequential_tied_nobias");
  const ShardPlan plan = make_plan(p->layout, p->ckpt, p->log, Parallelism::Tensor, 2);
  const TensorShard& qkv = find(plan, "layers.0.attention.query_key_value.weight");
  ASSERT_EQ(qkv.kind, ShardKind::Column);
  const int64_t rows = qkv.shape[0];
  EXPECT_EQ(qkv.ranks[0], (std::vector<Range>{{0, rows / 2}}));
  EXPECT_EQ(qkv.ranks[1], (std::vector<Range>{{rows / 2, rows}}));
  EXPECT_EQ(find(plan, "layers.0.attention.dense.weight").kind, ShardKind::Row);
}

TEST(ShardPlan, FewerKvHeadsThanRanksGiveEachRankTheKvHeadItsQHeadsUse) {
  auto p = planned("falcon_parallel_mqa_tied");  // 4 q heads, 1 kv head, fused [q | k | v]
  for (int n : {2, 4}) {
    const ShardPlan plan = make_plan(p->layout, p->ckpt, p->log, Parallelism::Tensor, n);
    const TensorShard& qkv = find(plan, "h.0.self_attention.query_key_value.weight");
    ASSERT_EQ(qkv.kind, ShardKind::Column);
    EXPECT_NE(qkv.note.find("kv heads"), std::string::npos) << qkv.note;
    const int64_t heads = p->layout.heads, kv = p->layout.kv_heads, hd = p->layout.head_dim;
    ASSERT_EQ(kv, 1);
    for (int r = 0; r < n; ++r) {
      // Its q block, and the k and v rows of the kv head its q heads use.
      const int64_t first_q = r * heads / n, last_q = (r + 1) * heads / n - 1;
      const int64_t group = heads / kv;
      EXPECT_EQ(first_q / group, last_q / group);
      const int64_t g = first_q / group;
      EXPECT_TRUE(holds(qkv.ranks[r], {first_q * hd, (last_q + 1) * hd}));
      EXPECT_TRUE(holds(qkv.ranks[r], {heads * hd + g * hd, heads * hd + (g + 1) * hd}));
      EXPECT_TRUE(
          holds(qkv.ranks[r], {(heads + kv) * hd + g * hd, (heads + kv) * hd + (g + 1) * hd}));
      EXPECT_EQ(qkv.extent(r), (heads / n + 2) * hd);
    }
  }
  auto q = planned("qwen3_moe_headdim_mlp_only");  // 4 heads, 1 kv head, separate k_proj
  EXPECT_EQ(q->layout.kv_heads, 1);
}

TEST(ShardPlan, DivisibilityIsCheckedWithTheNumbers) {
  auto p = planned("llama_tied_gqa");  // 4 heads, 2 kv heads
  try {
    make_plan(p->layout, p->ckpt, p->log, Parallelism::Tensor, 3);
    FAIL() << "3 ranks accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("LlamaForCausalLM"), std::string::npos) << m;
    EXPECT_NE(m.find("4 heads across 3 ranks"), std::string::npos) << m;
    EXPECT_NE(m.find("q_proj"), std::string::npos) << m;
  }
  // 2 kv heads across 8 ranks would replicate them, but 4 q heads do not split 8 ways.
  EXPECT_THROW(make_plan(p->layout, p->ckpt, p->log, Parallelism::Tensor, 8), Error);
}

TEST(ShardPlan, CrossHeadNormsAreKeptWholeAndSaidSo) {
  auto p = planned("olmo2_untied");  // q_norm over all heads' q
  const ShardPlan plan = make_plan(p->layout, p->ckpt, p->log, Parallelism::Tensor, 2);
  const TensorShard& qn = find(plan, "layers.0.self_attn.q_norm.weight");
  EXPECT_EQ(qn.kind, ShardKind::Replicated);
  EXPECT_NE(qn.note.find("across all heads"), std::string::npos) << qn.note;
  ASSERT_FALSE(plan.notes.empty());
  EXPECT_NE(plan.notes[0].find("all-gathers"), std::string::npos) << plan.notes[0];
  // Qwen3's per-head norms need nothing of the kind.
  auto q = planned("qwen3_tied");
  EXPECT_TRUE(make_plan(q->layout, q->ckpt, q->log, Parallelism::Tensor, 2).notes.empty());
}

// Tensor parallelism splits hybrids, MLA and mixtures of experts too: attention and MLPs by
// heads and features, MLA's q by heads around its shared latent, the experts by blocks; the
// recurrent mixers run whole on every rank, and the plan says so.
TEST(ShardPlan, HybridsMlaAndExpertsSplitByTensorParallelism) {
  auto m = planned("mamba2_tied");
  ASSERT_EQ(m->layout.tp_unsupported, "");
  const ShardPlan mamba = make_plan(m->layout, m->ckpt, m->log, Parallelism::Tensor, 2);
  EXPECT_EQ(find(mamba, "layers.0.mixer.in_proj.weight").kind, ShardKind::Replicated);
  EXPECT_EQ(find(mamba, "layers.0.mixer.out_proj.weight").kind, ShardKind::Replicated);
  ASSERT_FALSE(mamba.notes.empty());
  EXPECT_NE(mamba.notes[0].find("run whole on every rank"), std::string::npos) << mamba.notes[0];

  auto d = planned("deepseek_v3_mla_lora_groups");
  ASSERT_EQ(d->layout.tp_unsupported, "");
  const ShardPlan mla = make_plan(d->layout, d->ckpt, d->log, Parallelism::Tensor, 2);
  EXPECT_EQ(find(mla, "layers.0.self_attn.q_b_proj.weight").kind, ShardKind::Column);
  EXPECT_EQ(find(mla, "layers.0.self_attn.o_proj.weight").kind, ShardKind::Row);
  EXPECT_EQ(find(mla, "layers.0.self_attn.q_a_proj.weight").kind, ShardKind::Replicated);
  EXPECT_GT(mla.count(ShardKind::Expert), 0);
  for (const TensorShard& t : mla.tensors)
    if (t.kind == ShardKind::Column || t.kind == ShardKind::Row || t.kind == ShardKind::Expert)
      expect_reassembles(d->ckpt.tensor(t.name), t, 2);

  auto x = planned("mixtral_untied_window_top2");  // 5 experts
  const ShardPlan moe = make_plan(x->layout, x->ckpt, x->log, Parallelism::Tensor, 2);
  EXPECT_EQ(moe.expert_rank, (std::vector<int>{0, 0, 1, 1, 1}));
  EXPECT_EQ(find(moe, "layers.0.self_attn.q_proj.weight").kind, ShardKind::Column);
  EXPECT_EQ(find(moe, "layers.0.block_sparse_moe.experts.0.w1.weight").kind, ShardKind::Expert);
  EXPECT_EQ(find(moe, "layers.0.block_sparse_moe.gate.weight").kind, ShardKind::Replicated);
  // Degree 1 is always a plan.
  EXPECT_EQ(make_plan(x->layout, x->ckpt, x->log, Parallelism::Tensor, 1).degree, 1);
}

TEST(ShardPlan, ExpertsSplitEvenlyAndRoutersReplicated) {
  auto p = planned("qwen3_moe_headdim_mlp_only");  // 6 experts
  ASSERT_EQ(p->layout.experts, 6);
  const ShardPlan plan = make_plan(p->layout, p->ckpt, p->log, Parallelism::Expert, 2);
  EXPECT_EQ(plan.expert_rank, (std::vector<int>{0, 0, 0, 1, 1, 1}));
  std::map<int, int64_t> held;  // rank -> expert tensor rows held
  int experts = 0;
  for (const TensorShard& t : plan.tensors) {
    if (t.kind == ShardKind::Unused) continue;
    if (t.name.ends_with("mlp.gate.weight")) {
      EXPECT_EQ(t.kind, ShardKind::Replicated) << t.name;  // the router
    }
    if (t.name.find(".experts.") != std::string::npos) {
      EXPECT_EQ(t.kind, ShardKind::Expert) << t.name;
      ++experts;
    } else {
      EXPECT_EQ(t.kind, ShardKind::Replicated) << t.name;
    }
    if (t.kind == ShardKind::Expert) {
      for (int r = 0; r < 2; ++r) held[r] += t.extent(r) > 0 ? 1 : 0;
      expect_reassembles(p->ckpt.tensor(t.name), t, 2);
    }
  }
  EXPECT_GT(experts, 0);
  EXPECT_EQ(held[0], held[1]);
  EXPECT_EQ(plan.rank_bytes[0], plan.rank_bytes[1]);
  // 5 experts across 2 ranks: 2 and 3; across 8 some rank would hold none.
  auto m = planned("mixtral_untied_window_top2");
  const ShardPlan uneven = make_plan(m->layout, m->ckpt, m->log, Parallelism::Expert, 2);
  EXPECT_EQ(uneven.expert_rank, (std::vector<int>{0, 0, 1, 1, 1}));
  for (const TensorShard& t : uneven.tensors)
    if (t.kind == ShardKind::Expert) expect_reassembles(m->ckpt.tensor(t.name), t, 2);
  try {
    make_plan(m->layout, m->ckpt, m->log, Parallelism::Expert, 8);
    FAIL() << "5 experts split 8 ways";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("5 experts across 8 ranks"), std::string::npos)
        << e.what();
  }
}

TEST(Planner, KvBytesAreTheCachesTheModelMakes) {
  for (const std::string name : {"llama_tied_gqa", "mistral_window", "gemma2_softcap_window",
                                 "mamba2_tied", "deepseek_v3_mla_lora_groups"}) {
    auto p = planned(name);
    for (int64_t seq : {8, 300})
      EXPECT_EQ(kv_bytes(p->layout, Parallelism::Tensor, 1, seq, DType::F32),
                p->model->new_cache(seq).bytes())
          << name << " at " << seq;
  }
}

TEST(Planner, ChoosesOneCoreTwoOrNone) {
  auto p = planned("llama_tied_gqa");
  PlannerOptions o;
  o.max_cores = 4;
  o.max_seq = 64;
  o.core_memory = uint64_t{1} << 30;
  PlannerChoice c = choose_degree(*p->model, p->layout, p->ckpt, p->log, o);
  ASSERT_TRUE(c.fits) << c.refusal;
  EXPECT_EQ(c.degree, 1);
  const RankMemory one = c.memory;
  EXPECT_GT(one.weights, 0u);
  EXPECT_GT(one.kv, 0u);
  EXPECT_GT(one.activations, 0u);

  // Just under one core's need: two ranks, each with half the split weights and KV.
  o.core_memory = one.total() - 1;
  c = choose_degree(*p->model, p->layout, p->ckpt, p->log, o);
  ASSERT_TRUE(c.fits) << c.refusal;
  EXPECT_EQ(c.degree, 2);
  EXPECT_EQ(c.parallelism, Parallelism::Tensor);
  EXPECT_LT(c.memory.weights, one.weights);
  EXPECT_EQ(c.memory.kv, one.kv / 2);
  ASSERT_TRUE(c.plan);
  EXPECT_EQ(c.plan->degree, 2);

  // 1 KiB per core: no degree up to 2 fits; the message gives the need at degree 2.
  o.core_memory = 1024;
  o.max_cores = 2;
  c = choose_degree(*p->model, p->layout, p->ckpt, p->log, o);
  EXPECT_FALSE(c.fits);
  EXPECT_EQ(c.degree, 2);
  EXPECT_NE(c.refusal.find("does not fit 1.0 KiB per core on up to 2 cores"), std::string::npos)
      << c.refusal;
  EXPECT_NE(c.refusal.find("at degree 2 (tp)"), std::string::npos) << c.refusal;
  EXPECT_NE(c.refusal.find("degrees tried: 1, 2"), std::string::npos) << c.refusal;

  // bf16 and q8_0 matrices take less.
  o.core_memory = uint64_t{1} << 30;
  o.dtype = DType::BF16;
  EXPECT_LT(choose_degree(*p->model, p->layout, p->ckpt, p->log, o).memory.weights, one.weights);
}

// A model with experts takes tensor parallelism (attention and its KV cache split by heads,
// the experts by blocks), and expert parallelism at a degree its heads do not divide.
TEST(Planner, ModelsWithExpertsTakeTensorParallelismElseExperts) {
  PlannerOptions o;
  o.max_cores = 2;
  o.max_seq = 32;
  for (const auto& [name, way] :
       {std::pair{"qwen3_moe_headdim_mlp_only", Parallelism::Tensor},
        {"glm_moe_dsa_shared_indexer_groups", Parallelism::Expert}}) {  // 3 heads
    SCOPED_TRACE(name);
    auto p = planned(name);
    o.core_memory = uint64_t{1} << 30;
    const RankMemory one = choose_degree(*p->model, p->layout, p->ckpt, p->log, o).memory;
    o.core_memory = one.total() - 1;
    const PlannerChoice c = choose_degree(*p->model, p->layout, p->ckpt, p->log, o);
    ASSERT_TRUE(c.fits) << c.refusal;
    EXPECT_EQ(c.parallelism, way);
    EXPECT_EQ(c.degree, 2);
    // Expert parallelism keeps attention whole on every rank; tensor parallelism splits it
    // (its KV cache too where there are kv heads to split).
    if (way == Parallelism::Expert) {
      EXPECT_EQ(c.memory.kv, one.kv);
    } else {
      PlannerOptions ep = o;
      ep.parallelism = Parallelism::Expert;
      const PlannerChoice e = choose_degree(*p->model, p->layout, p->ckpt, p->log, ep);
      EXPECT_EQ(e.degree, 2);
      EXPECT_LT(c.memory.weights, e.memory.weights);
    }
    ASSERT_TRUE(c.plan);
    EXPECT_GT(c.plan->count(ShardKind::Expert), 0);
  }
}

TEST(Planner, ParsesSizes) {
  EXPECT_EQ(parse_size("2G"), uint64_t{2} << 30);
  EXPECT_EQ(parse_size("512MiB"), uint64_t{512} << 20);
  EXPECT_EQ(parse_size("1000"), 1000u);
  EXPECT_FALSE(parse_size("lots"));
  EXPECT_GT(default_core_memory(), 0u);
}

TEST(InspectPlan, JsonFieldsAndRefusal) {
  testing::ScratchDir dir("shard-cli");
  build_tiny_checkpoint(testing::fixture_dir("llama_tied_gqa"), dir.path(), {.dtype = DType::F32});
  const std::string m = dir.path().string();
  auto r =
      testing::run_lathe_split("inspect " + m + " --plan --json --core-memory 1G --max-cores 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["cores"], 1);
  const auto& p = j["plan"];
  EXPECT_EQ(p["fits"], true);
  EXPECT_EQ(p["degree"], 1);
  EXPECT_EQ(p["parallelism"], "tp");
  EXPECT_EQ(p["core_memory"], uint64_t{1} << 30);
  for (const char* k : {"weights", "kv", "activations", "total"})
    EXPECT_GT(p["per_rank"][k].get<uint64_t>(), 0u) << k;
  for (const char* k : {"column", "row", "replicated", "vocab", "expert", "unused"})
    EXPECT_TRUE(p["tensors"].contains(k)) << k;

  // A budget between the two degrees' needs: 2 cores, split tensors counted.
  const uint64_t one = p["per_rank"]["total"].get<uint64_t>();
  r = testing::run_lathe_split("inspect " + m + " --plan --json --max-cores 2 --core-memory " +
                               std::to_string(one - 1));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto two = nlohmann::json::parse(r.out)["plan"];
  EXPECT_EQ(two["degree"], 2);
  EXPECT_GT(two["tensors"]["column"].get<int>(), 0);
  EXPECT_GT(two["tensors"]["row"].get<int>(), 0);

  r = testing::run_lathe_split("inspect " + m + " --plan --core-memory 1K --max-cores 2");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("error: LlamaForCausalLM does not fit 1.0 KiB per core"), std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find("plan:         does not fit"), std::string::npos) << r.out;

  r = testing::run_lathe_split("inspect " + m + " --plan --core-memory lots");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  // Without --plan the output is as before.
  r = testing::run_lathe_split("inspect " + m + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(nlohmann::json::parse(r.out).contains("plan"));
}

}  // namespace
}  // namespace lathe::shard
