// The op bench's cases of DeepSeek sparse attention (op_cases.h): the Indexer alone (its
// chosen keys, exact on every backend) and Attention over an indexer's chosen keys.
#include <algorithm>
#include <cmath>

#include "backends/op_cases.h"

namespace lathe::optest {

using graph::Builder;
using graph::Op;
using graph::Value;

namespace {

struct DsaCase {
  const char* what;
  int64_t heads, dim, top_k;
  struct Seq {
    int64_t count, pos0, max_seq;
  };
  std::vector<Seq> seqs;
  // Attention over the chosen keys (0 heads: the indexer's output alone is compared).
  int64_t attn_heads = 0, kv_heads = 1, head_dim = 0, values_in_keys = 0;
  DType kv = DType::F32;
};

Case dsa_case(const DsaCase& c) {
  std::vector<graph::Segment> segments;
  int64_t rows = 0, max_count = 0;
  for (size_t i = 0; i < c.seqs.size(); ++i) {
    segments.push_back({.seq = static_cast<int64_t>(i),
                        .first = rows,
                        .count = c.seqs[i].count,
                        .pos0 = c.seqs[i].pos0});
    rows += c.seqs[i].count;
    max_count = std::max(max_count, c.seqs[i].count);
  }
  Step step = segment_step(segments);
  const uint32_t seed = next_seed() * 1000;
  step.caches = [c, seed, max_count] {
    // Layer 1 keeps index keys beside its KV (a latent with its values inside, or k and v).
    const LayerStateSpec spec{.kind = StateKind::FullKV,
                              .kv_heads = c.kv_heads,
                              .head_dim = c.head_dim > 0 ? c.head_dim : 8,
                              .window = 0,
                              .recurrent = {},
                              .v_head_dim = c.values_in_keys > 0 ? 0 : -1,
                              .index_dim = c.dim};
    std::vector<KVCache> caches;
    for (size_t i = 0; i < c.seqs.size(); ++i)
      caches.push_back(prefilled_cache({spec, spec}, c.seqs[i].max_seq, max_count, c.seqs[i].pos0,
                                       seed + static_cast<uint32_t>(i), c.kv));
    return caches;
  };
  const Tensor iq = random_tensor({rows, c.heads, c.dim}, next_seed());
  const Tensor ik = random_tensor({rows, c.dim}, next_seed());
  const Tensor iw = random_tensor({rows, c.heads}, next_seed());
  const float iscale = 1.0f / std::sqrt(static_cast<float>(c.dim));
  const std::string shape = label({rows, c.heads, c.dim}) + "_top" + std::to_string(c.top_k);
  if (c.attn_heads == 0)
    return {std::string("indexer_") + c.what + "_" + shape, Op::Indexer, DType::F32,
            [=](Builder& g) {
              return std::vector{
                  g.indexer(g.weight(iq), g.weight(ik), g.weight(iw), 1, c.top_k, iscale)};
            },
            std::move(step)};
  const Tensor q = random_tensor({rows, c.attn_heads, c.head_dim}, next_seed());
  const Tensor k = random_tensor({rows, c.kv_heads, c.head_dim}, next_seed());
  const Tensor v =
      c.values_in_keys > 0 ? Tensor() : random_tensor({rows, c.kv_heads, c.head_dim}, next_seed());
  const Builder::AttentionParams p{.layer = 1,
                                   .scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim)),
                                   .value_dim = c.values_in_keys};
  return {
      std::string(c.kv == DType::BF16 ? "attention_bf16kv_chosen_" : "attention_chosen_") + c.what +
          "_" + shape,
      Op::Attention, c.kv,
      [=](Builder& g) {
        const Value chosen =
            g.indexer(g.weight(iq), g.weight(ik), g.weight(iw), 1, c.top_k, iscale);
        return std::vector{g.attention(g.weight(q), g.weight(k), g.weight(v), p, {}, {}, chosen)};
      },
      std::move(step)};
}

}  // namespace

void dsa_cases(std::vector<Case>& out) {
  using S = DsaCase::Seq;
  const DsaCase cases[] = {
      {.what = "prefill", .heads = 3, .dim = 11, .top_k = 7, .seqs = {S{24, 0, 32}}},
      {.what = "decode", .heads = 4, .dim = 16, .top_k = 9, .seqs = {S{1, 30, 40}}},
      {.what = "two_seqs", .heads = 2, .dim = 8, .top_k = 6, .seqs = {S{5, 12, 20}, S{1, 3, 8}}},
      // k * 64 <= keys: torch.topk's partial_sort path.
      {.what = "partial_sort", .heads = 4, .dim = 12, .top_k = 2, .seqs = {S{3, 200, 210}}},
      {.what = "all_kept", .heads = 2, .dim = 6, .top_k = 64, .seqs = {S{9, 0, 16}}},
      {.what = "mla_prefill",
       .heads = 3,
       .dim = 10,
       .top_k = 5,
       .seqs = {S{13, 0, 16}},
       .attn_heads = 4,
       .kv_heads = 1,
       .head_dim = 24,
       .values_in_keys = 16},
      {.what = "mla_decode_two_seqs",
       .heads = 2,
       .dim = 8,
       .top_k = 21,
       .seqs = {S{1, 40, 48}, S{4, 7, 16}},
       .attn_heads = 4,
       .kv_heads = 1,
       .head_dim = 40,
       .values_in_keys = 33},
      {.what = "gqa_prefilled",
       .heads = 2,
       .dim = 8,
       .top_k = 11,
       .seqs = {S{6, 30, 40}},
       .attn_heads = 6,
       .kv_heads = 2,
       .head_dim = 20},
      {.what = "all_kept",
       .heads = 2,
       .dim = 8,
       .top_k = 64,
       .seqs = {S{7, 3, 16}},
       .attn_heads = 4,
       .kv_heads = 1,
       .head_dim = 16,
       .values_in_keys = 12},
  };
  for (const DsaCase& c : cases) out.push_back(dsa_case(c));
  DsaCase bf16 = cases[6];
  bf16.kv = DType::BF16;
  out.push_back(dsa_case(bf16));
}

}  // namespace lathe::optest
