// The shared builder pieces that rewrite weights at load or make attention biases.
#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "io/safetensors.h"
#include "io/tiny_checkpoint.h"
#include "models/config_fields.h"
#include "models/layers.h"
#include "models/registry.h"
#include "support/run.h"

namespace lathe {
namespace {

Tensor counting(Shape shape) {
  Tensor t = Tensor::zeros(DType::F32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.mut<float>()[i] = static_cast<float>(i);
  return t;
}

std::vector<float> values(const Tensor& t) {
  return {t.data<float>(), t.data<float>() + t.numel()};
}

// Values from transformers' _get_alibi_slopes (Bloom), f32.
TEST(Alibi, SlopesMatchTransformers) {
  EXPECT_EQ(alibi_slopes(1), (std::vector<float>{0.00390625f}));
  EXPECT_EQ(alibi_slopes(4), (std::vector<float>{0.25f, 0.0625f, 0.015625f, 0.00390625f}));
  // Not a power of two: the two extra heads take the odd powers of 2^(-8 / 8).
  EXPECT_EQ(alibi_slopes(6),
            (std::vector<float>{0.25f, 0.0625f, 0.015625f, 0.00390625f, 0.5f, 0.125f}));
  const std::vector<float> twelve = alibi_slopes(12);
  const std::vector<float> expected = {0.5f,        0.25f,       0.125f,      0.0625f,
                                       0.03125f,    0.015625f,   0.0078125f,  0.00390625f,
                                       0.70710677f, 0.35355338f, 0.17677668f, 0.088388339f};
  ASSERT_EQ(twelve.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_FLOAT_EQ(twelve[i], expected[i]) << i;
}

TEST(FusedQkv, SplitsEachGroupingTransformersUses) {
  AttentionSpec s;
  s.heads = 4, s.kv_heads = 2, s.head_dim = 1;
  // 8 rows of one column: row r holds r.
  const Tensor fused = counting({8, 1});
  // groups 1: [q q q q | k k | v v]
  FusedQkv a = split_fused_qkv(fused, s, 1);
  EXPECT_EQ(values(a.q), (std::vector<float>{0, 1, 2, 3}));
  EXPECT_EQ(values(a.k), (std::vector<float>{4, 5}));
  EXPECT_EQ(values(a.v), (std::vector<float>{6, 7}));
  // ... as views of the fused rows, not copies.
  EXPECT_EQ(a.q.data<float>(), fused.data<float>());
  EXPECT_EQ(a.k.data<float>(), fused.data<float>() + 4);
  EXPECT_EQ(a.v.data<float>(), fused.data<float>() + 6);
  EXPECT_EQ(matrix_rows(fused, 2, 3).data<float>(), fused.data<float>() + 2);
  // groups = kv_heads (Falcon new_decoder_architecture): [q q k v | q q k v]
  FusedQkv b = split_fused_qkv(fused, s, 2);
  EXPECT_EQ(values(b.q), (std::vector<float>{0, 1, 4, 5}));
  EXPECT_EQ(values(b.k), (std::vector<float>{2, 6}));
  EXPECT_EQ(values(b.v), (std::vector<float>{3, 7}));
  // groups = heads = kv_heads (Bloom), on a bias vector with head_dim 2: per head [q k v].
  s.heads = s.kv_heads = 2, s.head_dim = 2;
  const Tensor bias = counting({12});
  FusedQkv c = split_fused_qkv(bias, s, 2);
  EXPECT_EQ(values(c.q), (std::vector<float>{0, 1, 6, 7}));
  EXPECT_EQ(values(c.k), (std::vector<float>{2, 3, 8, 9}));
  EXPECT_EQ(values(c.v), (std::vector<float>{4, 5, 10, 11}));
  EXPECT_THROW(split_fused_qkv(counting({11}), s, 2), std::exception);
}

TEST(Conv1D, TransposesAnyDtype) {
  const Tensor m = counting({2, 3});
  const Tensor t = transpose_matrix(m);
  EXPECT_EQ(t.shape(), (Shape{3, 2}));
  EXPECT_EQ(values(t), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  const Tensor b = transpose_matrix(m.to(DType::BF16)).to(DType::F32);
  EXPECT_EQ(values(b), values(t));
}

Tensor logits_of(const std::filesystem::path& dir) {
  const Checkpoint ckpt = Checkpoint::open(dir);
  auto model = load_model(ckpt, {});
  ThreadPool pool(1);
  Context ctx{&pool, false};
  KVCache cache = model->new_cache(8);
  const std::vector<int32_t> ids = {3, 17, 5, 42, 9};
  return model->forward(ctx, ids, cache, true);
}

// A checkpoint saved from the base model (the original GPT-2 and OPT files) names its tensors
// without the causal LM's base_model_prefix, and GPT-2's carries attn.bias mask buffers: it
// loads and computes the same logits.
TEST(BaseModelPrefix, CheckpointsWithoutItLoadTheSame) {
  for (auto [fixture, prefix] : {std::pair{"gpt2_tied", "transformer."},
                                 {"gpt_bigcode_mha_untied", "transformer."},
                                 {"opt_tied_prenorm", "model."},
                                 {"bloom_tied_alibi6", "transformer."},
                                 {"falcon_parallel_mqa_tied", "transformer."}}) {
    SCOPED_TRACE(fixture);
    testing::ScratchDir with("prefix"), without("noprefix");
    build_tiny_checkpoint(testing::fixture_dir(fixture), with.path(), {});
    build_tiny_checkpoint(testing::fixture_dir(fixture), without.path(), {});
    const std::string pre = prefix;
    std::vector<NamedTensor> renamed;
    {
      const Checkpoint ckpt = Checkpoint::open(with.path());
      for (const auto& name : ckpt.tensor_names())
        renamed.push_back(
            {name.starts_with(pre) ? name.substr(pre.size()) : name, ckpt.tensor(name).clone()});
    }
    // Only GPT-2 checkpoints carry the mask buffers.
    if (std::string(fixture) == "gpt2_tied")
      renamed.push_back({"h.0.attn.bias", Tensor::zeros(DType::F32, {4})});
    write_safetensors(without / "model.safetensors", renamed);
    const Tensor a = logits_of(with.path()), b = logits_of(without.path());
    ASSERT_EQ(a.shape(), b.shape());
    for (int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(a.data<float>()[i], b.data<float>()[i]);
  }
}

// Qwen3Next and Qwen3.5 checkpoints carry multi-token prediction layers (mtp.*) that
// transformers does not load: lathe leaves them too and computes the same logits, while any
// other tensor the model does not use is still reported.
TEST(Qwen3Hybrid, MultiTokenPredictionTensorsAreLeftAsTransformersLeavesThem) {
  testing::ScratchDir plain("mtp-plain"), with("mtp");
  const std::string fixture = testing::fixture_dir("qwen3_5_dense_interval3_tied");
  build_tiny_checkpoint(fixture, plain.path(), {});
  build_tiny_checkpoint(fixture, with.path(), {});
  std::vector<NamedTensor> tensors;
  {
    const Checkpoint ckpt = Checkpoint::open(with.path());
    for (const auto& name : ckpt.tensor_names())
      tensors.push_back({name, ckpt.tensor(name).clone()});
  }
  tensors.push_back({"mtp.fc.weight", counting({4, 8})});
  tensors.push_back({"mtp.layers.0.input_layernorm.weight", counting({4})});
  write_safetensors(with.path() / "model.safetensors", tensors);
  EXPECT_EQ(values(logits_of(with.path())), values(logits_of(plain.path())));
  tensors.push_back({"model.extra.weight", counting({4})});
  write_safetensors(with.path() / "model.safetensors", tensors);
  try {
    logits_of(with.path());
    ADD_FAILURE() << "an unused tensor was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.extra.weight"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("mtp."), std::string::npos) << e.what();
  }
}

// A multimodal checkpoint's text model reads the same from both published layouts: the one
// transformers 5.24 saves (language_model.model.*, language_model.lm_head.*; the fixtures) and
// transformers 5's own names (model.language_model.*, lm_head.*); the vision tower is left out
// and said so; a text model lathe does not implement is an error naming text_config.
TEST(MultimodalText, BothLayoutsGiveTheSameLogits) {
  testing::ScratchDir legacy("mm-legacy"), v5("mm-v5");
  const std::string fixture = testing::fixture_dir("llava_multimodal_text");
  build_tiny_checkpoint(fixture, legacy.path(), {});
  build_tiny_checkpoint(fixture, v5.path(), {});
  std::vector<NamedTensor> renamed;
  {
    const Checkpoint ckpt = Checkpoint::open(legacy.path());
    for (std::string name : ckpt.tensor_names()) {
      const Tensor t = ckpt.tensor(name).clone();
      for (const auto& [from, to] :
           {std::pair<std::string, std::string>{"language_model.model.", "model.language_model."},
            {"language_model.lm_head.", "lm_head."},
            {"vision_tower.", "model.vision_tower."},
            {"multi_modal_projector.", "model.multi_modal_projector."}})
        if (name.starts_with(from)) {
          name = to + name.substr(from.size());
          break;
        }
      renamed.push_back({name, t});
    }
  }
  write_safetensors(v5.path() / "model.safetensors", renamed);
  const Tensor a = logits_of(legacy.path()), b = logits_of(v5.path());
  ASSERT_EQ(a.shape(), b.shape());
  for (int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(a.data<float>()[i], b.data<float>()[i]);
  const auto model = load_model(Checkpoint::open(v5.path()), {});
  EXPECT_NE(model->info().runs.find("model.language_model., as LlamaForCausalLM"),
            std::string::npos)
      << model->info().runs;
  EXPECT_NE(model->info().runs.find("not loaded: 43 tensors"), std::string::npos)
      << model->info().runs;
}

}  // namespace
}  // namespace lathe
