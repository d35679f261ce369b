#include "lab/golden_check.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "generate/generate.h"
#include "io/checkpoint.h"
#include "io/json.h"
#include "io/safetensors.h"
#include "models/registry.h"

namespace lathe {
namespace fs = std::filesystem;

namespace {
constexpr int64_t kGoldenFormat = 2;  // 2: decode_logits

std::vector<int32_t> id_list(const JsonFields& f, const std::string& key) {
  std::vector<int32_t> ids;
  for (const Json& x : f.at(key)) ids.push_back(x.get<int32_t>());
  return ids;
}
}  // namespace

Tensor decode_logits(const Model& model, Context& ctx, std::span<const int32_t> prompt,
                     std::span<const int32_t> fed,
                     const std::function<void(KVCache&)>& edit_cache) {
  KVCache cache = model.new_cache(static_cast<int64_t>(prompt.size() + fed.size()), ctx.kv_dtype);
  std::vector<Tensor> rows;
  rows.push_back(model.forward(ctx, prompt, cache, false));
  if (edit_cache) edit_cache(cache);
  // As generate does: where the model asks for it, the whole sequence is run again.
  std::vector<int32_t> context(prompt.begin(), prompt.end());
  for (const int32_t id : fed) {
    context.push_back(id);
    const bool rebuild = rebuilds_cache(model, cache);
    if (rebuild) cache.clear();
    rows.push_back(rebuild ? model.forward(ctx, context, cache, false)
                           : model.forward(ctx, {&id, 1}, cache, false));
  }
  const int64_t vocab = rows.front().dim(-1);
  Tensor out = Tensor::zeros(DType::F32, {static_cast<int64_t>(rows.size()), vocab});
  for (size_t r = 0; r < rows.size(); ++r)
    std::copy_n(rows[r].data<float>(), vocab, out.mut<float>() + static_cast<int64_t>(r) * vocab);
  return out;
}

void scale_cached_values(KVCache& cache, int64_t layer, float factor) {
  if (layer < 0 || layer >= static_cast<int64_t>(cache.layers.size()) || cache.length == 0)
    fail("scale_cached_values: no layer ", layer, " or nothing cached");
  KVCache::Layer& l = cache.layers[static_cast<size_t>(layer)];
  if (l.kind == StateKind::Recurrent) {  // the state the layer carries forward
    for (Tensor& t : l.states)
      for (int64_t i = 0; i < t.numel(); ++i) t.mut<float>()[i] *= factor;
    return;
  }
  const int64_t slot = (cache.length - 1) % l.slots;
  const int64_t per_slot = l.v.numel() / l.v.dim(0);
  if (l.v.dtype() == DType::BF16) {  // a bf16 cache: scaled in f32, rounded back
    uint16_t* v = l.v.mut<uint16_t>() + slot * per_slot;
    for (int64_t i = 0; i < per_slot; ++i) v[i] = f32_to_bf16(bf16_to_f32(v[i]) * factor);
    return;
  }
  float* v = l.v.mut<float>() + slot * per_slot;
  for (int64_t i = 0; i < per_slot; ++i) v[i] *= factor;
}

namespace {

// The route nodes lathe traced against the reference's route_ids / route_weights.
// `suffix`: "" for the f32 goldens, "_bf16" or "_f16" for those of the rounded weights.
void compare_routes(const Json& names, const SafetensorsFile& ref, const std::string& suffix,
                    const std::vector<std::pair<std::string, Tensor>>& actual, GoldenCheck& r) {
  const Tensor ids = ref.tensor("route_ids" + suffix);
  const Tensor weights = ref.tensor("route_weights" + suffix);
  if (ids.dtype() != DType::I32 || ids.rank() != 3 || weights.shape() != ids.shape() ||
      ids.dim(0) != static_cast<int64_t>(names.size()))
    fail("goldens: route_ids and route_weights must be I32 and F32 [", names.size(),
         " layers, tokens, k]");
  const int64_t tokens = ids.dim(1), k = ids.dim(2);
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string name = names[i].get<std::string>();
    const int32_t* want = ids.data<int32_t>() + static_cast<int64_t>(i) * tokens * k;
    const float* want_w = weights.data<float>() + static_cast<int64_t>(i) * tokens * k;
    auto it =
        std::find_if(actual.begin(), actual.end(), [&](const auto& a) { return a.first == name; });
    ++r.route_layers;
    r.route_choices += tokens * k;
    if (it == actual.end() || it->second.shape() != Shape{2, tokens, k}) {
      r.route_mismatches += tokens * k;
      if (!r.first_route_mismatch) r.first_route_mismatch = name + " was not traced as [2, T, k]";
      continue;
    }
    const float* got_w = it->second.data<float>();
    const float* got = got_w + tokens * k;
    for (int64_t t = 0; t < tokens; ++t) {
      bool same = true;
      for (int64_t j = 0; j < k; ++j) {
        same = same && got[t * k + j] == static_cast<float>(want[t * k + j]);
        r.route_weight_max_error =
            std::max(r.route_weight_max_error,
                     static_cast<double>(std::abs(got_w[t * k + j] - want_w[t * k + j])));
      }
      if (same) continue;
      for (int64_t j = 0; j < k; ++j) r.route_mismatches += got[t * k + j] != want[t * k + j];
      if (!r.first_route_mismatch) {
        std::string a, b;
        for (int64_t j = 0; j < k; ++j) {
          a += cat(j ? ", " : "", static_cast<int64_t>(got[t * k + j]));
          b += cat(j ? ", " : "", want[t * k + j]);
        }
        r.first_route_mismatch = cat(name, ", token ", t, ": [", a, "] for [", b, "]");
      }
    }
  }
}

}  // namespace

GoldenCheck check_golden_fixture(const fs::path& fixture, const fs::path& work_dir,
                                 const TinyBuildOptions& build, const ModelOptions& options,
                                 Context& ctx, const std::function<void(const fs::path&)>& edit,
                                 const std::function<void(KVCache&)>& edit_cache) {
  const Json golden = read_json_file(fixture / "goldens.json");
  JsonFields g(golden, (fixture / "goldens.json").string());
  if (g.get<int64_t>("format") != kGoldenFormat)
    fail(g.origin(), ": golden format ", g.get<int64_t>("format"), ", this lathe reads format ",
         kGoldenFormat, "; regenerate with tools/reference/make_tiny.py");
  GoldenCheck r;
  r.name = fixture.filename().string();
  r.architecture = g.get<std::string>("architecture");
  JsonFields made(g.at("made_by"), g.origin() + " made_by");
  r.made_by = cat("transformers ", made.get<std::string>("transformers"), ", torch ",
                  made.get<std::string>("torch"));

  build_tiny_checkpoint(fixture, work_dir, build);
  if (edit) edit(work_dir);
  const Checkpoint ckpt = Checkpoint::open(work_dir);
  // A bf16 checkpoint's goldens are transformers' on its tensors rounded to bf16, an FP8
  // fixture's dequantized matrices included: lathe rounds them too (its native FP8 keeps
  // them exact, which f32 goldens and f16 checkpoints test).
  ModelOptions model_options = options;
  if (build.dtype == DType::BF16) model_options.dequantize_fp8 = true;
  auto model = load_model(ckpt, model_options);
  r.quantized_matrices = model->info().quantized_matrices;
  const SafetensorsFile ref = SafetensorsFile::open(fixture / "goldens.safetensors");

  // Teacher-forced logits and named intermediates over the whole sequence.
  const auto ids = id_list(g, "teacher_forced_ids");
  std::vector<std::pair<std::string, Tensor>> actual;
  Trace trace = [&](const std::string& name, const Tensor& t) {
    actual.emplace_back(name, t.clone());
  };
  KVCache cache = model->new_cache(static_cast<int64_t>(ids.size()), ctx.kv_dtype);
  Tensor logits = model->forward(ctx, ids, cache, true, &trace);
  r.logits = compare_logits(logits, ref.tensor("logits").to(DType::F32));

  const Tensor hidden = ref.tensor("hidden_states");
  std::vector<std::pair<std::string, Tensor>> reference;
  const Json& names = g.at("hidden_state_names");
  const int64_t per_layer = hidden.numel() / hidden.dim(0);
  for (size_t i = 0; i < names.size() && static_cast<int64_t>(i) < hidden.dim(0); ++i)
    reference.emplace_back(names[i].get<std::string>(),
                           Tensor::view(DType::F32, {hidden.dim(1), hidden.dim(2)},
                                        hidden.data<float>() + i * per_layer, nullptr));
  const bool f32 = model->info().weight_dtype == DType::F32;
  r.layers = compare_layers(actual, reference, f32 ? kF32Nmse : kBf16Nmse);
  // A checkpoint stored in bf16 or f16 routes as transformers does on the rounded weights.
  const std::string rounded_suffix = build.dtype == DType::BF16  ? "_bf16"
                                     : build.dtype == DType::F16 ? "_f16"
                                                                 : "";
  if (g.has("route_names") && ref.contains("route_ids" + rounded_suffix))
    compare_routes(g.at("route_names"), ref, rounded_suffix, actual, r);

  // The decode steps' logits, the reference's greedy tokens fed back (so the rows stay
  // comparable where bf16 tokens part).
  const auto prompt = id_list(g, "prompt_ids");
  r.greedy_reference = id_list(g, "greedy_tokens");
  const Tensor decode_ref = ref.tensor("decode_logits").to(DType::F32);
  const int64_t steps = decode_ref.rank() == 2 ? decode_ref.dim(0) : 0;
  if (steps < 1 || steps > static_cast<int64_t>(r.greedy_reference.size()))
    fail(fixture.string(),
         "/goldens.safetensors: decode_logits must be [steps, vocab] with at most "
         "one step per greedy token");
  const Tensor decode = decode_logits(
      *model, ctx, prompt,
      std::span<const int32_t>(r.greedy_reference).first(static_cast<size_t>(steps - 1)),
      edit_cache);
  r.decode = compare_logits(decode, decode_ref);
  r.decode_first_diverging_step = first_row_past(decode, decode_ref, f32 ? kF32Nmse : kBf16Nmse);

  // 32 greedy tokens through the static cache, prompt first, then one token at a time.
  for (const Json& m : g.at("greedy_margins")) r.greedy_margins.push_back(m.get<double>());
  GenerateOptions go;
  go.max_new_tokens = 32;
  go.eos_token_ids = ckpt.generation().eos_token_ids;
  KVCache gen_cache =
      model->new_cache(static_cast<int64_t>(prompt.size()) + go.max_new_tokens, ctx.kv_dtype);
  r.greedy_actual = generate(*model, ctx, gen_cache, prompt, go).tokens;
  r.first_token_mismatch = first_token_mismatch(r.greedy_actual, r.greedy_reference);

  const char* storage = build.dtype == DType::BF16  ? "bf16"
                        : build.dtype == DType::F16 ? "f16"
                                                    : nullptr;
  if (storage && ref.contains(cat("logits_", storage)) && g.has("rounded_weights")) {
    GoldenCheck::Rounded& q = r.rounded.emplace();
    q.storage = storage;
    q.logits = compare_logits(logits, ref.tensor(cat("logits_", storage)).to(DType::F32));
    JsonFields rw(g.at("rounded_weights").at(storage),
                  cat(g.origin(), " rounded_weights.", storage));
    for (const Json& t : rw.at("greedy_tokens")) q.greedy_reference.push_back(t.get<int32_t>());
    for (const Json& m : rw.at("greedy_margins")) q.greedy_margins.push_back(m.get<double>());
    q.first_token_mismatch = first_token_mismatch(r.greedy_actual, q.greedy_reference);
    // The decode rows of the rounded model's own greedy tokens (fewer than the f32 model's
    // where it stopped at an eos sooner).
    const Tensor rdecode_ref = ref.tensor(cat("decode_logits_", storage)).to(DType::F32);
    const int64_t rsteps = rdecode_ref.rank() == 2 ? rdecode_ref.dim(0) : 0;
    if (rsteps < 1 || rsteps > static_cast<int64_t>(q.greedy_reference.size()) ||
        rdecode_ref.dim(-1) != decode_ref.dim(-1))
      fail(fixture.string(), "/goldens.safetensors: decode_logits_", storage,
           " must be [steps, vocab] with at most one step per rounded greedy token");
    const Tensor rdecode = decode_logits(
        *model, ctx, prompt,
        std::span<const int32_t>(q.greedy_reference).first(static_cast<size_t>(rsteps - 1)));
    q.decode = compare_logits(rdecode, rdecode_ref);
    q.decode_first_diverging_step = first_row_past(rdecode, rdecode_ref, kF32Nmse);
  }
  return r;
}

}  // namespace lathe
