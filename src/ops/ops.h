// Op front ends: each checks its inputs' shapes and dtypes once, then dispatches to a
// backend kernel (today the CPU; src/backends/cuda later). Activations are F32 tensors;
// weights of linear layers may be F32 or BF16.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "core/tensor.h"
#include "core/thread_pool.h"
#include "graph/executor.h"

namespace lathe {

namespace ops {

// x[m, k] . w[n, k]^T + bias[n]  ->  [m, n]    (transformers nn.Linear)
Tensor linear(Context& ctx, const Tensor& x, const Tensor& w, const Tensor* bias = nullptr);
// Root-mean-square norm over the last dimension; `offset` is added to the weight (1 for
// Gemma-style norms that store weight - 1, 0 otherwise).
Tensor rms_norm(const Tensor& x, const Tensor& weight, float eps, float offset = 0.0f);
// silu(gate) * up, elementwise.
Tensor silu_mul(const Tensor& gate, const Tensor& up);

// The MLP activations transformers names in hidden_act (ACT2FN): "silu", "gelu" (erf),
// "gelu_pytorch_tanh" (tanh approximation), "relu", "relu2".
using graph::Activation;
// act(gate) * up, elementwise (a gated MLP).
Tensor act_mul(Activation act, const Tensor& gate, const Tensor& up);
// act(x), elementwise.
Tensor activation(Activation act, const Tensor& x);
// torch.nn.LayerNorm over the last dimension n. weight and bias may each be null
// (elementwise_affine=False, bias=False). Either holds n values, or g * n values that
// successive rows cycle through: per-head weights [heads, head_dim] over x [tokens, heads,
// head_dim] (StableLmLayerNormPerHead, CohereLayerNorm on q and k).
Tensor layer_norm(const Tensor& x, const Tensor* weight, const Tensor* bias, float eps);
// x = clamp(x, -limit, limit), elementwise (Olmo clip_qkv).
void clamp_inplace(Tensor& x, float limit);
// xIELU (transformers XIELUActivation) with its coefficients already formed from the learned
// parameters: alpha_p = softplus(alpha_p'), alpha_n = beta + softplus(alpha_n'). For x > 0:
// alpha_p x^2 + beta x; else (expm1(min(x, eps)) - x) alpha_n + beta x.
Tensor xielu(const Tensor& x, float alpha_p, float alpha_n, float beta, float eps);
// x *= s, elementwise.
void scale_inplace(Tensor& x, float s);
// x = cap * tanh(x / cap), elementwise (Gemma2 final_logit_softcapping).
void softcap_inplace(Tensor& x, float cap);
// a + b, elementwise (same shapes).
Tensor add(const Tensor& a, const Tensor& b);
void add_inplace(Tensor& a, const Tensor& b);
// Rows of `table` [vocab, dim] for each id -> [ids, dim] (F32). Ids are range-checked.
Tensor embedding(const Tensor& table, std::span<const int32_t> ids);
// Rotary embedding in place on x[tokens, heads, head_dim] with cos/sin [tokens, rot/2].
using graph::RopeLayout;
void rope(Tensor& x, const Tensor& cos, const Tensor& sin,
          RopeLayout layout = RopeLayout::HalfSplit);
// Causal attention of q[tokens, heads, head_dim] over caches [max_seq, kv_heads, head_dim]
// holding positions [0, pos0 + tokens); window 0 means no sliding window; softcap > 0 caps
// the scaled scores as softcap * tanh(score / softcap) (0: no capping). `position_bias`, when
// given, is [heads, >= pos0 + tokens]: row h, column j is added to head h's scaled score for
// the key at position j (ALiBi, see alibi_bias in models/builder.h).
Tensor attention(Context& ctx, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                 int64_t pos0, int64_t window, float scale, float softcap = 0.0f,
                 const Tensor* position_bias = nullptr);

// Copies rows [0, tokens) of src[tokens, ...] into dst at row `at` (the KV cache append).
void write_rows(Tensor& dst, const Tensor& src, int64_t at);

}  // namespace ops
}  // namespace lathe
