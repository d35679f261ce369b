// The Route op's top-k and routers against what torch and transformers' router modules return
// for logits full of ties (tests/fixtures/moe/routes.json, made by
// tools/reference/make_route_goldens.py): which experts, in which order, with which weights.
// GptOss's experts (biases, clamped SwiGLU) against their definition.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "backends/cpu/backend.h"
#include "backends/cpu/moe.h"
#include "backends/op_harness.h"
#include "core/numeric.h"
#include "io/json.h"

namespace lathe {
namespace {

using graph::Value;
using optest::random_tensor;

const Json& goldens() {
  static const Json j =
      read_json_file(std::string(LATHE_SOURCE_DIR) + "/tests/fixtures/moe/routes.json");
  return j;
}

TEST(TorchTopK, OrdersTiesAsTorchDoes) {
  int cases = 0;
  for (const Json& c : goldens().at("topk")) {
    const std::vector<float> v = c.at("values").get<std::vector<float>>();
    const int64_t k = c.at("k").get<int64_t>();
    std::vector<int64_t> got(static_cast<size_t>(k));
    cpu::torch_topk(v.data(), static_cast<int64_t>(v.size()), k, c.at("sorted").get<bool>(),
                    got.data());
    EXPECT_EQ(got, c.at("indices").get<std::vector<int64_t>>())
        << "n " << v.size() << " k " << k << " sorted " << c.at("sorted");
    ++cases;
  }
  EXPECT_GE(cases, 16);
}

graph::Routing routing(const std::string& name) {
  if (name == "softmax_topk") return graph::Routing::SoftmaxTopK;
  if (name == "topk_softmax") return graph::Routing::TopKSoftmax;
  if (name == "sigmoid") return graph::Routing::Sigmoid;
  if (name == "softmax_greedy") return graph::Routing::SoftmaxGreedy;
  if (name == "softmax_biased") return graph::Routing::SoftmaxBiased;
  if (name == "sigmoid_topk") return graph::Routing::SigmoidTopK;
  if (name == "sparse_mixer") return graph::Routing::SparseMixer;
  if (name == "topk_sigmoid") return graph::Routing::TopKSigmoid;
  if (name == "sqrt_softplus") return graph::Routing::SqrtSoftplus;
  throw std::runtime_error("routes.json: unknown routing " + name);
}

// Gemma4TextRouter's per_expert_scale: each chosen weight, after the renormalisation, times its
// expert's scale; the choice is that of the route without it.
TEST(Route, ExpertScaleMultipliesEachChosenWeight) {
  const int64_t tokens = 5, experts = 6, k = 2;
  const Tensor logits = random_tensor({tokens, experts}, 41, 2.0f);
  const Tensor scale = random_tensor({experts}, 42);
  const optest::Build build = [&](graph::Builder& g) {
    const graph::Builder::RouteParams p{.top_k = k, .norm_topk = true};
    return std::vector{g.route(g.weight(logits), p),
                       g.route(g.weight(logits), p, {}, g.weight(scale))};
  };
  for (bool reference : {true, false}) {
    ThreadPool pool(reference ? 1 : 3);
    const optest::Outcome o =
        optest::run(cpu_backend(reference), pool, optest::Mode::Planned, build, optest::Step{});
    const float *plain = o.values.at(0).data<float>(), *scaled = o.values.at(1).data<float>();
    for (int64_t i = 0; i < tokens * k; ++i) {
      const float id = plain[tokens * k + i];
      ASSERT_EQ(scaled[tokens * k + i], id);
      EXPECT_EQ(scaled[i], plain[i] * scale.data<float>()[static_cast<int64_t>(id)]) << i;
      EXPECT_NE(scaled[i], plain[i]) << i;
    }
  }
}

TEST(Route, MatchesTransformersRouters) {
  int cases = 0;
  for (const Json& c : goldens().at("routers")) {
    const auto logits = c.at("logits").get<std::vector<std::vector<float>>>();
    const int64_t tokens = static_cast<int64_t>(logits.size());
    const int64_t experts = static_cast<int64_t>(logits[0].size());
    std::vector<float> flat;
    for (const auto& row : logits) flat.insert(flat.end(), row.begin(), row.end());
    std::vector<float> bias;
    if (c.contains("bias")) bias = c.at("bias").get<std::vector<float>>();
    graph::RouteAttrs p;
    p.routing = routing(c.at("routing").get<std::string>());
    p.top_k = c.at("k").get<int64_t>();
    p.norm_topk = c.at("norm_topk").get<bool>();
    p.eps = c.at("norm_eps").get<float>();
    p.scale = c.at("scale").get<float>();
    p.groups = c.at("groups").get<int64_t>();
    p.top_groups = c.at("top_groups").get<int64_t>();
    std::vector<float> out(static_cast<size_t>(2 * tokens * p.top_k));
    std::vector<float> ws(cpu::route_workspace_floats(experts, p.top_k, p.groups));
    cpu::route(flat.data(), bias.empty() ? nullptr : bias.data(), tokens, experts, p, out.data(),
               ws.data());
    const auto ids = c.at("ids").get<std::vector<std::vector<int64_t>>>();
    const auto weights = c.at("weights").get<std::vector<std::vector<float>>>();
    const std::string what = c.at("module").get<std::string>() + " top " + std::to_string(p.top_k) +
                             " of " + std::to_string(experts);
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t j = 0; j < p.top_k; ++j) {
        EXPECT_EQ(out[static_cast<size_t>(tokens * p.top_k + t * p.top_k + j)],
                  static_cast<float>(ids[t][j]))
            << what << ", token " << t << " slot " << j;
        EXPECT_NEAR(out[static_cast<size_t>(t * p.top_k + j)], weights[t][j], 1e-6)
            << what << ", token " << t << " slot " << j;
      }
    ++cases;
  }
  EXPECT_GE(cases, 34);
}

// GptOssExperts._apply_gate: gate clamped above at the limit, up on both sides, then
// (up + 1) * gate * sigmoid(gate * alpha); NaN stays NaN as under torch.clamp.
TEST(ClampedSwiglu, MatchesGptOssApplyGate) {
  const float limit = 1.5f, alpha = 1.702f;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> gate = {-3.0f, -0.4f, 0.0f, 0.9f, 1.5f, 4.0f, 2.0f, nan, 0.3f};
  const std::vector<float> up = {0.2f, -5.0f, 1.0f, 3.0f, -1.5f, 0.0f, -0.7f, 0.1f, nan};
  std::vector<float> y(gate.size());
  cpu::clamped_swiglu(gate.data(), up.data(), y.data(), static_cast<int64_t>(gate.size()), limit,
                      alpha);
  for (size_t i = 0; i + 2 < gate.size(); ++i) {
    const double g = std::min<double>(gate[i], limit);
    const double u = std::clamp<double>(up[i], -limit, limit);
    EXPECT_NEAR(y[i], (u + 1) * g / (1 + std::exp(-g * alpha)), 1e-6) << "element " << i;
  }
  EXPECT_TRUE(std::isnan(y[7]));
  EXPECT_TRUE(std::isnan(y[8]));
  // gate 4 and 2 both clamp to the limit: equal up, equal output.
  float two[2];
  const float g2[] = {4.0f, 2.0f}, u2[] = {0.5f, 0.5f};
  cpu::clamped_swiglu(g2, u2, two, 2, limit, alpha);
  EXPECT_EQ(two[0], two[1]);
}

// An Experts node with biases and the clamped SwiGLU against the definition in double: for each
// token, the sum over its k experts of weight * (down (glu(gate x + bg, up x + bu)) + bd).
TEST(Experts, BiasesAndClampedSwigluMatchDefinition) {
  const int64_t tokens = 5, dim = 7, inter = 6, experts = 4, k = 2;
  const graph::ExpertGluParams glu{graph::ExpertGlu::ClampedSwiglu, 0.8f, 1.3f};
  const Tensor x = random_tensor({tokens, dim}, 71), router = random_tensor({experts, dim}, 72);
  std::vector<std::array<Tensor, 6>> w;
  for (uint32_t e = 0; e < experts; ++e)
    w.push_back({random_tensor({inter, dim}, 80 + e), random_tensor({inter, dim}, 90 + e),
                 random_tensor({dim, inter}, 100 + e), random_tensor({inter}, 110 + e),
                 random_tensor({inter}, 120 + e), random_tensor({dim}, 130 + e)});
  const optest::Build build = [&](graph::Builder& g) {
    graph::Value xv = g.weight(x);
    graph::Value r = g.route(g.linear(xv, g.weight(router)),
                             {.routing = graph::Routing::TopKSoftmax, .top_k = k});
    std::vector<graph::Builder::Expert> ex;
    for (const auto& e : w)
      ex.push_back({g.weight(e[0]), g.weight(e[1]), g.weight(e[2]), g.weight(e[3]), g.weight(e[4]),
                    g.weight(e[5])});
    return std::vector{r, g.experts(xv, r, ex, graph::Activation::Silu, glu)};
  };
  for (bool reference : {true, false}) {
    ThreadPool pool(reference ? 1 : 3);
    const optest::Outcome o =
        optest::run(cpu_backend(reference), pool, optest::Mode::Planned, build, optest::Step{});
    const float* route = o.values.at(0).data<float>();
    const float* out = o.values.at(1).data<float>();
    auto dot = [](const Tensor& m, int64_t row, const std::vector<double>& v) {
      double s = 0;
      for (size_t i = 0; i < v.size(); ++i)
        s += m.data<float>()[row * static_cast<int64_t>(v.size()) + static_cast<int64_t>(i)] * v[i];
      return s;
    };
    int clamped = 0;
    for (int64_t t = 0; t < tokens; ++t) {
      std::vector<double> xt(x.data<float>() + t * dim, x.data<float>() + (t + 1) * dim);
      std::vector<double> want(static_cast<size_t>(dim), 0.0);
      for (int64_t j = 0; j < k; ++j) {
        const auto& e = w[static_cast<size_t>(route[tokens * k + t * k + j])];
        std::vector<double> h(static_cast<size_t>(inter));
        for (int64_t i = 0; i < inter; ++i) {
          const double gate = dot(e[0], i, xt) + e[3].data<float>()[i];
          const double up = dot(e[1], i, xt) + e[4].data<float>()[i];
          clamped += gate > glu.limit || std::fabs(up) > glu.limit;
          const double g = std::min<double>(gate, glu.limit);
          const double u = std::clamp<double>(up, -glu.limit, glu.limit);
          h[static_cast<size_t>(i)] = (u + 1) * g / (1 + std::exp(-g * glu.alpha));
        }
        for (int64_t d = 0; d < dim; ++d)
          want[static_cast<size_t>(d)] +=
              route[t * k + j] * (dot(e[2], d, h) + e[5].data<float>()[d]);
      }
      for (int64_t d = 0; d < dim; ++d)
        EXPECT_NEAR(out[t * dim + d], want[static_cast<size_t>(d)], 1e-5)
            << (reference ? "reference" : "fast") << " token " << t << " dim " << d;
    }
    EXPECT_GT(clamped, 10) << "the limit must clamp here";
  }
}

// The graph hash (a plan cache's key) tells apart what changes the numbers: the glu kind, its
// limit and alpha, the experts' biases and an attention's sinks.
TEST(Experts, GluBiasesAndSinksEnterTheGraphHash) {
  const Tensor x = random_tensor({3, 8}, 1), router = random_tensor({4, 8}, 2);
  const Tensor gate = random_tensor({5, 8}, 3), up = random_tensor({5, 8}, 4);
  const Tensor down = random_tensor({8, 5}, 5), bias = random_tensor({5}, 6);
  auto experts_hash = [&](graph::ExpertGluParams glu, bool with_bias) {
    graph::Builder g;
    graph::Value xv = g.weight(x);
    graph::Value r = g.route(g.linear(xv, g.weight(router)),
                             {.routing = graph::Routing::TopKSoftmax, .top_k = 2});
    std::vector<graph::Builder::Expert> ex(
        4, {g.weight(gate), g.weight(up), g.weight(down), with_bias ? g.weight(bias) : Value{}});
    g.output(g.experts(xv, r, ex, graph::Activation::Silu, glu));
    return g.graph().hash();
  };
  using graph::ExpertGlu;
  const uint64_t plain = experts_hash({}, false);
  EXPECT_EQ(plain, experts_hash({}, false));
  EXPECT_NE(plain, experts_hash({}, true));
  const uint64_t clamped = experts_hash({ExpertGlu::ClampedSwiglu, 7.0f, 1.702f}, false);
  EXPECT_NE(plain, clamped);
  EXPECT_NE(clamped, experts_hash({ExpertGlu::ClampedSwiglu, 6.0f, 1.702f}, false));
  EXPECT_NE(clamped, experts_hash({ExpertGlu::ClampedSwiglu, 7.0f, 1.5f}, false));

  const Tensor q = random_tensor({2, 4, 8}, 7), kv = random_tensor({2, 2, 8}, 8);
  const Tensor sinks = random_tensor({4}, 9);
  auto attention_hash = [&](bool with_sinks) {
    graph::Builder g;
    g.output(g.attention(g.weight(q), g.weight(kv), g.weight(kv), {.layer = 0, .scale = 0.3f}, {},
                         with_sinks ? g.weight(sinks) : Value{}));
    return g.graph().hash();
  };
  EXPECT_NE(attention_hash(false), attention_hash(true));
}

// Llama 4's parameters enter the graph hash too: the route kind, experts that scale their
// inputs, an attention's chunk.
TEST(Experts, Llama4ParametersEnterTheGraphHash) {
  const Tensor x = random_tensor({3, 8}, 1), router = random_tensor({4, 8}, 2);
  const Tensor gate = random_tensor({5, 8}, 3), up = random_tensor({5, 8}, 4);
  const Tensor down = random_tensor({8, 5}, 5);
  auto experts_hash = [&](graph::Routing routing, bool scale_inputs) {
    graph::Builder g;
    graph::Value xv = g.weight(x);
    graph::Value r = g.route(g.linear(xv, g.weight(router)), {.routing = routing, .top_k = 1});
    std::vector<graph::Builder::Expert> ex(4, {g.weight(gate), g.weight(up), g.weight(down)});
    g.output(g.experts(xv, r, ex, graph::Activation::Silu, {}, scale_inputs));
    return g.graph().hash();
  };
  const uint64_t llama4 = experts_hash(graph::Routing::TopKSigmoid, true);
  EXPECT_EQ(llama4, experts_hash(graph::Routing::TopKSigmoid, true));
  EXPECT_NE(llama4, experts_hash(graph::Routing::TopKSigmoid, false));
  EXPECT_NE(llama4, experts_hash(graph::Routing::TopKSoftmax, true));

  const Tensor q = random_tensor({2, 4, 8}, 7), kv = random_tensor({2, 2, 8}, 8);
  auto attention_hash = [&](int64_t chunk) {
    graph::Builder g;
    g.output(g.attention(g.weight(q), g.weight(kv), g.weight(kv),
                         {.layer = 0, .scale = 0.3f, .chunk = chunk}));
    return g.graph().hash();
  };
  EXPECT_NE(attention_hash(0), attention_hash(4));
  EXPECT_NE(attention_hash(4), attention_hash(5));
}

// Llama4TextMoe: each token's weight multiplies the expert's input, not its output, so the
// output is the sum over its k experts of down(act(gate (w x)) * up (w x)): against that
// definition in double, and unlike the weighted outputs of the same route.
TEST(Experts, ScaledInputsMatchLlama4Definition) {
  const int64_t tokens = 6, dim = 9, inter = 5, experts = 4, k = 2;
  const Tensor x = random_tensor({tokens, dim}, 141), router = random_tensor({experts, dim}, 142);
  std::vector<std::array<Tensor, 3>> w;
  for (uint32_t e = 0; e < experts; ++e)
    w.push_back({random_tensor({inter, dim}, 150 + e), random_tensor({inter, dim}, 160 + e),
                 random_tensor({dim, inter}, 170 + e)});
  const optest::Build build = [&](graph::Builder& g) {
    graph::Value xv = g.weight(x);
    graph::Value r = g.route(g.linear(xv, g.weight(router)),
                             {.routing = graph::Routing::TopKSigmoid, .top_k = k});
    std::vector<graph::Builder::Expert> ex;
    for (const auto& e : w) ex.push_back({g.weight(e[0]), g.weight(e[1]), g.weight(e[2])});
    return std::vector{r, g.experts(xv, r, ex, graph::Activation::Silu, {}, true),
                       g.experts(xv, r, ex, graph::Activation::Silu)};
  };
  for (bool reference : {true, false}) {
    ThreadPool pool(reference ? 1 : 3);
    const optest::Outcome o =
        optest::run(cpu_backend(reference), pool, optest::Mode::Planned, build, optest::Step{});
    const float* route = o.values.at(0).data<float>();
    const float* out = o.values.at(1).data<float>();
    auto dot = [](const Tensor& m, int64_t row, const std::vector<double>& v) {
      double s = 0;
      for (size_t i = 0; i < v.size(); ++i)
        s += m.data<float>()[row * static_cast<int64_t>(v.size()) + static_cast<int64_t>(i)] * v[i];
      return s;
    };
    for (int64_t t = 0; t < tokens; ++t) {
      std::vector<double> want(static_cast<size_t>(dim), 0.0);
      for (int64_t j = 0; j < k; ++j) {
        const double weight = route[t * k + j];
        EXPECT_GT(weight, 0.0);
        EXPECT_LT(weight, 1.0);
        const auto& e = w[static_cast<size_t>(route[tokens * k + t * k + j])];
        std::vector<double> xt(static_cast<size_t>(dim));
        for (int64_t d = 0; d < dim; ++d)
          xt[static_cast<size_t>(d)] = weight * x.data<float>()[t * dim + d];
        std::vector<double> h(static_cast<size_t>(inter));
        for (int64_t i = 0; i < inter; ++i) {
          const double gate = dot(e[0], i, xt);
          h[static_cast<size_t>(i)] = gate / (1 + std::exp(-gate)) * dot(e[1], i, xt);
        }
        for (int64_t d = 0; d < dim; ++d) want[static_cast<size_t>(d)] += dot(e[2], d, h);
      }
      for (int64_t d = 0; d < dim; ++d)
        EXPECT_NEAR(out[t * dim + d], want[static_cast<size_t>(d)], 1e-5)
            << (reference ? "reference" : "fast") << " token " << t << " dim " << d;
    }
    EXPECT_GT(nmse(optest::floats(o.values.at(1)), optest::floats(o.values.at(2))), 1e-3)
        << "input scaling must show here";
  }
}

}  // namespace
}  // namespace lathe
