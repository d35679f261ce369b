// Every tiny fixture against the goldens transformers (f32, CPU) made for it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "backends/cpu/isa.h"
#include "compile/compiler.h"
#include "core/error.h"
#include "core/numeric.h"
#include "io/json.h"
#include "io/safetensors.h"
#include "lab/golden_check.h"
#include "support/run.h"

namespace lathe {
namespace {
namespace fs = std::filesystem;

// A mixture-of-experts architecture configured without experts (GraniteMoeHybrid's
// num_local_experts 0: its shared MLP alone).
bool declares_no_experts(const std::string& fixture) {
  const Json c = read_json_file(fs::path(testing::fixture_dir(fixture)) / "config.json");
  return c.value("num_local_experts", -1) == 0;
}

class Golden : public ::testing::TestWithParam<std::string> {
 protected:
  GoldenCheck run(const TinyBuildOptions& build, std::optional<DType> dtype, bool reference,
                  bool eager = false, DType kv_dtype = DType::F32) {
    ThreadPool pool(2);
    Context ctx{&pool, reference, eager, kv_dtype};
    return check_golden_fixture(testing::fixture_dir(GetParam()), dir.path(), build,
                                {.dtype = dtype}, ctx);
  }
  testing::ScratchDir dir{"golden"};
};

void expect_f32_match(const GoldenCheck& r) {
  EXPECT_LE(r.logits.nmse, kF32Nmse) << r.name << " max abs error " << r.logits.max_abs_error;
  EXPECT_EQ(r.logits.top1_agreement, 1.0);
  EXPECT_FALSE(r.layers.first_diverging) << "first diverging layer: " << *r.layers.first_diverging;
  EXPECT_GE(r.layers.layers.size(), 3u);  // embed, at least one layer, final norm compared
  // The decode steps' logits (the prompt's last row, then reference tokens through the cache).
  EXPECT_GE(r.decode.rows, 4);
  EXPECT_LE(r.decode.nmse, kF32Nmse)
      << r.name << " decode max abs error " << r.decode.max_abs_error;
  EXPECT_FALSE(r.decode_first_diverging_step)
      << "first diverging decode step: " << *r.decode_first_diverging_step;
  EXPECT_EQ(r.decode.top1_agreement, 1.0);
  EXPECT_EQ(r.greedy_actual, r.greedy_reference)
      << "first mismatch at " << r.first_token_mismatch.value_or(-1);
  // Mixtures of experts: every token's experts, in order, are transformers' (ties included).
  EXPECT_EQ(r.route_mismatches, 0) << r.first_route_mismatch.value_or("");
  EXPECT_LE(r.route_weight_max_error, 1e-5);
  if ((r.architecture.find("Moe") != std::string::npos ||
       r.architecture.find("Mixtral") != std::string::npos) &&
      !declares_no_experts(r.name)) {
    EXPECT_GT(r.route_choices, 0) << "a mixture of experts without route goldens";
  }
  // The goldens are only a test if greedy choices were clear: every reference margin is far
  // above f32 rounding (see tools/reference/make_tiny.py for how weights are scaled).
  for (double m : r.greedy_margins) EXPECT_GT(m, 1e-3);
}

TEST_P(Golden, F32MatchesTransformers) {
  expect_f32_match(run({}, DType::F32, false));
}

// --quantize: every matrix whose rows are whole groups of 64 quantized at load, on the fast
// kernels and on the reference ones, against the f32 goldens. Quantized weights (and the
// activations quantized to meet them) move the logits by the quantization's own error, which on
// these small random models is large (lab/tolerances.h gives the measured ranges), so the
// bounds catch a broken kernel or layout (NMSE near 1 or more) rather than grade the accuracy;
// SmolLM2's test grades it on a real model. Mixtures of experts are held to finite logits only:
// a quantized router input flips near-tied routes to other (random) experts.
TEST_P(Golden, QuantizedStaysNearTransformers) {
  for (DType type : {DType::Q8_0, DType::Q4_0})
    for (bool reference : {false, true}) {
      ThreadPool pool(2);
      Context ctx{&pool, reference, false};
      const GoldenCheck r = check_golden_fixture(testing::fixture_dir(GetParam()), dir.path(), {},
                                                 {.dtype = DType::F32, .quantize = type}, ctx);
      if (r.quantized_matrices == 0) continue;  // no matrix of whole groups: nothing to test
      const std::string what = cat(dtype_name(type), reference ? " reference" : " fast");
      EXPECT_TRUE(std::isfinite(r.logits.nmse)) << what;
      if (r.route_choices > 0) continue;
      EXPECT_LE(r.logits.nmse, quantized_nmse(type)) << what;
      EXPECT_GT(r.logits.nmse, 1e-9) << what << ": the numbers did not move";
    }
}

TEST_P(Golden, ReferenceKernelsMatchTransformers) {
  expect_f32_match(run({}, DType::F32, true));
}

// The engine's eager path: each node runs as it is built, in buffers of its own.
TEST_P(Golden, EagerMatchesTransformers) {
  expect_f32_match(run({}, DType::F32, false, true));
}

// The compiled mode (schedules compiled in this process, their kernel variants timed): the
// goldens hold, and every figure equals the eager run's exactly, as the outputs are the same
// bits.
TEST_P(Golden, CompiledMatchesTransformersAndEagerExactly) {
  ThreadPool pool(2);
  compile::Compiler compiler({});
  Context ctx{&pool, false, false};
  ctx.compiled = &compiler;
  const GoldenCheck compiled = check_golden_fixture(testing::fixture_dir(GetParam()), dir.path(),
                                                    {}, {.dtype = DType::F32}, ctx);
  expect_f32_match(compiled);
  EXPECT_GT(compiler.stats().compiled, 0);
  const GoldenCheck eager = run({}, DType::F32, false, true);
  EXPECT_EQ(compiled.logits.nmse, eager.logits.nmse);
  EXPECT_EQ(compiled.logits.max_abs_error, eager.logits.max_abs_error);
  EXPECT_EQ(compiled.decode.nmse, eager.decode.nmse);
  EXPECT_EQ(compiled.greedy_actual, eager.greedy_actual);
}

// How far transformers' own logits move when the fixture's weights are rounded to bf16: the
// NMSE of its rounded-weight logits against its f32 ones, and how often their argmax agrees.
// The hybrid linear-attention fixtures are the sensitive ones (qwen3_5_dense_interval3_tied:
// 5.5e-3, 21 of 24 tokens; the dense attention fixtures 2e-5 .. 3.2e-4).
struct Drift {
  double nmse = 0, top1 = 1;
};
Drift reference_bf16_drift(const std::string& fixture) {
  const SafetensorsFile f =
      SafetensorsFile::open(fs::path(testing::fixture_dir(fixture)) / "goldens.safetensors");
  const Tensor rounded = f.tensor("logits_bf16"), exact = f.tensor("logits");
  const int64_t rows = exact.dim(0), vocab = exact.dim(1);
  int64_t agree = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float *a = rounded.data<float>() + r * vocab, *b = exact.data<float>() + r * vocab;
    agree += std::max_element(a, a + vocab) - a == std::max_element(b, b + vocab) - b;
  }
  return {nmse({rounded.data<float>(), static_cast<size_t>(rounded.numel())},
               {exact.data<float>(), static_cast<size_t>(exact.numel())}),
          static_cast<double>(agree) / static_cast<double>(rows)};
}

// A bf16 or f16 checkpoint against transformers on the same rounded weights, computed in f32
// as lathe computes them: f32 tolerances, the same tokens and (MoE) the same experts. The
// opt-in avx512bf16 level rounds activations to bf16 as well for bf16 weights (as llama.cpp's
// and torch's bf16 paths do), which is not that computation: there bf16 is held to the
// rounding drift (measured NMSE 8.5e-6 .. 1.4e-4 on the dense fixtures), and mixtures of
// experts, whose near-tied routes flip, only to top-1 agreement. A fixture that bf16 rounding
// moves further in transformers itself is held to twice that drift and to its agreement.
// DeepSeek's sparse attention chooses each query's keys by an indexer's top-k, a second
// discrete choice per token and layer: deepseek_v32_sparse_topk8_groups agrees on 20 of 24
// rows there (transformers itself, rounding only the weights: 23 of 24), so those fixtures are
// held to three rows in four.
void expect_rounded_match(const GoldenCheck& r) {
  ASSERT_TRUE(r.rounded) << r.name << ": goldens without rounded-weight logits";
  const GoldenCheck::Rounded& q = *r.rounded;
  if (q.storage == "bf16" && cpu::active_isa() == cpu::Isa::Avx512Bf16) {
    const Drift d = reference_bf16_drift(r.name);
    if (r.route_choices == 0) {
      EXPECT_LE(q.logits.nmse, std::max(kBf16Nmse, 2 * d.nmse)) << r.name;
    }
    const bool sparse_attention =
        r.architecture == "DeepseekV32ForCausalLM" || r.architecture == "GlmMoeDsaForCausalLM";
    EXPECT_GE(q.logits.top1_agreement, std::min(sparse_attention ? 0.75 : 0.9, d.top1)) << r.name;
    return;
  }
  EXPECT_LE(q.logits.nmse, kF32Nmse) << r.name << " max abs error " << q.logits.max_abs_error;
  EXPECT_EQ(q.logits.top1_agreement, 1.0);
  EXPECT_LE(q.decode.nmse, kF32Nmse)
      << r.name << " decode max abs error " << q.decode.max_abs_error;
  EXPECT_FALSE(q.decode_first_diverging_step)
      << "first diverging decode step: " << *q.decode_first_diverging_step;
  // Rounding narrows some greedy margins (the weights were scaled for clear f32 ones): the
  // tokens must agree up to the first step whose reference margin is within 1e-3.
  size_t clear = 0;
  while (clear < q.greedy_margins.size() && q.greedy_margins[clear] > 1e-3) ++clear;
  EXPECT_GE(clear, std::min<size_t>(8, q.greedy_margins.size()))
      << r.name << ": rounded greedy margins too narrow to check tokens";
  clear = std::min({clear, r.greedy_actual.size(), q.greedy_reference.size()});
  EXPECT_EQ(std::vector<int32_t>(r.greedy_actual.begin(), r.greedy_actual.begin() + clear),
            std::vector<int32_t>(q.greedy_reference.begin(), q.greedy_reference.begin() + clear))
      << "first mismatch at " << q.first_token_mismatch.value_or(-1);
  // The rounding happened: f32 transformers is further away than the tolerance.
  EXPECT_GT(r.logits.nmse, kF32Nmse) << r.name << ": stored " << q.storage << " matches f32";
}

TEST_P(Golden, EagerBf16MatchesTransformersOnRoundedWeights) {
  expect_rounded_match(run({.dtype = DType::BF16}, std::nullopt, false, true));
}

TEST_P(Golden, ShardedCheckpointMatchesTransformers) {
  expect_f32_match(run({.dtype = DType::F32, .shards = 3}, std::nullopt, false));
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir.path()))
    files += e.path().extension() == ".safetensors";
  EXPECT_EQ(files, 3) << "the checkpoint was not written in 3 shards";
  EXPECT_TRUE(fs::exists(dir.path() / "model.safetensors.index.json"));
}

TEST_P(Golden, Bf16MatchesTransformersOnRoundedWeights) {
  const GoldenCheck r = run({.dtype = DType::BF16}, std::nullopt, false);
  expect_rounded_match(r);
  // Against f32 transformers: the rounding drift the lab's bf16 tolerance allows, where no
  // router near-tie flips an expert (a flipped expert moves logits by more: measured on the
  // MoE fixtures, docs/testing.md). A fixture whose random weights make transformers itself
  // drift further (reference_bf16_drift) is held to twice that drift.
  if (r.route_choices == 0) {
    EXPECT_LE(r.logits.nmse, std::max(kBf16Nmse, 2 * reference_bf16_drift(r.name).nmse)) << r.name;
  }
}

// A bf16 KV cache (`--kv-dtype bf16`) rounds every cached key and value: against the f32
// goldens the logits and decode logits stay within kBf16KvNmse, and the greedy tokens are the
// reference's up to a step whose reference margin is a near-tie (kNearTieMargin). Mixtures of
// experts, where the rounding flips near-tied routes (logit NMSE up to 6.1e-3 measured), are
// held to top-1 agreement >= 0.9, as bf16 weights on avx512bf16 are.
TEST_P(Golden, Bf16KvCacheStaysNearTransformers) {
  const GoldenCheck r = run({}, DType::F32, false, false, DType::BF16);
  if (std::getenv("LATHE_KV_REPORT"))
    std::printf("bf16kv\t%s\tlogits %.3e\tdecode %.3e\ttokens %lld\troutes %lld\n", r.name.c_str(),
                r.logits.nmse, r.decode.nmse,
                static_cast<long long>(r.first_token_mismatch.value_or(-1)),
                static_cast<long long>(r.route_mismatches));
  if (r.route_choices > 0) {  // a mixture of experts: near-tied routes flip
    EXPECT_GE(r.logits.top1_agreement, 0.9) << r.name;
    return;
  }
  EXPECT_LE(r.logits.nmse, kBf16KvNmse) << r.name;
  EXPECT_LE(r.decode.nmse, kBf16KvNmse) << r.name;
  if (r.first_token_mismatch) {
    const auto k = static_cast<size_t>(*r.first_token_mismatch);
    ASSERT_LT(k, r.greedy_margins.size());
    EXPECT_LT(r.greedy_margins[k], kNearTieMargin)
        << r.name << ": tokens part at step " << k << " where the reference was clear";
  }
}

// F16 storage converts to F32 on load: transformers on the f16-rounded weights, in f32.
TEST_P(Golden, F16CheckpointComputesInF32) {
  expect_rounded_match(run({.dtype = DType::F16}, std::nullopt, false));
}

// The golden comparison reaches inside layers: each layer's attention and MLP outputs are
// compared with transformers' module outputs (tools/reference/module_outputs.py), so a fault
// in one part of a layer is named by the first node it reaches.
struct Fault {
  std::string tensor;  // scaled by 1.01 in the checkpoint
  std::string first_diverging;
};

class FaultIsLocated : public ::testing::TestWithParam<Fault> {};

TEST_P(FaultIsLocated, FirstDivergingNodeNamesIt) {
  const Fault& f = GetParam();
  testing::ScratchDir dir("fault");
  ThreadPool pool(2);
  Context ctx{&pool, false, false};
  auto perturb = [&](const fs::path& ckpt) { scale_checkpoint_tensor(ckpt, f.tensor, 1.01f); };
  const GoldenCheck r = check_golden_fixture(testing::fixture_dir("llama_tied_gqa"), dir.path(), {},
                                             {.dtype = DType::F32}, ctx, perturb);
  ASSERT_TRUE(r.layers.first_diverging) << "a 1% weight change went unseen";
  EXPECT_EQ(*r.layers.first_diverging, f.first_diverging);
  EXPECT_GT(r.logits.nmse, kF32Nmse);
}

INSTANTIATE_TEST_SUITE_P(
    Llama, FaultIsLocated,
    ::testing::Values(Fault{"model.layers.1.mlp.down_proj.weight", "layer.1.mlp_out"},
                      Fault{"model.layers.0.self_attn.o_proj.weight", "layer.0.attn_out"},
                      Fault{"model.layers.1.self_attn.v_proj.weight", "layer.1.attn_out"},
                      Fault{"model.layers.0.post_attention_layernorm.weight", "layer.0.mlp_out"}),
    [](const auto& info) {
      std::string n = info.param.first_diverging;
      for (char& c : n)
        if (c == '.') c = '_';
      return n + "_" + std::to_string(info.index);
    });

// A wrong config with the right weights: a rope base 0.1% off (10000 -> 10010) and a norm eps
// ten times too large each leave the tolerance, first at the node they reach, and move the
// decode steps too. An off-by-one base (10001) is not caught: over 24 positions it moves the
// logits by NMSE 1.8e-10, inside kF32Nmse (docs/testing.md).
struct ConfigFault {
  std::string field;
  double factor, offset;
  std::string first_diverging;
};

class ConfigFaultIsLocated : public ::testing::TestWithParam<ConfigFault> {};

TEST_P(ConfigFaultIsLocated, FirstDivergingNodeNamesIt) {
  const ConfigFault& f = GetParam();
  testing::ScratchDir dir("config-fault");
  ThreadPool pool(2);
  Context ctx{&pool, false, false};
  auto edit = [&](const fs::path& ckpt) { edit_config_number(ckpt, f.field, f.factor, f.offset); };
  const GoldenCheck r = check_golden_fixture(testing::fixture_dir("llama_tied_gqa"), dir.path(), {},
                                             {.dtype = DType::F32}, ctx, edit);
  std::printf("%s: logit NMSE %.3g, decode NMSE %.3g (tolerance %.0e)\n", f.field.c_str(),
              r.logits.nmse, r.decode.nmse, kF32Nmse);
  ASSERT_TRUE(r.layers.first_diverging) << "a wrong " << f.field << " went unseen";
  EXPECT_EQ(*r.layers.first_diverging, f.first_diverging);
  EXPECT_GT(r.logits.nmse, kF32Nmse);
  EXPECT_GT(r.decode.nmse, kF32Nmse);
  EXPECT_TRUE(r.decode_first_diverging_step);
}

INSTANTIATE_TEST_SUITE_P(Llama, ConfigFaultIsLocated,
                         ::testing::Values(ConfigFault{"rope_theta", 1.001, 0, "layer.0.attn_out"},
                                           ConfigFault{"rms_norm_eps", 10, 0, "layer.0.attn_out"}),
                         [](const auto& info) { return info.param.field; });

// A cache bug: the values layer 1 cached for the prompt's last position are scaled by 1.01
// once the prompt has run (through KVCache's public fields, the seam check_golden_fixture
// offers tests). The prompt's logits and every named state are untouched and every decode
// step's argmax is still the reference's token, so only the decode logits can catch it, from
// the first step that reads the cache.
TEST(CacheFault, ShiftsDecodeLogitsWithoutFlippingAToken) {
  testing::ScratchDir dir("cache-fault");
  ThreadPool pool(2);
  Context ctx{&pool, false, false};
  auto bug = [](KVCache& cache) { scale_cached_values(cache, 1, 1.01f); };
  const GoldenCheck r = check_golden_fixture(testing::fixture_dir("llama_tied_gqa"), dir.path(), {},
                                             {.dtype = DType::F32}, ctx, {}, bug);
  std::printf("cache fault: logit NMSE %.3g, decode NMSE %.3g (tolerance %.0e)\n", r.logits.nmse,
              r.decode.nmse, kF32Nmse);
  EXPECT_LE(r.logits.nmse, kF32Nmse);
  EXPECT_FALSE(r.layers.first_diverging);
  EXPECT_EQ(r.decode.top1_agreement, 1.0) << "the fault flipped a token: make it smaller";
  EXPECT_EQ(r.greedy_actual, r.greedy_reference);
  EXPECT_GT(r.decode.nmse, kF32Nmse) << "the decode check missed a cache bug";
  EXPECT_EQ(r.decode_first_diverging_step, 1);  // row 0 is the prompt's, before the edit
}

INSTANTIATE_TEST_SUITE_P(Tiny, Golden, ::testing::ValuesIn(testing::fixture_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace lathe
