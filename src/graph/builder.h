// Building a graph: one method per op, each checking its inputs' shapes and dtypes once and
// inferring the output's, as the eager op front ends used to. Model files and the block
// library (models/blocks.h) call these; they never touch data.
//
// In eager mode (an Executor attached, graph/executor.h) each node is executed as soon as it
// is built, so a failing op stops the build where it happened: the debugging path.
#pragma once

#include <functional>
#include <string>

#include "graph/backend.h"
#include "graph/graph.h"
#include "graph/quantize.h"

namespace lathe::graph {

// Whether a Linear may take a quantized copy of its weight (when the builder has a quantizer).
// Routers never do: a rounded router logit changes which experts run, and llama.cpp's and
// transformers' quantizers keep them in full precision too.
enum class Quantize { Allowed, Never };

// How an Experts node joins gate and up (graph::ExpertGlu); limit and alpha for ClampedSwiglu.
struct ExpertGluParams {
  ExpertGlu kind = ExpertGlu::ActMul;
  float limit = 0, alpha = 0;
};

class Builder {
 public:
  // Called with each node right after it is added (eager execution), and with each node
  // when it is named (eager tracing); either may be empty.
  using OnNode = std::function<void(const Graph&, Value)>;
  explicit Builder(OnNode on_node = {}, OnNode on_name = {})
      : on_node_(std::move(on_node)), on_name_(std::move(on_name)) {}

  Graph& graph() { return g_; }
  // Linear and Experts weights are then replaced by the quantizer's copies (--quantize).
  void set_quantizer(WeightQuantizer* q) { quantizer_ = q; }
  WeightQuantizer* quantizer() const { return quantizer_; }
  // Each node is then checked against the backend's kernels as it is added
  // (Backend::supports), so an unsupported dtype fails where the model built it.
  void set_backend(const Backend* b) { backend_ = b; }
  // w, or a Weight node of its quantized copy when the quantizer takes it.
  Value quantized(Value w);
  const Node& node(Value v) const { return g_.at(v); }
  const Shape& shape(Value v) const { return g_.at(v).shape; }
  int64_t dim(Value v, int i) const;

  // Names a node (the name the lab compares with the reference's module tree); returns it.
  Value name(Value v, std::string name);
  // Marks v as a graph output (kept alive to the end).
  void output(Value v) { g_.outputs.push_back(v); }

  Value input(InputSlot slot, int64_t n);
  // A weight or other constant; undefined or empty tensors give an invalid Value, so optional
  // weights (biases) pass straight through.
  Value weight(const Tensor& t);

  // Rows of table at ids + id_offset; an id outside the table fails, or reads as `range` says.
  Value embedding(Value table, Value ids, int64_t id_offset = 0, IdRange range = IdRange::Fail);
  Value linear(Value x, Value w, Value bias = {}, Quantize quantize = Quantize::Allowed);
  // Weight holds n values, or g * n that successive rows cycle through (MambaRMSNormGated's
  // per-group norm over x [tokens, groups, group_size] with one weight [groups * group_size]).
  Value rms_norm(Value x, Value weight, float eps, float offset = 0);
  // Weight and bias (each may be invalid) hold n values, or g * n that successive rows cycle
  // through (per-head norms over x [tokens, heads, head_dim]).
  Value layer_norm(Value x, Value weight, Value bias, float eps);
  // act(gate) * up; gate has up's shape, or one value per row ([.., 1]: Qwen2Moe's
  // sigmoid(shared_expert_gate(x)) * shared_expert(x)).
  Value act_mul(Activation act, Value gate, Value up);
  Value activation(Activation act, Value x);
  Value add(Value a, Value b);
  Value scale(Value x, float s);
  Value divide(Value x, float divisor);
  Value softcap(Value x, float cap);
  // clamp(x, -limit, limit); upper_only: min(x, limit).
  Value clamp(Value x, float limit, bool upper_only = false);
  Value xielu(Value x, float alpha_p, float alpha_n, float beta, float eps);
  Value reshape(Value x, Shape shape);
  Value rope_tables(const RopeSchedule& rope, Value positions);
  // The first rot dims of each head rotated (tail: the last rot dims), by theta (inverse: by
  // -theta, undoing a rotation).
  Value rope(Value x, Value tables, RopeLayout layout, bool tail = false, bool inverse = false);
  struct AttentionParams {
    int64_t layer = 0;
    int64_t window = 0;  // 0: attend to every earlier position
    float scale = 0;
    float softcap = 0;  // 0: no capping
    PositionBias bias = PositionBias::None;
    // > 0: no v; the values are the first value_dim dims of each key, and the cache holds keys
    // only (MLA's latent: keys [latent | rotary key], values the latent).
    int64_t value_dim = 0;
    // No k and v: the keys and values are those cache layer `layer` holds, written by an
    // earlier node of the step, and nothing is appended (Gemma4's KV-shared layers). Values
    // are then head_dim wide.
    bool kv_read_only = false;
    // > 0: Llama 4's chunked attention, each query within its chunk of positions
    // (AttentionAttrs::chunk).
    int64_t chunk = 0;
    // >= 0: DeepseekV4. The keys (values in their first value_dim dims) are followed by the
    // entries of the layer's compressor `compressor` that the query sees (Op::Compress), in
    // the same softmax; `chosen` then picks among those entries (-1: none).
    int64_t compressor = -1;
  };
  // q and k [n, (kv_)heads, head_dim], v [n, kv_heads, v_dim] -> [n, heads, v_dim]. With a
  // position bias, `slopes` is a Weight of `heads` F32 values. `sinks` (may be invalid): `heads`
  // F32 logits, one per head, that join each row's softmax as one more key with no value
  // (GptOss's eager_attention_forward: the max and the sum run over the scores and the sink).
  // `chosen` (may be invalid): an Indexer's [n, top_k] key positions; each query then attends
  // to those keys only (DeepSeek sparse attention), with no window, chunk, bias, cap or sinks.
  Value attention(Value q, Value k, Value v, const AttentionParams& p, Value slopes = {},
                  Value sinks = {}, Value chosen = {});
  // DeepSeek sparse attention's indexer (Op::Indexer): q [n, heads, dim], k [n, dim], per-head
  // weights w [n, heads] -> each query's top_k key positions [n, top_k] I32, ascending, -1
  // past the visible ones. k is appended to cache layer `layer`'s index keys
  // (LayerStateSpec::index_dim); `scale` multiplies each head's dot product before its relu.
  // With compressor >= 0 and k invalid: scores the entries of that compressor of the layer
  // instead (DeepseekV4's indexer), each entry w visible to a query at p when
  // w < (p + 1) / rate.
  Value indexer(Value q, Value k, Value w, int64_t layer, int64_t top_k, float scale,
                int64_t compressor = -1);
  // DeepseekV4's hyper-connection weights (Op::HyperMix): mixes [n, (2 + streams) streams]
  // with base and scale [3] -> pre, post and the transposed Sinkhorn-normalised comb; or
  // mixes [n, streams] with scale [1] -> pre only (the hyper head).
  Value hyper_mix(Value mixes, Value base, Value scale, int64_t streams, int64_t iters, float eps);
  struct CompressParams {
    int64_t layer = 0, compressor = 0;
    float eps = 0;  // the entries' RMSNorm
    RopeLayout layout = RopeLayout::Interleaved;
  };
  // DeepseekV4's compressor (Op::Compress): kv and gate [n, width] (width dim, or 2 dim with
  // the overlapping windows), ape [rate, width], norm [dim]. Appends to the cache; ordered
  // before the attention and indexer that read its entries. The entries' last 2 * half dims
  // are rotated by `rope` at each window's first position.
  Value compress(Value kv, Value gate, Value ape, Value norm, const RopeSchedule& rope,
                 const CompressParams& p);
  Value rows(Value x, Value indices);
  Value concat(Value a, Value b);
  // x [n, heads, k] with w [heads, m, k] (F32 or BF16): each head's rows times its matrix.
  Value head_linear(Value x, Value w);
  // Columns [start, start + length) of the last dimension (a copy).
  Value slice(Value x, int64_t start, int64_t length);
  // x [.., d] -> [.., 1]: each row's statistic (graph::RowStat); `eps` floors Rms's mean square.
  Value row_stat(Value x, RowStat stat, float eps = 0);
  // a op b with torch's broadcasting: shapes aligned at their last dimension, each pair of
  // sizes equal or one of them 1 (a missing leading dimension counts as 1).
  Value binary(BinaryOp op, Value a, Value b);
  Value sub(Value a, Value b) { return binary(BinaryOp::Sub, a, b); }
  Value mul(Value a, Value b) { return binary(BinaryOp::Mul, a, b); }
  Value div(Value a, Value b) { return binary(BinaryOp::Div, a, b); }
  // a [n, m, k] . b [n, k, d] -> [n, m, d]: each token's own small matrices (torch.matmul of
  // batched matrices).
  Value batch_matmul(Value a, Value b);

  // Recurrent layers: each reads and updates state tensor `slot` of cache layer `layer`
  // (LayerStateSpec::recurrent), per sequence.
  struct StateRef {
    int64_t layer = 0, slot = 0;
  };
  // Depthwise causal convolution of x [n, ch] with w [ch, kernel] or [ch, 1, kernel] (as
  // nn.Conv1d(groups=ch) stores it) and optional bias [ch]; the state is [kernel - 1, ch].
  Value causal_conv(Value x, Value w, Value bias, StateRef state);
  // Gated DeltaNet's gated delta rule (Op::GatedDeltaRule) with q and k L2-normalised in the
  // kernel; the state is [v_heads, k_dim, v_dim].
  Value gated_delta_rule(Value q, Value k, Value v, Value a, Value b, Value a_log, Value dt_bias,
                         StateRef state);
  // Mamba2's selective state space recurrence (Op::Ssd): x [n, heads, head_dim], raw dt
  // [n, heads], A_log, dt_bias and D [heads], B and C [n, groups, d_state] shared by the
  // heads / groups heads of each group; dt = softplus(dt + dt_bias) clamped to
  // [dt_min, dt_max]. The state is [heads, d_state, head_dim]
  // (transposed from transformers' ssm_state, so the kernel runs along head_dim).
  Value ssd(Value x, Value dt, Value a_log, Value dt_bias, Value b, Value c, Value d, float dt_min,
            float dt_max, StateRef state);
  struct RouteParams {
    Routing routing = Routing::SoftmaxTopK;
    int64_t top_k = 0;
    bool norm_topk = false;
    float norm_eps = 0;  // added to the sum of the k weights before dividing by it
    float scale = 1;     // routed_scaling_factor
    int64_t groups = 1, top_groups = 1;
  };
  // logits [n, experts] -> [2, n, k] (Op::Route). `bias` [experts] (Sigmoid only, the
  // e_score_correction_bias) moves the choice, not the weights; may be invalid.
  // `expert_scale` [experts] (may be invalid): each chosen weight, once normalised and scaled,
  // times its expert's value (Gemma4TextRouter's per_expert_scale).
  // `ids` [n, k] (SqrtSoftplus only; may be invalid): the experts, as exact integers in f32
  // (DeepseekV4HashRouter's tid2eid rows), weighted by their scores.
  Value route(Value logits, const RouteParams& p, Value bias = {}, Value expert_scale = {},
              Value ids = {});
  // One expert's matrices, as Linear weights: gate and up [inter, dim], down [dim, inter]; gate
  // invalid for an ungated expert (down(act(up x))). Biases (each may be invalid) are F32
  // [inter], [inter], [dim], added after each product (GptOssExperts).
  struct Expert {
    Value gate, up, down;
    Value gate_bias = {}, up_bias = {}, down_bias = {};
  };
  // The mixture of experts (Op::Experts) of x [n, dim] with the route of route(): each token
  // runs only its k experts, whose outputs are summed in the route's order. `scale_inputs`:
  // the route's weights scale each expert's input, not its output (Llama4TextMoe).
  Value experts(Value x, Value route, const std::vector<Expert>& experts, Activation act,
                ExpertGluParams glu = {}, bool scale_inputs = false);

  // Sharded runs (src/shard/rank_graph.h). x summed over the ranks of `comm`, in rank order.
  Value all_reduce(Value x, Collectives& comm);
  // x [.., m] -> [.., m * comm.size()]: the ranks' x side by side along the last dimension.
  Value all_gather(Value x, Collectives& comm);
  // Appends a node made elsewhere (a rank's copy of another graph's node), its inputs already
  // nodes of this graph; named through name() so that tracing sees it.
  Value append(Node node);

 private:
  Value add_node(Node node);
  void expect(Value v, const char* op, const char* arg) const;
  void expect_f32(Value v, const char* op, const char* arg) const;
  void expect_same_shape(Value a, Value b, const char* op) const;
  Value unary(Op op, Value x, Attrs attrs);

  Graph g_;
  OnNode on_node_, on_name_;
  WeightQuantizer* quantizer_ = nullptr;
  const Backend* backend_ = nullptr;
};

}  // namespace lathe::graph
