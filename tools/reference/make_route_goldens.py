#!/usr/bin/env python3
"""Writes tests/fixtures/moe/routes.json: what torch.topk and transformers' routers return for
logits full of ties, the reference for lathe's Route op (tests/backends/moe_test.cpp).

- topk: torch.topk(values, k, sorted) on CPU for vectors of few distinct values, so that the
  order among equal values (which torch leaves to its partial sort) is pinned down;
- routers: the router modules of transformers (MixtralTopKRouter, Qwen2MoeTopKRouter,
  GraniteMoeTopKRouter, DeepseekV2TopkRouter, DeepseekV3TopkRouter, Ernie4_5_MoeTopKRouter,
  Lfm2MoeTopKRouter, PhimoeTopKRouter in eval mode, Llama4Router, DeepseekV4TopKRouter)
  called on hidden states equal to the logits
  with an identity router weight, so their logits are exactly the given ones.

Usage: make_route_goldens.py [--out tests/fixtures/moe/routes.json]   (needs torch + transformers)
"""
import argparse
import json
import pathlib

import torch
import transformers
from transformers.models.deepseek_v2.modeling_deepseek_v2 import DeepseekV2TopkRouter
from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3TopkRouter
from transformers.models.deepseek_v4.modeling_deepseek_v4 import DeepseekV4TopKRouter
from transformers.models.ernie4_5_moe.modeling_ernie4_5_moe import Ernie4_5_MoeTopKRouter
from transformers.models.granitemoe.modeling_granitemoe import GraniteMoeTopKRouter
from transformers.models.lfm2_moe.modeling_lfm2_moe import Lfm2MoeTopKRouter
from transformers.models.llama4.modeling_llama4 import Llama4Router
from transformers.models.mixtral.modeling_mixtral import MixtralTopKRouter
from transformers.models.phimoe.modeling_phimoe import PhimoeTopKRouter
from transformers.models.qwen2_moe.modeling_qwen2_moe import Qwen2MoeTopKRouter

REPO = pathlib.Path(__file__).resolve().parent.parent.parent


def tie_values(gen: torch.Generator, shape, levels: int) -> torch.Tensor:
    """Values in {0, 0.25, ..., (levels - 1) / 4}: exact in f32, with many ties."""
    return torch.randint(0, levels, shape, generator=gen).float() / 4


def topk_cases(gen):
    cases = []
    for n, k, levels in [(8, 3, 2), (64, 5, 1), (64, 1, 3), (200, 3, 4), (60, 4, 3), (7, 7, 2),
                         (130, 2, 2), (16, 6, 3)]:
        for sorted_ in (True, False):
            v = tie_values(gen, (n,), levels)
            cases.append({"values": v.tolist(), "k": k, "sorted": sorted_,
                          "indices": torch.topk(v, k, sorted=sorted_).indices.tolist()})
    return cases


def identity_router(module, experts):
    with torch.no_grad():
        module.weight.copy_(torch.eye(experts))
    return module


def router_cases(gen):
    cases = []
    for experts, k, levels in [(8, 2, 3), (6, 3, 2), (60, 4, 4)]:
        logits = tie_values(gen, (5, experts), levels)
        mixtral = identity_router(MixtralTopKRouter(transformers.MixtralConfig(
            hidden_size=experts, num_local_experts=experts, num_experts_per_tok=k)), experts)
        for norm in (False, True):
            qwen = identity_router(Qwen2MoeTopKRouter(transformers.Qwen2MoeConfig(
                hidden_size=experts, num_experts=experts, num_experts_per_tok=k,
                norm_topk_prob=norm)), experts)
            cases.append(run("softmax_topk", qwen, logits, k, norm=norm))
        cases.append(run("softmax_topk", mixtral, logits, k, norm=True))
        granite = identity_router(GraniteMoeTopKRouter(transformers.GraniteMoeConfig(
            hidden_size=experts, num_local_experts=experts, num_experts_per_tok=k)), experts)
        cases.append(run("topk_softmax", granite, logits, k))
    for experts, k, groups, top_groups, scale, norm in [(16, 3, 4, 2, 2.5, True),
                                                        (8, 2, 1, 1, 1.0, False),
                                                        (12, 4, 3, 2, 1.5, True)]:
        logits = tie_values(gen, (5, experts), 3) - 0.25
        bias = tie_values(gen, (experts,), 2) - 0.125
        router = identity_router(DeepseekV3TopkRouter(transformers.DeepseekV3Config(
            hidden_size=experts, n_routed_experts=experts, num_experts_per_tok=k, n_group=groups,
            topk_group=top_groups, routed_scaling_factor=scale, norm_topk_prob=norm)), experts)
        with torch.no_grad():
            router.e_score_correction_bias.copy_(bias)
        case = run("sigmoid", router, logits, k, norm=norm, scale=scale, groups=groups,
                   top_groups=top_groups, norm_eps=1e-20)
        case["bias"] = bias.tolist()
        cases.append(case)
    for experts, k, method, groups, top_groups, scale in [(8, 2, "greedy", 1, 1, 1.0),
                                                          (16, 3, "group_limited_greedy", 4, 2, 2.0),
                                                          (12, 4, "group_limited_greedy", 3, 2, 1.0)]:
        logits = tie_values(gen, (5, experts), 3)
        router = identity_router(DeepseekV2TopkRouter(transformers.DeepseekV2Config(
            hidden_size=experts, num_attention_heads=1, num_key_value_heads=1,
            n_routed_experts=experts, num_experts_per_tok=k,
            topk_method=method, n_group=groups, topk_group=top_groups,
            routed_scaling_factor=scale)), experts)
        cases.append(run("softmax_greedy", router, logits, k, scale=scale, groups=groups,
                         top_groups=top_groups))
    for experts, k, norm_min in [(8, 3, 1e-12), (6, 2, 0.5)]:
        logits = tie_values(gen, (5, experts), 3)
        bias = tie_values(gen, (experts,), 2) / 8
        router = identity_router(Ernie4_5_MoeTopKRouter(transformers.Ernie4_5_MoeConfig(
            hidden_size=experts, num_attention_heads=1, num_key_value_heads=1,
            moe_num_experts=experts, moe_k=k, moe_norm_min=norm_min)), experts)
        with torch.no_grad():
            router.moe_statics.e_score_correction_bias.copy_(bias.view(1, -1))
        case = run("softmax_biased", router, logits, k, norm_eps=norm_min)
        case["bias"] = bias.tolist()
        cases.append(case)
    # Lfm2MoeTopKRouter takes the expert bias as an argument (its block holds the buffer).
    for experts, k, use_bias, norm, scale in [(8, 3, True, True, 1.5), (6, 4, False, True, 1.0),
                                              (12, 5, True, False, 2.0)]:
        logits = tie_values(gen, (5, experts), 3) - 0.25
        bias = tie_values(gen, (experts,), 2) - 0.125
        router = identity_router(Lfm2MoeTopKRouter(transformers.Lfm2MoeConfig(
            hidden_size=experts, num_experts=experts, num_experts_per_tok=k,
            use_expert_bias=use_bias, norm_topk_prob=norm, routed_scaling_factor=scale)), experts)
        case = run("sigmoid_topk", lambda x: router(x, bias if use_bias else None), logits, k,
                   norm=norm, scale=scale, norm_eps=1e-6)
        case["module"] = type(router).__name__
        if use_bias:
            case["bias"] = bias.tolist()
        cases.append(case)
    # PhimoeTopKRouter's sparsemixer (top 2, eval mode: no jitter sampling); jitter_eps sets
    # how far below each pick the softmax still reaches.
    for experts, jitter, levels in [(8, 0.01, 3), (6, 0.3, 4), (16, 0.05, 2), (5, 0.6, 5)]:
        logits = tie_values(gen, (5, experts), levels) - 0.5
        router = identity_router(PhimoeTopKRouter(transformers.PhimoeConfig(
            hidden_size=experts, num_local_experts=experts, num_experts_per_tok=2,
            router_jitter_noise=jitter)), experts).eval()
        case = run("sparse_mixer", router, logits, 2, norm_eps=jitter)
        cases.append(case)
    # Llama4Router returns every expert's score (the sigmoid of the top-k logits, 0 elsewhere)
    # and the logits: the choice is its own torch.topk of them, weighted by those scores.
    for experts, k, levels in [(8, 1, 3), (6, 2, 2), (16, 3, 4), (5, 1, 2)]:
        logits = tie_values(gen, (5, experts), levels) - 0.5
        router = identity_router(Llama4Router(transformers.Llama4TextConfig(
            hidden_size=experts, num_local_experts=experts, num_experts_per_tok=k)), experts)

        def llama4(x, router=router, k=k):
            scores, router_logits = router(x)
            ids = torch.topk(router_logits, k, dim=1).indices
            return router_logits, scores.gather(1, ids), ids

        case = run("topk_sigmoid", llama4, logits, k)
        case["module"] = type(router).__name__
        cases.append(case)
    # DeepseekV4TopKRouter: sqrt(softplus) scores, the top-k of score + e_score_correction_bias
    # (torch.topk sorted=False), weights renormalised (+ 1e-20) and scaled. Appended last, so
    # the cases above keep their random draws.
    for experts, k, levels, scale in [(8, 2, 3, 1.5), (6, 3, 2, 1.0), (16, 4, 4, 2.5)]:
        logits = tie_values(gen, (5, experts), levels) - 0.5
        bias = tie_values(gen, (experts,), 2) - 0.125
        router = identity_router(DeepseekV4TopKRouter(transformers.DeepseekV4Config(
            hidden_size=experts, n_routed_experts=experts, num_experts_per_tok=k,
            routed_scaling_factor=scale)), experts)
        with torch.no_grad():
            router.e_score_correction_bias.copy_(bias)
        case = run("sqrt_softplus", router, logits, k, norm=True, scale=scale, norm_eps=1e-20)
        case["bias"] = bias.tolist()
        cases.append(case)
    return cases


def run(routing, module, logits, k, norm=False, scale=1.0, groups=1, top_groups=1, norm_eps=0.0):
    with torch.no_grad():
        _, weights, ids = module(logits)
    return {"routing": routing, "module": type(module).__name__, "logits": logits.tolist(),
            "k": k, "norm_topk": norm, "norm_eps": norm_eps, "scale": scale, "groups": groups,
            "top_groups": top_groups, "ids": ids.tolist(), "weights": weights.float().tolist()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(REPO / "tests/fixtures/moe/routes.json"))
    args = ap.parse_args()
    gen = torch.Generator().manual_seed(7)
    out = {"made_by": {"transformers": transformers.__version__, "torch": torch.__version__},
           "topk": topk_cases(gen), "routers": router_cases(gen)}
    pathlib.Path(args.out).write_text(json.dumps(out, indent=None) + "\n")


if __name__ == "__main__":
    main()
