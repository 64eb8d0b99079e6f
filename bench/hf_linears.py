#!/usr/bin/env python3
"""precc's linears against transformers', for every architecture in hf_arch.c's table.

Run by hand (docs/models.md quotes the result):

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install torch==2.13.0 transformers
    /tmp/venv/bin/python bench/hf_linears.py build/precc

For each config (the published ones under recipes/models/ and tests/lit/Inputs/, and one
per type written from nothing but its model_type, so every key is the config class's
default, plus bias and tie variants), transformers builds the model on the meta device and
every nn.Linear is listed with its name, in/out features and bias; `precc check --json`
lists precc's. Both lists must be equal, in order of names, with lm_head's tie flag.

transformers 5 stores a layer's experts as fused 3-D parameters (experts.gate_up_proj
[E, 2I, H], experts.down_proj [E, H, I]) and its routers as a bare weight [E, H]; they are
expanded here to the 4.x modules precc names (experts.N.gate_proj, .up_proj, .down_proj;
Mixtral's block_sparse_moe.experts.N.w1/w3/w2 and block_sparse_moe.gate). The vision tower
and the multimodal projector of a vision-language model are left out on both sides.

Also: for every model_type transformers knows that precc does not, precc's error must not
suggest another architecture ("did you mean").
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText
from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WRAPS = {"gemma3", "llava", "qwen2_5_vl", "llama4"}
TYPES = ["llama", "mistral", "qwen2", "qwen3", "phi3", "gemma", "gemma2", "gemma3_text",
         "olmo2", "granite", "mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3",
         "gpt_oss", "llama4_text", "granitemoe", "granitemoeshared", "phimoe", "olmoe",
         "gemma3", "llava", "qwen2_5_vl", "llama4"]
# Types whose experts precc names as transformers 5 stores them: one GEMM per fused 3-D
# parameter and expert (experts.N.gate_up_proj, experts.N.down_proj, with "param" and
# "param_shape" in precc's JSON), not the 4.x per-expert modules.
FUSED = {"gpt_oss", "llama4_text", "granitemoe", "granitemoeshared", "phimoe", "olmoe", "llama4"}
PUBLISHED = [
    "recipes/models/llama-3-8b.json", "recipes/models/phi-3-mini-4k.json",
    "recipes/models/gemma-2-2b.json", "recipes/models/gemma-3-4b.json",
    "recipes/models/mixtral-8x7b.json", "recipes/models/qwen1.5-moe-a2.7b.json",
    "recipes/models/qwen3-30b-a3b.json", "recipes/models/deepseek-v2-lite.json",
    "recipes/models/deepseek-v3.json",
    "tests/lit/Inputs/model_llama3_70b.json", "tests/lit/Inputs/model_mistral_7b.json",
    "tests/lit/Inputs/model_qwen2_7b.json", "tests/lit/Inputs/model_qwen3_0_6b.json",
    "tests/lit/Inputs/model_qwen3_8b.json", "tests/lit/Inputs/model_gemma3_12b.json",
    "tests/lit/Inputs/model_llava_1_5_7b.json", "tests/lit/Inputs/model_qwen2_5_vl_7b.json",
    "tests/lit/Inputs/model_olmo2_7b.json", "tests/lit/Inputs/model_granite_3_1_8b.json",
    "recipes/models/gpt-oss-20b.json", "recipes/models/llama-4-scout-17b-16e.json",
    "recipes/models/llama-4-maverick-17b-128e.json", "recipes/models/granite-3.1-3b-a800m.json",
    "tests/lit/Inputs/model_phimoe.json", "recipes/models/olmoe-1b-7b-0924.json",
]
# Differences known and left to another issue: label -> why.
KNOWN = {}
VISION = re.compile(r"(^|\.)(visual|vision_tower|vision_model|multi_modal_projector)\.")


def hf_linears(cfg_dict):
    """[(name, in, out, bias)], tied — as transformers builds the model."""
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg_dict, f)
        cfg = AutoConfig.from_pretrained(d)
    auto = AutoModelForImageTextToText if cfg.model_type in WRAPS else AutoModelForCausalLM
    with torch.device("meta"):
        model = auto.from_config(cfg)
    mods = dict(model.named_modules())
    fused = cfg.model_type in FUSED
    out = []
    for name, p in model.named_parameters(remove_duplicate=False):
        if VISION.search(name):
            continue
        mod, _, leaf = name.rpartition(".")
        m = mods[mod]
        if isinstance(m, torch.nn.Linear):
            if leaf == "weight":
                out.append((mod, m.in_features, m.out_features, m.bias is not None))
        elif p.dim() == 3 and leaf in ("gate_up_proj", "down_proj"):   # fused experts
            # [E, out, in], or [E, in, out] where the experts compute x @ W[e]: the
            # ones marked is_transposed (gpt-oss) and Llama4TextExperts (its bmm)
            tr = getattr(m, "is_transposed", False) or type(m).__name__ == "Llama4TextExperts"
            e, o, i = p.shape
            if tr:
                i, o = o, i
            bias = hasattr(m, leaf + "_bias")
            for n in range(e):
                if fused:
                    out.append((f"{mod}.{n}.{leaf}", i, o, bias, name, tuple(p.shape)))
                elif leaf == "gate_up_proj":
                    out.append((f"{mod}.{n}.gate_proj", i, o // 2, bias))
                    out.append((f"{mod}.{n}.up_proj", i, o // 2, bias))
                else:
                    out.append((f"{mod}.{n}.down_proj", i, o, bias))
        elif p.dim() == 2 and leaf == "weight" and re.search(r"\.(gate|router)$", mod):  # a router
            out.append((mod, p.shape[1], p.shape[0], getattr(m, "bias", None) is not None))
    emb = model.get_input_embeddings().weight
    tied = model.get_output_embeddings().weight is emb
    return out, tied


def precc_linears(precc, cfg_dict):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "config.json")
        with open(path, "w") as f:
            json.dump(cfg_dict, f)
        p = subprocess.run([precc, "check", os.path.join(ROOT, "recipes/bf16.lua"), "--model",
                            path, "--json"], capture_output=True, text=True)
    if p.returncode:
        return None, p.stderr.strip()
    out, tied = [], None
    for line in p.stdout.splitlines():
        if line.startswith('{"fqn"'):
            j = json.loads(line.rstrip(","))
            t = (j["fqn"], j["in_features"], j["out_features"], j["bias"])
            if "param" in j:
                t += (j["param"], tuple(j["param_shape"]))
            out.append(t)
            if j["fqn"].endswith("lm_head"):
                tied = j["tied"]
    return out, tied


def canon(name):
    """4.x module names, one spelling: Mixtral's w1/w3/w2 and block_sparse_moe."""
    name = name.replace("block_sparse_moe.", "mlp.")
    return re.sub(r"(experts\.\d+)\.w([123])$",
                  lambda m: m.group(1) + {"1": ".gate_proj", "2": ".down_proj",
                                          "3": ".up_proj"}[m.group(2)], name)


def compare(precc, label, cfg):
    try:
        theirs, ttied = hf_linears(cfg)
    except Exception as e:   # transformers refuses the config: nothing to compare
        print(f"SKIP {label}: transformers: {type(e).__name__}: {str(e)[:120]}")
        return None
    ours, otied = precc_linears(precc, cfg)
    if ours is None:
        print(f"FAIL {label}: precc: {otied}")
        return False
    a = sorted((canon(x[0]),) + tuple(x[1:]) for x in ours)
    b = sorted((canon(x[0]),) + tuple(x[1:]) for x in theirs)
    if a == b and otied == ttied:
        print(f"ok   {label}: {len(a)} linears, lm_head {ours[-1][1]}->{ours[-1][2]}"
              f"{' tied' if ttied else ''}")
        return True
    sa, sb = set(a), set(b)
    if label in KNOWN:
        print(f"known {label}: {KNOWN[label]}")
        return None
    print(f"FAIL {label}: precc {len(a)}, transformers {len(b)} linears; tied {otied} vs {ttied}")
    for x in sorted(sa - sb)[:5]:
        print("     precc only:       ", x)
    for x in sorted(sb - sa)[:5]:
        print("     transformers only:", x)
    return False


def variants(t):
    """One config per type from nothing but model_type, then bias and tie flips."""
    yield f"{t} (class defaults)", {"model_type": t}
    if t in WRAPS:
        yield f"{t} text_config {{}}", {"model_type": t, "text_config": {}}
        yield f"{t} tie false/true", {"model_type": t, "tie_word_embeddings": False,
                                      "text_config": {"tie_word_embeddings": True}}
        yield f"{t} tie true/false", {"model_type": t, "tie_word_embeddings": True,
                                      "text_config": {"tie_word_embeddings": False}}
        if t == "llava":
            yield "llava text mistral", {"model_type": t, "text_config": {"model_type": "mistral"}}
        return
    extra = {
        "llama4_text": [("interleave 2", {"interleave_moe_layer_step": 2}),
                        ("moe_layers [0, 3]", {"moe_layers": [0, 3]})],
        "granitemoeshared": [("shared 512", {"shared_intermediate_size": 512})],
        "phimoe": [("lm_head_bias", {"lm_head_bias": True})],
        "olmoe": [("num_local_experts 4", {"num_local_experts": 4})],
        "gpt_oss": [("num_experts 4", {"num_experts": 4})],
        "deepseek_v2": [("moe_layer_freq 2", {"moe_layer_freq": 2})],
    }
    for label, keys in extra.get(t, []):
        yield f"{t} {label}", dict({"model_type": t}, **keys)
    yield f"{t} attention_bias", {"model_type": t, "attention_bias": True}
    yield f"{t} mlp_bias", {"model_type": t, "mlp_bias": True}
    yield f"{t} tied", {"model_type": t, "tie_word_embeddings": not t.startswith("gemma")}


def small(cfg):
    """Fewer layers and experts, the same shapes (DeepSeek-V3's defaults make 45,091)."""
    c = json.loads(json.dumps(cfg))
    nested = c["model_type"] in WRAPS and (c["model_type"] != "qwen2_5_vl" or "text_config" in c)
    tgt = c.setdefault("text_config", {}) if nested else c
    tgt.setdefault("num_hidden_layers", 4)
    if c["model_type"] in ("deepseek_v2", "deepseek_v3"):
        tgt.setdefault("n_routed_experts", 8)
    if c["model_type"] in ("qwen2_moe", "qwen3_moe", "olmoe"):
        tgt.setdefault("num_experts", 8)
    if c["model_type"] in ("gpt_oss", "llama4", "llama4_text", "granitemoe", "granitemoeshared",
                           "phimoe"):
        tgt.setdefault("num_local_experts", 8)
    return c


def main():
    precc = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build/precc")
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    fails = 0
    for rel in PUBLISHED:
        with open(os.path.join(ROOT, rel)) as f:
            cfg = json.load(f)
        fails += compare(precc, rel, cfg) is False
    for t in TYPES:
        for label, cfg in variants(t):
            full = label.endswith("(class defaults)") and t not in ("deepseek_v3", "qwen2_5_vl")
            fails += compare(precc, label + ("" if full else ", 4 layers"),
                             cfg if full else small(cfg)) is False
    # did-you-mean: never another architecture
    known = set(TYPES)
    bad = 0
    for t in sorted(CONFIG_MAPPING_NAMES):
        if t in known:
            continue
        cfg = {"model_type": t}
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "config.json")
            with open(path, "w") as f:
                json.dump(cfg, f)
            p = subprocess.run([precc, "check", os.path.join(ROOT, "recipes/bf16.lua"),
                                "--model", path], capture_output=True, text=True)
        m = re.search(r"did you mean '([^']+)'", p.stderr)
        if m:
            print(f"FAIL model_type '{t}' (transformers' {CONFIG_MAPPING_NAMES[t]}): "
                  f"precc suggests '{m.group(1)}'")
            bad += 1
    n = len([t for t in CONFIG_MAPPING_NAMES if t not in known])
    print(f"{'ok  ' if not bad else 'FAIL'} did-you-mean: {bad} of {n} other transformers "
          f"model_types get a suggestion")
    fails += bad
    print("all equal" if not fails else f"{fails} failed")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
