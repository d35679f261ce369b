// Expert weights stay memory-mapped and a decode step reads only the experts it routes to:
// on a Mixtral-shaped checkpoint of 64 experts whose expert weights (96 MiB) dwarf everything
// else, the file-backed resident memory that loading and decoding add is measured against
// the bytes of the experts the route chose.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "core/error.h"
#include "generate/generate.h"
#include "io/json.h"
#include "io/tiny_checkpoint.h"
#include "models/registry.h"
#include "support/run.h"

namespace lathe {
namespace {
namespace fs = std::filesystem;

constexpr int64_t kHidden = 64, kInter = 2048, kExperts = 64, kVocab = 128;

// RssFile of /proc/self/status: this process's resident pages of mapped files, in bytes.
int64_t rss_file_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("RssFile:", 0) == 0) return std::stoll(line.substr(8)) * 1024;
  return -1;
}

// A fixture folder (config.json, weights.json) for a one-layer Mixtral of 64 experts.
void write_fixture(const fs::path& dir) {
  fs::create_directories(dir);
  Json config = {{"architectures", {"MixtralForCausalLM"}},
                 {"model_type", "mixtral"},
                 {"vocab_size", kVocab},
                 {"hidden_size", kHidden},
                 {"intermediate_size", kInter},
                 {"num_hidden_layers", 1},
                 {"num_attention_heads", 4},
                 {"num_key_value_heads", 2},
                 {"num_local_experts", kExperts},
                 {"num_experts_per_tok", 2},
                 {"max_position_embeddings", 64},
                 {"tie_word_embeddings", false}};
  std::ofstream(dir / "config.json") << config.dump();
  std::ofstream(dir / "generation_config.json") << "{}";
  Json tensors = Json::array();
  auto add = [&](const std::string& name, Shape shape, double center, double scale) {
    tensors.push_back({{"name", name}, {"shape", shape}, {"center", center}, {"scale", scale}});
  };
  const std::string p = "model.layers.0.";
  add("model.embed_tokens.weight", {kVocab, kHidden}, 0, 1);
  add(p + "input_layernorm.weight", {kHidden}, 1, 0.2);
  add(p + "post_attention_layernorm.weight", {kHidden}, 1, 0.2);
  for (const char* w : {"q_proj", "o_proj"})
    add(p + "self_attn." + w + ".weight", {64, 64}, 0, 0.2);
  for (const char* w : {"k_proj", "v_proj"})
    add(p + "self_attn." + w + ".weight", {32, 64}, 0, 0.2);
  add(p + "block_sparse_moe.gate.weight", {kExperts, kHidden}, 0, 0.2);
  for (int64_t e = 0; e < kExperts; ++e) {
    const std::string x = cat(p, "block_sparse_moe.experts.", e, ".");
    add(x + "w1.weight", {kInter, kHidden}, 0, 0.2);
    add(x + "w3.weight", {kInter, kHidden}, 0, 0.2);
    add(x + "w2.weight", {kHidden, kInter}, 0, 0.04);
  }
  add("model.norm.weight", {kHidden}, 1, 0.2);
  add("lm_head.weight", {kVocab, kHidden}, 0, 0.2);
  std::ofstream(dir / "weights.json")
      << Json{{"seed", 7}, {"generator", "splitmix64-fnv1a-v1"}, {"tensors", tensors}}.dump();
}

TEST(MoeMemory, DecodeReadsOnlyTheRoutedExperts) {
  testing::ScratchDir dir("moe-memory");
  write_fixture(dir.path() / "fixture");
  build_tiny_checkpoint(dir.path() / "fixture", dir.path() / "ckpt", {});
  const int64_t expert_bytes = 3 * kInter * kHidden * 4;  // gate, up, down in f32

  const int64_t before = rss_file_bytes();
  ASSERT_GE(before, 0) << "no RssFile in /proc/self/status";
  const Checkpoint ckpt = Checkpoint::open(dir.path() / "ckpt");
  auto model = load_model(ckpt, {.dtype = DType::F32});
  const int64_t loaded = rss_file_bytes();

  // One prompt token, then 3 decode steps; the experts they route to, from the route nodes.
  ThreadPool pool(2);
  Context ctx{&pool, false, false};
  std::set<int> routed;
  Trace trace = [&](const std::string& name, const Tensor& t) {
    if (name != "layer.0.route") return;
    const int64_t n = t.dim(1) * t.dim(2);
    for (int64_t i = 0; i < n; ++i) routed.insert(static_cast<int>(t.data<float>()[n + i]));
  };
  KVCache cache = model->new_cache(8);
  std::vector<int32_t> token = {5};
  for (int step = 0; step < 4; ++step) {
    const Tensor logits = model->forward(ctx, token, cache, false, &trace);
    int32_t best = 0;
    for (int32_t v = 1; v < kVocab; ++v)
      if (logits.data<float>()[v] > logits.data<float>()[best]) best = v;
    token = {best};
  }
  const int64_t decoded = rss_file_bytes();
  const int64_t all = kExperts * expert_bytes;
  std::printf(
      "experts %lld MiB; resident after load +%.1f MiB, after 4 steps +%.1f MiB; %zu experts "
      "routed (%.1f MiB)\n",
      static_cast<long long>(all >> 20), (loaded - before) / 1048576.0,
      (decoded - before) / 1048576.0, routed.size(),
      static_cast<double>(routed.size() * expert_bytes) / 1048576.0);
  ASSERT_GE(routed.size(), 2u);
  EXPECT_LT(routed.size(), 9u);  // 2 per step
  // Loading maps and reads nothing of the experts.
  EXPECT_LT(loaded - before, all / 16);
  // Decoding makes resident the routed experts (and little else: the rest of the weights are
  // under 0.2 MiB; the kernel's fault-around maps a few pages beside each read).
  EXPECT_LT(decoded - before,
            static_cast<int64_t>(routed.size()) * expert_bytes + (int64_t{4} << 20));
  EXPECT_GT(decoded - loaded, static_cast<int64_t>(routed.size() - 1) * expert_bytes);
}

}  // namespace
}  // namespace lathe
