// The graph IR: a model builds the computation of one step as a list of named nodes (op,
// inputs, output shape and dtype, parameters). Nodes are kept in the order they were built,
// which is a valid execution order. A graph refers to weights (zero-copy tensors) and to the
// step's inputs, but holds no activation data; backends execute it (graph/executor.h).
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "core/tensor.h"

namespace lathe::graph {

class Collectives;  // graph/collectives.h

// The rotary schedule a RopeTables node computes cos and sin from (models/rope.h implements
// it from config.json's rope parameters).
class RopeSchedule {
 public:
  virtual ~RopeSchedule() = default;
  virtual int64_t rot_dim() const = 0;
  // cos and sin [n, rot_dim / 2] of positions pos0 .. pos0 + n - 1 of one sequence, into
  // rows of `stride` floats. Schedules that depend on the sequence length (dynamic, longrope)
  // take it as pos0 + n, as transformers does.
  virtual void fill(int64_t pos0, int64_t n, float* cos, float* sin, int64_t stride) const = 0;
  // Every parameter of the schedule, for the graph hash.
  virtual uint64_t hash() const = 0;
};

// What a node computes. Every op's inputs, parameters and output are described beside it;
// the builder (graph/builder.h) checks them when the node is made.
enum class Op : uint8_t {
  Input,       // a step input bound at execution: tokens, positions, logit rows (I32)
  Weight,      // a constant tensor (a weight, mapped or converted once at load)
  Embedding,   // rows of weight [vocab, dim] at ids (+ offset) -> [n, dim] F32; an id
               // outside the table fails, or reads zeros or row 0 (EmbeddingAttrs)
  Linear,      // x [.., k] . w[n, k]^T (+ bias[n]) -> [.., n]
  RmsNorm,     // x / rms(x) * (weight + offset), over the last dimension
  LayerNorm,   // torch LayerNorm over the last dimension; weight, bias optional
  ActMul,      // act(gate) * up
  Activation,  // act(x)
  Add,         // a + b
  Scale,       // x * scale
  Divide,      // x / scale (GraniteForCausalLM divides its logits)
  Softcap,     // cap * tanh(x / cap)
  Clamp,       // clamp(x, -limit, limit); with upper_only, min(x, limit)
  Xielu,       // xIELU with formed coefficients
  Reshape,     // the same data under another shape (a view: no copy, no buffer of its own)
  RopeTables,  // cos and sin [2, n, rot/2] for the step's positions (per sequence)
  Rope,        // rotary embedding of x [n, heads, head_dim] with tables [2, n, rot/2]: the first
               // rot dims of each head (with tail, the last rot dims; with inverse, by -theta)
  Attention,   // appends k, v to the layer's cache at the step's positions; causal attention
               // (with value_dim and no v: the values are the keys' first value_dim dims;
               // with sinks [heads]: each head's learned logit joins its softmax's denominator;
               // with a chunk, within the query's chunk of positions only; with chosen
               // [n, top_k] I32 from an Indexer: over those key positions only; with a
               // compressor >= 0, also over that compressor's entries visible to the
               // query (Op::Compress), then `chosen` picks among the entries, not keys)
  Rows,        // rows of x [n, dim] at indices [r] -> [r, dim]
  Route,       // router logits [n, experts] (+ bias [experts]) -> [2, n, k]: each token's k
               // expert weights (plane 0) and expert ids (plane 1, exact integers in f32)
  Experts,     // x [n, dim], route [2, n, k], then kExpertInputs per expert (gate, up, down
               // weights and their optional biases) -> [n, dim]: sum over the token's k experts
               // of weight * down(glu(gate x, up x)), glu as ExpertsAttrs::glu says (with
               // scale_inputs: of down(glu(gate (weight x), up (weight x))))
  Concat,      // a [.., m], b [.., n] with equal leading dimensions -> [.., m + n]
  HeadLinear,  // x [n, heads, k] . w[heads, m, k]^T per head -> [n, heads, m] (MLA)
  Slice,       // columns [slice_start, slice_start + m) of x [.., cols] -> [.., m]
  CausalConv,  // x [n, ch], w [ch, kernel] (+ bias [ch]) -> [n, ch]: each sequence's depthwise
               // causal convolution, its last kernel - 1 inputs kept in the layer's state
  GatedDeltaRule,  // q, k [n, k_heads, k_dim], v [n, v_heads, v_dim], a, b [n, v_heads],
                   // A_log, dt_bias [v_heads] -> [n, v_heads, v_dim]: Gated DeltaNet's linear
                   // attention, its [v_heads, k_dim, v_dim] matrix kept in the layer's state
  Ssd,             // x [n, heads, head_dim], dt [n, heads], A_log, dt_bias [heads], B, C
                   // [n, groups, d_state], D [heads] -> [n, heads, head_dim]: Mamba2's selective
                   // state space recurrence, its [heads, d_state, head_dim] state kept in the
                   // layer's state
  RowStat,         // x [.., d] -> [.., 1]: each row's mean, standard deviation or RMS
  Binary,          // a op b (add, subtract, multiply, divide) with torch's broadcasting
  BatchMatmul,     // a [n, m, k] . b [n, k, d] -> [n, m, d]: one small matmul per token
  Indexer,    // q [n, heads, dim], k [n, dim], w [n, heads] -> [n, top_k] I32: appends k to the
              // layer's index-key cache; each query's top_k key positions by
              // sum_h w_h relu(scale q_h . k_j) over the keys it sees (DeepSeek sparse
              // attention's lightning indexer), ascending, then -1 where fewer are visible.
              // With a compressor >= 0 and no k: over that compressor's entries instead
              // (DeepseekV4's indexer), each visible as Op::Compress says
  AllReduce,  // x summed over the ranks of a sharded run (Node::comm), added in rank order so
              // every rank gets the same bits (after a row-parallel Linear)
  AllGather,  // x [.., m] -> [.., m * ranks]: every rank's x side by side along the last
              // dimension, in rank order (column-parallel logits, a cross-head norm's input)
  HyperMix,   // mixes [n, m], base [m], scale [3] (or [1]) -> [n, m]: DeepseekV4's
              // hyper-connection weights from their projections, for hc streams.
              // m = (2 + hc) hc: pre = sigmoid(mix s0 + b) + eps, post = 2 sigmoid(mix s1 + b),
              // then comb [hc, hc] = softmax(mix s2 + b) over each row + eps, normalised by
              // columns, then `iters` - 1 times by rows and columns (Sinkhorn), stored
              // transposed (out[j][i] = comb[i][j]) so that comb^T . streams is a plain
              // BatchMatmul. m = hc: pre only (the hyper head)
  Compress,  // kv, gate [n, c * dim], ape [rate, c * dim], norm [dim] -> [1] (unused): DeepseekV4's
             // compressor `compressor` of cache layer `layer`. Each window of `rate`
             // positions that closes in the step becomes one entry appended to the layer's
             // entries: per channel the softmax over the window's gate + ape of the kv,
             // summed, RMS-normed, then its last rot dims rotated (interleaved, by Node::rope)
             // at the window's first position. c = 2 (overlap): channels [dim, 2 dim) of the
             // window and [0, dim) of the window before it, 2 rate slots. The rows of the last
             // 2 rate positions wait in the cache. Entry w is visible to a query at p when
             // w < (p + 1) / rate
};
const char* op_name(Op op);

// The MLP activations transformers names in hidden_act (ACT2FN).
// Relu2: relu(x)^2; Sigmoid: Qwen2Moe's shared-expert gate.
enum class Activation : uint8_t { Silu, Gelu, GeluTanh, Relu, Relu2, Sigmoid };
// Which elements rotary embedding pairs: HalfSplit (i, i + rot/2) as Llama's rotate_half,
// Interleaved (2i, 2i + 1) as GLM's and Ernie's.
enum class RopeLayout : uint8_t { HalfSplit, Interleaved };
// A bias added to attention scores by key position j: None; Alibi: slope_h * j (Bloom);
// AlibiFalcon: bf16(bf16(slope_h) * bf16(j)) / sqrt(head_dim), the roundings Falcon's
// build_alibi_tensor makes (torch converts the int64 positions to bf16: 257 becomes 256).
enum class PositionBias : uint8_t { None, Alibi, AlibiFalcon };
// How a Route node turns router logits into k experts per token (transformers' routers):
//   SoftmaxTopK: softmax over the experts, the k largest (Mixtral, Qwen2Moe, Qwen3Moe, Olmoe);
//   TopKSoftmax: the k largest logits, softmax over those k (GraniteMoe);
//   Sigmoid:     sigmoid scores, chosen by score + bias within the best groups (each scored
//                by its two best), weighted by the scores without the bias (DeepseekV3,
//                Glm4Moe);
//   SoftmaxGreedy: softmax, the k largest within the best groups (each scored by its best;
//                groups 1: all), in torch.topk(sorted=False)'s order (DeepseekV2);
//   SoftmaxBiased: softmax, chosen by score + bias, weighted by the scores without it and
//                divided by max(their sum, eps) (Ernie4_5_Moe's moe_statics, moe_norm_min);
//   SigmoidTopK: sigmoid scores, the k largest of score + bias (bias may be absent) in
//                torch.topk(sorted=True)'s order, weighted by the scores (Lfm2MoeTopKRouter).
//   SparseMixer: PhiMoE's sparsemixer in eval mode, k = 2: the largest logit, weighted by
//                the softmax over the logits within 2 eps of it (relative to max(|logit|, it));
//                then the largest of the others, weighted likewise among them. Not renormalised.
//   TopKSigmoid: the k largest logits in torch.topk(sorted=True)'s order, each weighted by its
//                sigmoid (Llama4Router; its experts take the weight on their input, see
//                ExpertsAttrs::scale_inputs).
// Weights are then divided by their sum when `norm_topk` is set (adding eps to the sum) and
// multiplied by `scale` (routed_scaling_factor).
//   SqrtSoftplus: scores sqrt(softplus(logit)), the k largest of score + bias in
//                torch.topk's order, weighted by the scores (DeepseekV4TopKRouter); with ids
//                [n, k] given (DeepseekV4HashRouter's tid2eid rows), those experts instead.
enum class Routing : uint8_t {
  SoftmaxTopK,
  TopKSoftmax,
  Sigmoid,
  SoftmaxGreedy,
  SoftmaxBiased,
  SigmoidTopK,
  SparseMixer,
  TopKSigmoid,
  SqrtSoftplus
};
// How an Experts node joins each expert's gate and up projections (biases added) into the
// input of its down projection:
//   ActMul:        act(gate) * up, act as ExpertsAttrs::act (Mixtral, Qwen2Moe, ...);
//   ClampedSwiglu: g = min(gate, limit), u = clamp(up, -limit, limit), then
//                  (u + 1) * g * sigmoid(g * alpha) (GptOssExperts._apply_gate);
//   ClampedSilu:   silu(min(gate, limit)) * clamp(up, -limit, limit) (DeepseekV4Experts).
enum class ExpertGlu : uint8_t { ActMul, ClampedSwiglu, ClampedSilu };
// What an Embedding node reads for an id outside its table:
//   Fail:       an error naming the id;
//   Zeros:      a row of zeros (tables that split a vocabulary into ranges, each read by its
//               own ids: Gemma3nModel's vision embedder); ZerosBelow and ZerosPast: zeros on one
//               side, an error on the other (the last range, the first range);
//   FirstRow:   row 0 (Gemma3nTextModel.get_per_layer_inputs maps ids past its table to 0).
enum class IdRange : uint8_t { Fail, Zeros, ZerosBelow, ZerosPast, FirstRow };
// A RowStat node's statistic over each row of d values:
//   Mean: torch.mean; Std: torch.std(unbiased=False), the population deviation;
//   Rms:  sqrt(max(mean(x^2), eps)) (eps 0: the plain RMS; Gemma3n's magnitudes clamp at 1e-5).
enum class RowStat : uint8_t { Mean, Std, Rms };
// A Binary node's operation.
enum class BinaryOp : uint8_t { Add, Sub, Mul, Div };
// An Experts node's inputs per expert, after x and the route: gate, up, down, gate bias, up
// bias, down bias (a bias absent, or an ungated expert's gate, is an invalid input).
inline constexpr int kExpertInputs = 6;

// The step inputs an Input node can be bound to.
enum class InputSlot : int64_t { Tokens, Positions, LogitRows };

// Op attributes: each op its own record (as ONNX operators and XLA's HLO instructions have
// theirs). A record lists its fields once, in visit(): hashing and printing walk them there.
// Ops with no attributes (Weight, Add, Reshape, Rows, Concat, HeadLinear, BatchMatmul) hold
// NoAttrs.
struct NoAttrs {
  template <class V>
  void visit(V&&) const {}
};
struct InputAttrs {
  InputSlot slot = InputSlot::Tokens;
  template <class V>
  void visit(V&& v) const {
    v("slot", slot);
  }
};
struct EmbeddingAttrs {
  int64_t id_offset = 0;             // added to every id (OPT's learned positions)
  IdRange id_range = IdRange::Fail;  // what an id outside the table reads
  template <class V>
  void visit(V&& v) const {
    v("id_offset", id_offset);
    v("id_range", id_range);
  }
};
struct LinearAttrs {
  // Built with Quantize::Never (a router): a rank's graph never quantizes its weight. Not
  // hashed: the weight's own dtype says what runs.
  bool keep_dtype = false;
  template <class V>
  void visit(V&&) const {}
};
struct RmsNormAttrs {
  float eps = 0, offset = 0;  // x / rms(x) * (weight + offset)
  template <class V>
  void visit(V&& v) const {
    v("eps", eps);
    v("offset", offset);
  }
};
struct LayerNormAttrs {
  float eps = 0;
  template <class V>
  void visit(V&& v) const {
    v("eps", eps);
  }
};
struct ActAttrs {  // ActMul, Activation
  Activation act = Activation::Silu;
  template <class V>
  void visit(V&& v) const {
    v("act", act);
  }
};
struct ScaleAttrs {  // Scale: x * value; Divide: x / value
  float value = 0;
  template <class V>
  void visit(V&& v) const {
    v("value", value);
  }
};
struct SoftcapAttrs {
  float cap = 0;
  template <class V>
  void visit(V&& v) const {
    v("cap", cap);
  }
};
struct ClampAttrs {
  float limit = 0;
  bool upper_only = false;  // min(x, limit)
  template <class V>
  void visit(V&& v) const {
    v("limit", limit);
    v("upper_only", upper_only);
  }
};
struct XieluAttrs {
  float alpha_p = 0, alpha_n = 0, beta = 0, eps = 0;
  template <class V>
  void visit(V&& v) const {
    v("alpha_p", alpha_p);
    v("alpha_n", alpha_n);
    v("beta", beta);
    v("eps", eps);
  }
};
struct RopeTablesAttrs {
  const RopeSchedule* schedule = nullptr;  // hashed by its parameters
  template <class V>
  void visit(V&& v) const {
    v("schedule", schedule);
  }
};
struct RopeAttrs {
  RopeLayout layout = RopeLayout::HalfSplit;
  bool tail = false;     // rotate each head's last rot dims (DeepseekV4's [nope | rope])
  bool inverse = false;  // rotate by -theta (sin negated)
  template <class V>
  void visit(V&& v) const {
    v("layout", layout);
    v("tail", tail);
    v("inverse", inverse);
  }
};
struct AttentionAttrs {
  int64_t layer = -1;     // which cache layer
  int64_t window = 0;     // sliding window (0: none)
  int64_t value_dim = 0;  // > 0 when the values are the keys' first value_dim
  // Llama 4: chunked (> 0), a query at p sees only the keys of its chunk of positions, from
  // p - p % chunk (create_chunked_causal_mask).
  int64_t chunk = 0;
  float scale = 0, softcap = 0;
  PositionBias bias = PositionBias::None;
  // No k and v: reads cache layer `layer` and appends nothing (KV-shared layers).
  bool kv_read_only = false;
  int64_t compressor = -1;  // >= 0: that compressor's entries follow the keys (DeepseekV4)
  template <class V>
  void visit(V&& v) const {
    v("layer", layer);
    v("window", window);
    v("value_dim", value_dim);
    v("chunk", chunk);
    v("scale", scale);
    v("softcap", softcap);
    v("bias", bias);
    v("kv_read_only", kv_read_only);
    v("compressor", compressor);
  }
};
struct RouteAttrs {
  Routing routing = Routing::SoftmaxTopK;
  int64_t top_k = 0;  // experts per token
  bool norm_topk = false;
  float eps = 0;                       // added to the sum that norm_topk divides by
  float scale = 0;                     // routed scaling factor
  int64_t groups = 0, top_groups = 0;  // experts in `groups` groups, the best top_groups
  template <class V>
  void visit(V&& v) const {
    v("routing", routing);
    v("top_k", top_k);
    v("norm_topk", norm_topk);
    v("eps", eps);
    v("scale", scale);
    v("groups", groups);
    v("top_groups", top_groups);
  }
};
struct ExpertsAttrs {
  Activation act = Activation::Silu;
  int64_t top_k = 0;
  ExpertGlu glu = ExpertGlu::ActMul;
  float limit = 0, alpha = 0;  // ClampedSwiglu: the clamp and the sigmoid's gain
  // Each token's weight multiplies the expert's input instead of its output,
  // down(glu(gate (w x), up (w x))) (Llama4TextMoe's routed_in = hidden_states * router_scores).
  bool scale_inputs = false;
  template <class V>
  void visit(V&& v) const {
    v("act", act);
    v("top_k", top_k);
    v("glu", glu);
    v("limit", limit);
    v("alpha", alpha);
    v("scale_inputs", scale_inputs);
  }
};
struct SliceAttrs {
  int64_t start = 0;  // the first column
  template <class V>
  void visit(V&& v) const {
    v("start", start);
  }
};
struct StateAttrs {  // CausalConv, GatedDeltaRule: state tensor `slot` of cache layer `layer`
  int64_t layer = -1, slot = 0;
  template <class V>
  void visit(V&& v) const {
    v("layer", layer);
    v("slot", slot);
  }
};
struct SsdAttrs {
  int64_t layer = -1, slot = 0;
  float dt_min = 0, dt_max = 0;  // dt = softplus(dt + dt_bias) clamped to [dt_min, dt_max]
  template <class V>
  void visit(V&& v) const {
    v("layer", layer);
    v("slot", slot);
    v("dt_min", dt_min);
    v("dt_max", dt_max);
  }
};
struct RowStatAttrs {
  RowStat stat = RowStat::Mean;
  float eps = 0;  // Rms's floor of the mean square
  template <class V>
  void visit(V&& v) const {
    v("stat", stat);
    v("eps", eps);
  }
};
struct BinaryAttrs {
  BinaryOp op = BinaryOp::Add;
  template <class V>
  void visit(V&& v) const {
    v("op", op);
  }
};
struct IndexerAttrs {
  int64_t layer = -1, top_k = 0;  // keys per query
  float scale = 0;
  int64_t compressor = -1;
  template <class V>
  void visit(V&& v) const {
    v("layer", layer);
    v("top_k", top_k);
    v("scale", scale);
    v("compressor", compressor);
  }
};
struct CollectiveAttrs {        // AllReduce, AllGather
  Collectives* comm = nullptr;  // hashed by its number of ranks
  template <class V>
  void visit(V&& v) const {
    v("comm", comm);
  }
};
struct HyperMixAttrs {
  int64_t streams = 0, iters = 0;  // Sinkhorn iterations
  float eps = 0;
  template <class V>
  void visit(V&& v) const {
    v("streams", streams);
    v("iters", iters);
    v("eps", eps);
  }
};
struct CompressAttrs {
  int64_t layer = -1, compressor = 0;
  float eps = 0;  // the entries' RMSNorm
  RopeLayout layout = RopeLayout::Interleaved;
  const RopeSchedule* schedule = nullptr;  // the entries' rotary
  template <class V>
  void visit(V&& v) const {
    v("layer", layer);
    v("compressor", compressor);
    v("eps", eps);
    v("layout", layout);
    v("schedule", schedule);
  }
};

using Attrs =
    std::variant<NoAttrs, InputAttrs, EmbeddingAttrs, LinearAttrs, RmsNormAttrs, LayerNormAttrs,
                 ActAttrs, ScaleAttrs, SoftcapAttrs, ClampAttrs, XieluAttrs, RopeTablesAttrs,
                 RopeAttrs, AttentionAttrs, RouteAttrs, ExpertsAttrs, SliceAttrs, StateAttrs,
                 SsdAttrs, RowStatAttrs, BinaryAttrs, IndexerAttrs, CollectiveAttrs, HyperMixAttrs,
                 CompressAttrs>;

// Whether `attrs` holds the record `op` takes.
bool attrs_fit(Op op, const Attrs& attrs);

// A node's output, by index into Graph::nodes.
struct Value {
  int32_t id = -1;
  bool valid() const { return id >= 0; }
};

struct Node {
  Op op = Op::Input;
  std::string name = {};           // stable, as the transformers module tree names it; or ""
  std::vector<Value> inputs = {};  // in the op's argument order; an absent optional one is -1
  Shape shape = {};
  DType dtype = DType::F32;
  Attrs attrs = {};      // the record op takes (attrs_fit)
  Tensor constant = {};  // Weight: the tensor (a zero-copy view of the checkpoint)

  // The node's attributes as the record T; an internal error when it holds another.
  template <class T>
  const T& attr() const {
    if (const T* a = std::get_if<T>(&attrs)) return *a;
    bad_attrs();
  }
  template <class T>
  T& attr() {
    if (T* a = std::get_if<T>(&attrs)) return *a;
    bad_attrs();
  }

 private:
  [[noreturn]] void bad_attrs() const;
};

struct Graph {
  std::vector<Node> nodes;
  std::vector<Value> outputs;  // kept alive to the end of execution (logits)

  const Node& at(Value v) const { return nodes.at(static_cast<size_t>(v.id)); }
  // Structure, shapes, dtypes and op parameters; never weight values or node names' data
  // pointers. Equal graphs hash equally across runs and machines. Without `shapes` the
  // nodes' output shapes are left out (weights' shapes stay in): the graphs of one model's
  // steps of different token counts then hash equally (the compiled mode's buckets).
  uint64_t hash(bool shapes = true) const;
  // One line per node: "%12 = linear(%10, %11) [5, 64] F32 layer.0.q", for debugging.
  std::string dump() const;
};

}  // namespace lathe::graph
