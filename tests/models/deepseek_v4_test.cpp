// DeepseekV4ForCausalLM's config and tensors (models/arch/deepseek_v4.h) on its tiny fixture,
// tests/fixtures/tiny/deepseek_v4_hash_csa_hca_sliding (whose goldens the golden tests
// check; docs/deepseek-v4.md).
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/safetensors.h"
#include "io/tiny_checkpoint.h"
#include "models/arch/deepseek_v4.h"
#include "support/run.h"

namespace lathe {
namespace {
using Json = nlohmann::json;

const char* const kFixture = "deepseek_v4_hash_csa_hca_sliding";

std::filesystem::path fixture() {
  return std::filesystem::path(LATHE_SOURCE_DIR) / "tests/fixtures/tiny" / kFixture;
}

// Builds the fixture's checkpoint into `dir` with `edit` applied to its config.json.
void build(const testing::ScratchDir& dir, const std::function<void(Json&)>& edit = {}) {
  build_tiny_checkpoint(fixture(), dir.path(), {});
  if (!edit) return;
  Json c = Json::parse(testing::read_file(dir.path() / "config.json"));
  edit(c);
  testing::write_file(dir.path() / "config.json", c.dump());
}

// The error of reading the edited config and loading the tensors ("" when both succeed).
std::string load_error(const std::function<void(Json&)>& edit) {
  testing::ScratchDir dir("dsv4");
  build(dir, edit);
  try {
    const Checkpoint ckpt = Checkpoint::open(dir.path());
    load_deepseek_v4_weights(ckpt, read_deepseek_v4_config(ckpt), std::nullopt);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(DeepseekV4, ReadsTheConfigAsDeepseekV4ConfigDoes) {
  testing::ScratchDir dir("dsv4");
  build(dir);
  const Checkpoint ckpt = Checkpoint::open(dir.path());
  const Dsv4Config c = read_deepseek_v4_config(ckpt);
  EXPECT_EQ(c.layer_attention,
            (std::vector<Dsv4Attention>{Dsv4Attention::Csa, Dsv4Attention::Hca,
                                        Dsv4Attention::Sliding, Dsv4Attention::Csa}));
  EXPECT_EQ(c.layer_hash, (std::vector<bool>{true, false, true, false}));
  EXPECT_EQ(c.csa_rate, 4);
  EXPECT_EQ(c.hca_rate, 8);
  EXPECT_EQ(c.rope_dim, 8);  // the legacy qk_rope_head_dim
  EXPECT_EQ(c.hc_mult, 3);
  EXPECT_EQ(c.hc_sinkhorn_iters, 7);
  EXPECT_FLOAT_EQ(c.swiglu_limit, 2.5f);
  // Sliding layers: the default rotary at rope_theta; compressed ones: yarn at
  // compress_rope_theta with attention_factor 1 (DeepseekV4Config.__post_init__).
  EXPECT_EQ(c.main_rope.kind, RopeKind::Default);
  EXPECT_DOUBLE_EQ(c.main_rope.theta, 10000.0);
  EXPECT_EQ(c.compress_rope.kind, RopeKind::Yarn);
  EXPECT_DOUBLE_EQ(c.compress_rope.theta, 160000.0);
  ASSERT_TRUE(c.compress_rope.attention_factor.has_value());
  EXPECT_DOUBLE_EQ(*c.compress_rope.attention_factor, 1.0);
  EXPECT_EQ(c.main_rope.rot_dim, 8);
  EXPECT_EQ(c.compress_rope.rot_dim, 8);
}

// Every tensor is read (Weights::finish throws on any missing, misshapen or unused one), and
// the hash router's table holds the fixture's ids: the floor of the generated values, as
// make_tiny.py stores them (I32).
TEST(DeepseekV4, LoadsEveryTensorAndTheHashTable) {
  testing::ScratchDir dir("dsv4");
  build(dir);
  const Checkpoint ckpt = Checkpoint::open(dir.path());
  const Dsv4Config c = read_deepseek_v4_config(ckpt);
  const Dsv4Weights w = load_deepseek_v4_weights(ckpt, c, std::nullopt);
  ASSERT_EQ(w.layers.size(), 4u);
  const Json manifest = Json::parse(testing::read_file(fixture() / "weights.json"));
  int tables = 0;
  for (const Json& t : manifest["tensors"]) {
    const std::string name = t["name"];
    if (name.find("tid2eid") == std::string::npos) continue;
    const size_t layer = name == "model.layers.0.ffn.gate.tid2eid" ? 0 : 2;
    const std::vector<float> v = generate_weights(manifest["seed"].get<uint64_t>(), name,
                                                  c.vocab_size * c.top_k, t["center"], t["scale"]);
    const std::vector<int32_t>& ids = w.layers[layer].tid2eid;
    ASSERT_EQ(ids.size(), v.size());
    for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(ids[i], std::floor(v[i])) << name << " " << i;
    ++tables;
  }
  EXPECT_EQ(tables, 2);
  EXPECT_TRUE(w.layers[1].tid2eid.empty());
  EXPECT_EQ(w.layers[1].correction_bias.shape(), (Shape{6}));
  EXPECT_EQ(w.layers[0].compressor.ape.shape(), (Shape{4, 36}));        // CSA: two series
  EXPECT_EQ(w.layers[1].compressor.ape.shape(), (Shape{8, 18}));        // HCA: one
  EXPECT_EQ(w.layers[0].index_compressor.ape.shape(), (Shape{4, 20}));  // the indexer's
  EXPECT_FALSE(w.layers[2].compressor.wkv.defined());                   // sliding
}

// DeepSeek publishes the tensors without the "model." prefix and with its own names for the
// embedding and the hyper head (transformers' conversion mapping renames them on load), beside
// multi-token-prediction layers (mtp.*) that transformers does not load.
TEST(DeepseekV4, ReadsThePublishedNames) {
  testing::ScratchDir dir("dsv4");
  build(dir);
  const std::filesystem::path file = dir.path() / "model.safetensors";
  std::vector<NamedTensor> renamed;
  {
    const SafetensorsFile in = SafetensorsFile::open(file);
    for (const auto& [name, entry] : in.entries()) {
      std::string n = name;
      if (n.rfind("model.layers.", 0) == 0) n = n.substr(6);
      if (n == "model.embed_tokens.weight") n = "embed.weight";
      if (n == "model.norm.weight") n = "norm.weight";
      if (n.rfind("model.hc_head.", 0) == 0) n = "hc_head_" + n.substr(n.rfind('_') + 1);
      renamed.push_back({n, in.tensor(name).clone()});
    }
  }
  renamed.push_back({"mtp.0.norm.weight", Tensor::zeros(DType::F32, {40})});
  write_safetensors(file, renamed);
  const Checkpoint ckpt = Checkpoint::open(dir.path());
  ASSERT_TRUE(ckpt.has("hc_head_fn"));
  ASSERT_TRUE(ckpt.has("layers.3.attn.indexer.wq_b.weight"));
  const Dsv4Weights w = load_deepseek_v4_weights(ckpt, read_deepseek_v4_config(ckpt), std::nullopt);
  EXPECT_EQ(w.hc_head_fn.shape(), (Shape{3, 120}));
  EXPECT_EQ(w.layers[2].tid2eid.size(), 256u);
}

TEST(DeepseekV4, ConfigErrorsNameTheField) {
  auto expect = [](const std::function<void(Json&)>& edit, const std::string& message) {
    const std::string err = load_error(edit);
    EXPECT_NE(err.find(message), std::string::npos) << "expected \"" << message << "\" in: " << err;
    EXPECT_NE(err.find("config.json"), std::string::npos) << err;
  };
  expect([](Json& c) { c["num_key_value_heads"] = 2; }, "field \"num_key_value_heads\" is 2");
  expect([](Json& c) { c["scoring_func"] = "softmax"; }, "field \"scoring_func\" is \"softmax\"");
  expect([](Json& c) { c["layer_types"][1] = "full_attention"; },
         "field \"layer_types\"[1] is \"full_attention\"");
  expect([](Json& c) { c["mlp_layer_types"] = Json::array({"moe"}); },
         "field \"mlp_layer_types\" must list 4 layer types");
  expect([](Json& c) { c["compress_rates"]["compressed_sparse_attention"] = 0; },
         "compress_rates (compressed_sparse_attention)");
  expect([](Json& c) { c["o_groups"] = 5; }, "field \"o_groups\" is 5");
  expect([](Json& c) { c["num_experts_per_tok"] = 7; }, "field \"num_experts_per_tok\" is 7");
  // A schedule that disagrees with the tensors: layer 2 then lacks its compressor's and
  // layer 0 has tensors nothing reads.
  const std::string err = load_error([](Json& c) {
    c["layer_types"] = Json::array({"sliding_attention", "heavily_compressed_attention",
                                    "heavily_compressed_attention", "compressed_sparse_attention"});
  });
  EXPECT_NE(err.find("model.layers.2.attn.compressor.wkv.weight"), std::string::npos) << err;
  EXPECT_NE(err.find("model.layers.0.attn.compressor"), std::string::npos) << err;
  // The legacy fields DeepseekV4Config folds in.
  EXPECT_EQ(load_error([](Json& c) {
              c.erase("layer_types");
              c["compress_ratios"] = Json::array({4, 128, 0, 4});
              c.erase("compress_rates");
              c["compress_rate_hca"] = 8;
            }),
            "");
}

}  // namespace
}  // namespace lathe
