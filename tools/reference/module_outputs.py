"""Outputs of transformers submodules inside each decoder layer, under lathe's node names.

transformers' output_hidden_states gives one tensor per layer; lathe names nodes inside
layers too. Forward hooks on each decoder layer's attention and MLP modules record their
outputs as `layer.N.attn_out` (the attention module's output: after o_proj / dense / c_proj)
and `layer.N.mlp_out` (the MLP module's output), so a comparison can say which part of a layer
first diverges. `ordered_states` interleaves them with the hidden states in execution order:

  embed, layer.0.attn_out, layer.0.mlp_out, layer.0.out, layer.1.attn_out, ..., final_norm

Architectures whose submodules compute something other than lathe's node of that name are
listed in SKIP: Bloom's attention and MLP modules add the residual themselves.
"""
import contextlib

ATTENTION = ("self_attn", "attn", "attention", "self_attention", "linear_attn", "mixer", "mamba")
MLP = ("mlp", "block_sparse_moe", "feed_forward")
SKIP = {"BloomForCausalLM"}


# Architectures whose hidden states leave out the embedding: Mamba2Model's are each layer's
# output (the last layer's too, not overwritten) and then the final norm's.
NO_EMBED_STATE = {"Mamba2ForCausalLM"}
# AltUp (Gemma3n): each hidden state is the stack of the residual streams [streams, batch, T,
# hidden], the first the embedding and its projections (lathe's `altup_in`), then each layer's
# output, the last not overwritten by the final norm (capture_outputs with
# tie_last_hidden_states=False). Compared as [T, streams * hidden] (each token's streams in
# turn), so the attention and MLP module outputs, of one stream's width, are left out.
ALTUP = {"Gemma3nForCausalLM", "Gemma3nForConditionalGeneration"}
# Hyper-connections (DeepseekV4): each layer's output is its residual streams [batch, T,
# streams, hidden], compared as [T, streams * hidden] (each token's streams in turn); the
# final norm's output, one stream wide, is left out (the logits cover it).
HYPER_CONNECTIONS = {"DeepseekV4ForCausalLM"}


def batch_row(h, architecture=None):
    """The first sequence of a hidden state: [T, hidden], or the streams of AltUp
    ([streams, batch, T, hidden]) or of hyper-connections ([batch, T, streams, hidden]) as
    [T, streams * hidden]."""
    if h.dim() == 4 and architecture in HYPER_CONNECTIONS:
        return h[0].reshape(h.shape[1], -1)
    if h.dim() == 4:
        return h[:, 0].permute(1, 0, 2).reshape(h.shape[2], -1)
    return h[0]


def state_names(architecture, states):
    """Names of transformers' output_hidden_states under lathe's node names, and the states to
    compare: embed, layer.N.out, ..., final_norm (transformers replaces the last layer's output
    with the final norm's). A last state narrower than the rest (OPT's project_out) is left out,
    and the final norm goes uncompared."""
    if architecture in ALTUP:
        return ["altup_in"] + [f"layer.{i}.out" for i in range(len(states) - 1)], states
    if states[-1].shape != states[0].shape:
        states = states[:-1]
        return ["embed"] + [f"layer.{i}.out" for i in range(len(states) - 1)], states
    if architecture in NO_EMBED_STATE:
        return [f"layer.{i}.out" for i in range(len(states) - 1)] + ["final_norm"], states
    return ["embed"] + [f"layer.{i}.out" for i in range(len(states) - 2)] + ["final_norm"], states


def decoder_layers(model):
    """The decoder layers (num_hidden_layers of them) that run on text alone: Mllama's
    cross-attention layers, which its text model skips without an image, are left out, so the
    others are numbered as lathe numbers them."""
    import torch

    n = model.config.get_text_config().num_hidden_layers  # a multimodal config nests it
    for _, module in model.named_modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) == n:
            return [l for l in module if type(l).__name__ != "MllamaCrossAttentionDecoderLayer"]
    return []


@contextlib.contextmanager
def record(model):
    """Within the block, forward passes append (name, [T, hidden] tensor) to the yielded list."""
    outputs = []
    handles = []
    arch = (model.config.architectures or [type(model).__name__])[0]
    if arch not in SKIP:
        for i, layer in enumerate(decoder_layers(model)):
            # NemotronH: a layer's one `mixer` is an MLP or MoE block on "mlp" / "moe" layers.
            mixes = getattr(layer, "block_type", None) not in ("mlp", "moe")
            for names, tag in ((ATTENTION, "attn_out" if mixes else "mlp_out"), (MLP, "mlp_out")):
                # The first that is set (a hybrid layer holds None for the mixer it lacks).
                child = next((c for c in (getattr(layer, n, None) for n in names) if c is not None),
                             None)
                if child is None:
                    continue

                def hook(_module, _inputs, out, name=f"layer.{i}.{tag}"):
                    t = out[0] if isinstance(out, tuple) else out
                    # [1, T, hidden], or [T, hidden] from blocks that flatten the batch
                    # (Llama4TextMoe).
                    t = t[0] if t.dim() == 3 else t
                    outputs.append((name, t.detach().float().clone()))

                handles.append(child.register_forward_hook(hook))
    try:
        yield outputs
    finally:
        for h in handles:
            h.remove()


@contextlib.contextmanager
def record_routes(model):
    """Within the block, forward passes append (name, ids [T, k], weights [T, k]) for each
    layer's mixture of experts: the arguments its experts module is called with (every
    transformers 5 experts module takes hidden_states, top_k_index, top_k_weights), under
    lathe's node name `layer.N.route`."""
    import torch

    routes = []
    handles = []
    for i, layer in enumerate(decoder_layers(model)):
        block = next((c for c in (getattr(layer, n, None) for n in MLP) if c is not None), None)
        experts = getattr(block, "experts", None) if block is not None else None
        if experts is None:  # Gemma4: the experts beside the MLP, on the layer itself
            experts = getattr(layer, "experts", None)
        if experts is None:  # NemotronH: a layer whose one mixer is the MoE block
            experts = getattr(getattr(layer, "mixer", None), "experts", None)
        if experts is None:
            continue
        if type(block).__name__ == "Llama4TextMoe":
            # Its experts take every token pre-scaled, not a route: the router's choice is
            # torch.topk of its logits (as Llama4Router takes it), weighted by its scores.
            def router_hook(_module, _args, out, name=f"layer.{i}.route", k=block.top_k):
                scores, logits = out
                ids = torch.topk(logits, k, dim=1).indices
                routes.append((name, ids.detach().to(torch.int32).clone(),
                               scores.gather(1, ids).detach().float().clone()))

            handles.append(block.router.register_forward_hook(router_hook))
            continue

        def hook(_module, args, name=f"layer.{i}.route"):
            ids, weights = args[1], args[2]
            routes.append((name, ids.detach().reshape(-1, ids.shape[-1]).to(torch.int32).clone(),
                           weights.detach().reshape(-1, weights.shape[-1]).float().clone()))

        handles.append(experts.register_forward_pre_hook(hook))
    try:
        yield routes
    finally:
        for h in handles:
            h.remove()


def ordered_states(state_names, states, module_outputs):
    """Hidden states (names and [T, hidden] tensors) with the module outputs of layer N placed
    before `layer.N.out` (the last layer's before `final_norm`); module outputs of another
    width than the hidden states are left out, and so are those of a last layer whose output
    is not among the states (OPT with project_out)."""
    width = states[0].shape if states else None
    by_layer = {}
    for name, t in module_outputs:
        if t.shape == width:
            by_layer.setdefault(name.split(".")[1], []).append((name, t))
    names, tensors = [], []

    def flush(layer):
        for n, m in by_layer.pop(layer, []):
            names.append(n)
            tensors.append(m)

    for name, t in zip(state_names, states):
        if name.startswith("layer.") and name.endswith(".out"):
            flush(name.split(".")[1])
        elif name == "final_norm":
            # transformers replaces the last layer's output with the final norm's: that
            # layer's module outputs come just before it.
            for layer in sorted(by_layer, key=int):
                flush(layer)
        names.append(name)
        tensors.append(t)
    return names, tensors
