#include "backends/cpu/moe.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "backends/cpu/kernels.h"
#include "core/error.h"

namespace lathe::cpu {

void torch_topk(const float* v, int64_t n, int64_t k, bool sorted, int64_t* out,
                TopkPair* scratch) {
  TopkPair* q = scratch;
  for (int64_t i = 0; i < n; ++i) q[i] = {v[i], i};
  auto larger = [](const TopkPair& a, const TopkPair& b) {
    return (std::isnan(a.first) && !std::isnan(b.first)) || a.first > b.first;
  };
  if (k * 64 <= n) {
    std::partial_sort(q, q + k, q + n, larger);
  } else {
    std::nth_element(q, q + (k - 1), q + n, larger);
    if (sorted) std::sort(q, q + (k - 1), larger);
  }
  for (int64_t i = 0; i < k; ++i) out[i] = q[i].second;
}

void torch_topk(const float* v, int64_t n, int64_t k, bool sorted, int64_t* out) {
  std::vector<TopkPair> q(static_cast<size_t>(n));
  torch_topk(v, n, k, sorted, out, q.data());
}

namespace {

// torch.softmax over n values in f32: exp(x - max) / sum.
void softmax(const float* x, int64_t n, float* y) {
  float m = x[0];
  for (int64_t i = 1; i < n; ++i) m = std::max(m, x[i]);
  float sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += (y[i] = std::exp(x[i] - m));
  for (int64_t i = 0; i < n; ++i) y[i] /= sum;
}

// route()'s scratch, carved from its workspace: (value, index) pairs for the top-k first (they
// need 8-byte alignment), then the index lists, then the float rows.
struct RouteScratch {
  TopkPair* pairs;                   // [experts]
  int64_t *ids, *keep;               // [k], [groups]
  float *scores, *choice, *masked;   // [experts] each
  float *top, *group_scores, *kept;  // [k], [groups], [groups]
};

RouteScratch carve_route(float* ws, int64_t experts, int64_t k, int64_t groups) {
  RouteScratch r;
  r.pairs = reinterpret_cast<TopkPair*>(ws);
  r.ids = reinterpret_cast<int64_t*>(r.pairs + experts);
  r.keep = r.ids + k;
  r.scores = reinterpret_cast<float*>(r.keep + groups);
  r.choice = r.scores + experts;
  r.masked = r.choice + experts;
  r.top = r.masked + experts;
  r.group_scores = r.top + k;
  r.kept = r.group_scores + groups;
  return r;
}

// The grouped choice for one token, as DeepseekV3TopkRouter / Glm4Moe (Sigmoid: groups scored
// by the sum of their two best choice scores, the rest masked to -inf) and DeepseekV2's
// group_limited_greedy (SoftmaxGreedy: groups scored by their best, the rest masked to 0) make
// it: experts outside the best top_groups groups masked (into r.masked), then the top k of what
// is left (torch.topk(sorted=False) both times).
void grouped_choice(const float* choice, int64_t experts, const graph::RouteAttrs& p, int64_t* ids,
                    RouteScratch& r) {
  const int64_t per_group = experts / p.groups;
  const bool v3 = p.routing == graph::Routing::Sigmoid;
  std::copy(choice, choice + experts, r.masked);
  if (p.groups > 1) {
    int64_t best[2];
    for (int64_t g = 0; g < p.groups; ++g) {
      const float* c = choice + g * per_group;
      float& score = r.group_scores[g];
      if (v3) {
        torch_topk(c, per_group, std::min<int64_t>(2, per_group), true, best, r.pairs);
        score = c[best[0]] + (per_group > 1 ? c[best[1]] : 0);
      } else {
        score = *std::max_element(c, c + per_group);
      }
    }
    torch_topk(r.group_scores, p.groups, p.top_groups, false, r.keep, r.pairs);
    std::fill(r.kept, r.kept + p.groups, 0.0f);
    for (int64_t i = 0; i < p.top_groups; ++i) r.kept[r.keep[i]] = 1.0f;
    for (int64_t e = 0; e < experts; ++e)
      if (r.kept[e / per_group] == 0.0f)
        r.masked[e] = v3 ? -std::numeric_limits<float>::infinity() : 0.0f;
  }
  torch_topk(r.masked, experts, p.top_k, false, ids, r.pairs);
}

// The sigmoid routers' scores and what they choose by: score + bias (the bias may be absent).
void sigmoid_scores(const float* logits, const float* bias, int64_t experts, float* scores,
                    float* choice) {
  for (int64_t e = 0; e < experts; ++e) scores[e] = 1.0f / (1.0f + std::exp(-logits[e]));
  for (int64_t e = 0; e < experts; ++e) choice[e] = scores[e] + (bias ? bias[e] : 0.0f);
}

// sparsemixer (PhimoeTopKRouter, eval mode): the first-occurring maximum of the logits (torch's
// max), weighted by its softmax among the logits within 2 jitter_eps of it relative to
// max(|logit|, maximum); then the same among the rest. r.choice holds the masked logits.
void sparse_mixer(const float* logits, int64_t experts, float jitter_eps, int64_t* ids, float* w,
                  RouteScratch& r) {
  const float threshold = 2 * jitter_eps;
  float* masked = r.choice;
  std::copy_n(logits, experts, masked);
  for (int64_t j = 0; j < 2; ++j) {
    int64_t top = 0;
    for (int64_t e = 1; e < experts; ++e)
      if (masked[e] > masked[top]) top = e;
    const float best = masked[top];
    // The gates: the masked logits (earlier picks stay -inf), those too far below the best
    // -inf too, through a softmax.
    for (int64_t e = 0; e < experts; ++e) {
      const float factor = std::max(std::fabs(logits[e]), best);
      r.scores[e] = (best - logits[e]) / factor > threshold
                        ? -std::numeric_limits<float>::infinity()
                        : masked[e];
    }
    softmax(r.scores, experts, r.scores);
    ids[j] = top;
    w[j] = r.scores[top];
    masked[top] = -std::numeric_limits<float>::infinity();
  }
}

}  // namespace

size_t route_workspace_floats(int64_t experts, int64_t k, int64_t groups) {
  const int64_t g = std::max<int64_t>(groups, 1);
  return static_cast<size_t>(experts * 4 + (k + g) * 2 + 3 * experts + k + 2 * g);
}

void route(const float* logits, const float* bias, int64_t tokens, int64_t experts,
           const graph::RouteAttrs& p, float* out, float* workspace, const float* expert_scale,
           const float* given) {
  const int64_t k = p.top_k;
  RouteScratch r = carve_route(workspace, experts, k, std::max<int64_t>(p.groups, 1));
  float* scores = r.scores;
  int64_t* ids = r.ids;
  for (int64_t t = 0; t < tokens; ++t) {
    const float* l = logits + t * experts;
    float* w = out + t * k;
    switch (p.routing) {
      case graph::Routing::SoftmaxTopK:
        softmax(l, experts, scores);
        torch_topk(scores, experts, k, true, ids, r.pairs);
        for (int64_t j = 0; j < k; ++j) w[j] = scores[ids[j]];
        break;
      case graph::Routing::TopKSoftmax:
        torch_topk(l, experts, k, true, ids, r.pairs);
        for (int64_t j = 0; j < k; ++j) r.top[j] = l[ids[j]];
        softmax(r.top, k, w);
        break;
      case graph::Routing::SoftmaxGreedy:
        softmax(l, experts, scores);
        grouped_choice(scores, experts, p, ids, r);
        for (int64_t j = 0; j < k; ++j) w[j] = r.masked[ids[j]];
        break;
      case graph::Routing::SoftmaxBiased: {
        softmax(l, experts, scores);
        for (int64_t e = 0; e < experts; ++e) r.choice[e] = scores[e] + (bias ? bias[e] : 0.0f);
        torch_topk(r.choice, experts, k, true, ids, r.pairs);
        float sum = 0;
        for (int64_t j = 0; j < k; ++j) sum += (w[j] = scores[ids[j]]);
        sum = std::max(sum, p.eps);  // torch.clamp(sum, min=moe_norm_min)
        for (int64_t j = 0; j < k; ++j) w[j] /= sum;
        break;
      }
      case graph::Routing::SigmoidTopK:
        sigmoid_scores(l, bias, experts, scores, r.choice);
        torch_topk(r.choice, experts, k, true, ids, r.pairs);
        for (int64_t j = 0; j < k; ++j) w[j] = scores[ids[j]];
        break;
      case graph::Routing::SparseMixer:
        sparse_mixer(l, experts, p.eps, ids, w, r);
        break;
      case graph::Routing::TopKSigmoid:  // Llama4Router: sigmoid of the top-k logits
        torch_topk(l, experts, k, true, ids, r.pairs);
        for (int64_t j = 0; j < k; ++j) w[j] = 1.0f / (1.0f + std::exp(-l[ids[j]]));
        break;
      case graph::Routing::Sigmoid: {
        sigmoid_scores(l, bias, experts, scores, r.choice);
        grouped_choice(r.choice, experts, p, ids, r);
        for (int64_t j = 0; j < k; ++j) w[j] = scores[ids[j]];
        break;
      }
      case graph::Routing::SqrtSoftplus:  // DeepseekV4TopKRouter, DeepseekV4HashRouter
        for (int64_t e = 0; e < experts; ++e) {
          // torch.nn.functional.softplus (beta 1, threshold 20), then its square root.
          const float x = l[e];
          scores[e] = std::sqrt(x > 20.0f ? x : std::log1p(std::exp(x)));
          r.choice[e] = scores[e] + (bias ? bias[e] : 0.0f);
        }
        if (given) {
          for (int64_t j = 0; j < k; ++j) {
            const float id = given[t * k + j];
            if (!(id >= 0 && id < static_cast<float>(experts)) || id != std::floor(id))
              fail("route: expert id ", id, " of token row ", t, " is not one of the ", experts,
                   " experts");
            ids[j] = static_cast<int64_t>(id);
          }
        } else {
          torch_topk(r.choice, experts, k, false, ids, r.pairs);
        }
        for (int64_t j = 0; j < k; ++j) w[j] = scores[ids[j]];
        break;
    }
    if (p.norm_topk) {
      float sum = 0;
      for (int64_t j = 0; j < k; ++j) sum += w[j];
      sum += p.eps;
      for (int64_t j = 0; j < k; ++j) w[j] /= sum;
    }
    if (p.scale != 1)
      for (int64_t j = 0; j < k; ++j) w[j] *= p.scale;
    if (expert_scale)  // Gemma4TextRouter: top_k_weights * per_expert_scale[top_k_index]
      for (int64_t j = 0; j < k; ++j) w[j] *= expert_scale[ids[j]];
    for (int64_t j = 0; j < k; ++j) out[tokens * k + t * k + j] = static_cast<float>(ids[j]);
  }
}

namespace {

// The workspace of experts(): each token's k weighted outputs, then one expert's rows (its
// tokens gathered, gate and up, down), then the slot lists as int32, then matmul scratch.
struct ExpertsWorkspace {
  float *slots, *x, *gate, *up, *down;
  void* scratch;
  int32_t *count, *order, *next;
};

size_t slot_floats(int64_t tokens, int64_t dim, int64_t inter, int64_t k) {
  return static_cast<size_t>(tokens * k * dim + 2 * tokens * dim + 2 * tokens * inter);
}

// The slot lists come before the matmul scratch, so that carving needs no scratch size (the
// workspace holds the most any of the node's matrices needs: experts_workspace_floats).
ExpertsWorkspace carve(const ExpertsArgs& a) {
  ExpertsWorkspace w;
  w.slots = a.workspace;
  w.x = w.slots + a.tokens * a.k * a.dim;
  w.gate = w.x + a.tokens * a.dim;
  w.up = w.gate + a.tokens * a.inter;
  w.down = w.up + a.tokens * a.inter;
  w.count = reinterpret_cast<int32_t*>(w.down + a.tokens * a.dim);
  w.order = w.count + a.experts + 1;
  w.next = w.order + a.tokens * a.k;
  w.scratch = w.next + a.experts;
  return w;
}

const float* bias_of(const Tensor* t) {
  return t ? t->data<float>() : nullptr;
}

}  // namespace

void clamped_swiglu(const float* gate, const float* up, float* y, int64_t n, float limit,
                    float alpha) {
  for (int64_t i = 0; i < n; ++i) {
    // std::min / std::clamp keep a NaN as torch.clamp does.
    const float g = std::min(gate[i], limit);
    const float u = std::clamp(up[i], -limit, limit);
    const float glu = g * (1.0f / (1.0f + std::exp(-(g * alpha))));
    y[i] = (u + 1.0f) * glu;
  }
}

void clamped_silu(const float* gate, const float* up, float* y, int64_t n, float limit) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = std::min(gate[i], limit);
    const float u = std::clamp(up[i], -limit, limit);
    y[i] = g / (1.0f + std::exp(-g)) * u;
  }
}

size_t experts_scratch_bytes(DType w_dtype, int64_t tokens, int64_t dim, int64_t inter,
                             bool reference) {
  return matmul_scratch_bytes(w_dtype, tokens, std::max(dim, inter), reference);
}

size_t experts_workspace_floats(int64_t tokens, int64_t dim, int64_t inter, int64_t k,
                                int64_t experts, size_t scratch) {
  return slot_floats(tokens, dim, inter, k) + (scratch + sizeof(float) - 1) / sizeof(float) +
         static_cast<size_t>(experts + 1 + tokens * k + experts);
}

void experts(const ExpertsArgs& a, bool reference, ThreadPool& pool) {
  const int64_t n = a.tokens, k = a.k, d = a.dim, inter = a.inter;
  const Tensor* const* first = a.weights;  // the first expert held (expert parallelism)
  while (!first[1]) first += graph::kExpertInputs;
  ExpertsWorkspace ws = carve(a);
  const float* weights = a.route;
  const float* ids = a.route + n * k;
  // Slots (token, j) grouped by expert, tokens in order within each (a counting sort).
  std::fill(ws.count, ws.count + a.experts + 1, 0);
  for (int64_t s = 0; s < n * k; ++s) {
    const float id = ids[s];
    if (!(id >= 0 && id < static_cast<float>(a.experts)))
      fail("internal: experts: expert id ", id, " of ", a.experts);
    ++ws.count[static_cast<int64_t>(id) + 1];
  }
  for (int64_t e = 0; e < a.experts; ++e) ws.count[e + 1] += ws.count[e];
  std::copy(ws.count, ws.count + a.experts, ws.next);
  for (int64_t s = 0; s < n * k; ++s)
    ws.order[ws.next[static_cast<int64_t>(ids[s])]++] = static_cast<int32_t>(s);
  auto linear = [&](const float* x, const Tensor& w, const Tensor* bias, float* y, int64_t m) {
    if (reference)
      matmul_reference(x, w.data<void>(), w.dtype(), bias_of(bias), y, m, w.dim(0), w.dim(1),
                       ws.scratch);
    else
      matmul_fast(x, w.data<void>(), w.dtype(), bias_of(bias), y, m, w.dim(0), w.dim(1), ws.scratch,
                  pool);
  };
  // One expert's m rows of slots (their tokens' inputs through the expert, weighted into the
  // slots' outputs).
  auto run = [&](const Tensor* const* ew, const int32_t* slots, int32_t m) {
    for (int32_t r = 0; r < m; ++r) {
      float* row = ws.x + int64_t{r} * d;
      const float* src = a.x + (slots[r] / k) * d;
      if (a.scale_inputs) {  // Llama4TextMoe: routed_in = hidden_states * router_scores
        const float w = weights[slots[r]];
        for (int64_t i = 0; i < d; ++i) row[i] = src[i] * w;
      } else {
        std::memcpy(row, src, static_cast<size_t>(d) * sizeof(float));
      }
    }
    const Tensor* gate = ew[0];
    const Tensor &up = *ew[1], &down = *ew[2];
    // glu(gate, up) into gate's rows (act_mul may write over its gate, not its up).
    float* h = ws.gate;
    if (gate) {
      linear(ws.x, *gate, ew[3], ws.gate, m);
      linear(ws.x, up, ew[4], ws.up, m);
      switch (a.glu) {
        case graph::ExpertGlu::ActMul:
          act_mul(a.act, ws.gate, ws.up, h, int64_t{m} * inter);
          break;
        case graph::ExpertGlu::ClampedSwiglu:
          clamped_swiglu(ws.gate, ws.up, h, int64_t{m} * inter, a.limit, a.alpha);
          break;
        case graph::ExpertGlu::ClampedSilu:
          clamped_silu(ws.gate, ws.up, h, int64_t{m} * inter, a.limit);
          break;
      }
    } else {
      linear(ws.x, up, ew[4], h, m);
      activation(a.act, h, h, int64_t{m} * inter);
    }
    linear(h, down, ew[5], ws.down, m);
    for (int32_t r = 0; r < m; ++r) {
      const float w = a.scale_inputs ? 1.0f : weights[slots[r]];
      const float* src = ws.down + int64_t{r} * d;
      float* dst = ws.slots + int64_t{slots[r]} * d;
      for (int64_t i = 0; i < d; ++i) dst[i] = src[i] * w;
    }
  };
  for (int64_t e = 0; e < a.experts; ++e) {
    const int32_t begin = ws.count[e], total = ws.count[e + 1] - begin;
    const int32_t* slots = ws.order + begin;
    const Tensor* const* ew = a.weights + graph::kExpertInputs * e;
    if (!ew[1]) {  // another rank's expert: its share is added there (expert parallelism)
      for (int32_t r = 0; r < total; ++r) std::fill_n(ws.slots + int64_t{slots[r]} * d, d, 0.0f);
      continue;
    }
    // In batches of at most n rows (the workspace's): a hash router (DeepseekV4) may send one
    // token to an expert more than once. Rows are computed alone: batching keeps the bits.
    for (int32_t b = 0; b < total; b += static_cast<int32_t>(n))
      run(ew, slots + b, static_cast<int32_t>(std::min<int64_t>(n, total - b)));
  }
  // Each token's outputs summed in the route's order (torch: weighted.view(n, k, d).sum(1)).
  for (int64_t t = 0; t < n; ++t) {
    float* o = a.out + t * d;
    const float* s = ws.slots + t * k * d;
    std::memcpy(o, s, static_cast<size_t>(d) * sizeof(float));
    for (int64_t j = 1; j < k; ++j)
      for (int64_t i = 0; i < d; ++i) o[i] += s[j * d + i];
  }
}

}  // namespace lathe::cpu
