// The Route op's top-k and routers against what torch and transformers' router modules return
// for logits full of ties (tests/fixtures/moe/routes.json, made by
// tools/reference/make_route_goldens.py): which experts, in which order, with which weights.
#include <gtest/gtest.h>

#include <cmath>

#include "backends/cpu/moe.h"
#include "io/json.h"

namespace lathe {
namespace {

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
  throw std::runtime_error("routes.json: unknown routing " + name);
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
    graph::Params p;
    p.routing = routing(c.at("routing").get<std::string>());
    p.top_k = c.at("k").get<int64_t>();
    p.norm_topk = c.at("norm_topk").get<bool>();
    p.eps = c.at("norm_eps").get<float>();
    p.scale = c.at("scale").get<float>();
    p.groups = c.at("groups").get<int64_t>();
    p.top_groups = c.at("top_groups").get<int64_t>();
    std::vector<float> out(static_cast<size_t>(2 * tokens * p.top_k));
    cpu::route(flat.data(), bias.empty() ? nullptr : bias.data(), tokens, experts, p, out.data());
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
  EXPECT_GE(cases, 20);
}

}  // namespace
}  // namespace lathe
