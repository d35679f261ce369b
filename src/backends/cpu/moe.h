// Mixture-of-experts kernels: routing tokens to experts (graph Op::Route) and running each
// token's experts (Op::Experts), as transformers' routers and experts modules compute them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "core/thread_pool.h"
#include "graph/graph.h"

namespace lathe::cpu {

// The indices of the k largest of v[0, n), as torch.topk(largest=True, sorted) returns them on
// CPU, ties included: torch runs std::partial_sort when k * 64 <= n, else std::nth_element
// (and std::sort of the first k - 1 when sorted) over (value, index) pairs, NaN largest. The
// same libstdc++ algorithms over the same pairs put equal values in the same order.
void torch_topk(const float* v, int64_t n, int64_t k, bool sorted, int64_t* out);
// The same over `scratch`, room for n (value, index) pairs: no allocation.
using TopkPair = std::pair<float, int64_t>;
void torch_topk(const float* v, int64_t n, int64_t k, bool sorted, int64_t* out, TopkPair* scratch);

// Route (graph.h): logits [tokens, experts] (+ bias [experts]) -> out [2, tokens, k], with
// route_workspace_floats() floats of scratch (8-byte aligned); each weight last times
// expert_scale of its expert where that is given.
size_t route_workspace_floats(int64_t experts, int64_t k, int64_t groups);
// `given` [tokens, k] (may be null): the experts as exact integers in f32, for SqrtSoftplus
// (DeepseekV4's hash routing); an id outside the experts fails.
void route(const float* logits, const float* bias, int64_t tokens, int64_t experts,
           const graph::RouteAttrs& p, float* out, float* workspace,
           const float* expert_scale = nullptr, const float* given = nullptr);

struct ExpertsArgs {
  const float* x;      // [tokens, dim]
  const float* route;  // [2, tokens, k] (route())
  int64_t tokens, dim, inter, k, experts;
  // graph::kExpertInputs per expert: gate (null when ungated), up, down, then their F32
  // biases (each null when absent).
  const Tensor* const* weights;
  graph::Activation act;
  float* out;        // [tokens, dim]
  float* workspace;  // experts_workspace_floats() floats
  graph::ExpertGlu glu = graph::ExpertGlu::ActMul;
  float limit = 0, alpha = 0;  // ClampedSwiglu
  bool scale_inputs = false;   // each weight times the expert's input, not its output (Llama4)
};
// GptOssExperts._apply_gate over n elements: g = min(gate, limit), u = clamp(up, -limit, limit),
// y = (u + 1) * g * sigmoid(g * alpha). y may be gate.
void clamped_swiglu(const float* gate, const float* up, float* y, int64_t n, float limit,
                    float alpha);
// DeepseekV4Experts._apply_gate over n elements: silu(min(gate, limit)) *
// clamp(up, -limit, limit). y may be gate.
void clamped_silu(const float* gate, const float* up, float* y, int64_t n, float limit);
// The matmul scratch an Experts node's matrices of this dtype need; the node takes the most
// over its matrices (experts of one node may differ: a checkpoint's FP8 or MXFP4 matrices
// beside plain ones).
size_t experts_scratch_bytes(DType w_dtype, int64_t tokens, int64_t dim, int64_t inter,
                             bool reference);
size_t experts_workspace_floats(int64_t tokens, int64_t dim, int64_t inter, int64_t k,
                                int64_t experts, size_t scratch_bytes);
// Groups the tokens by expert, runs each expert on its own tokens only (an expert no token
// chose is never read), and sums each token's k weighted outputs in the route's order, as
// transformers' grouped_mm experts do (with scale_inputs, the outputs of the weighted inputs).
// Reference kernels, or the fast ones on the pool.
void experts(const ExpertsArgs& a, bool reference, ThreadPool& pool);

}  // namespace lathe::cpu
