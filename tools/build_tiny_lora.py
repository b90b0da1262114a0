"""Build rank-8 LoRA adapters for the tiny Llama (no hub, no ``peft`` needed).

Run it with the vLLM venv's python (it has ``torch`` and ``safetensors``)::

    $FLEETWATCH_VLLM_PYTHON tools/build_tiny_lora.py --model DIR --out ADAPTER_DIR [--seed N]

It writes a PEFT-format adapter folder that vLLM's ``--lora-modules name=ADAPTER_DIR``
loads: ``adapter_config.json`` (``peft_type: LORA``, ``r: 8``, ``lora_alpha: 16``,
``target_modules: [q_proj, v_proj]``) and ``adapter_model.safetensors`` with, for each
decoder layer ``i`` of the model's ``config.json``,
``base_model.model.model.layers.{i}.self_attn.{q,v}_proj.lora_{A,B}.weight``
(``lora_A``: rank × in-features, ``lora_B``: out-features × rank), random from a fixed seed
(PEFT initialises ``lora_B`` to zero; here both are random so that an adapter changes the
model's output). The text it makes the model write is noise, as the base model's is; what
matters is that vLLM schedules adapter requests as LoRA requests (``vllm:lora_requests_info``).
The output is deterministic for a model and a seed.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

RANK = 8
ALPHA = 16
TARGETS = ("q_proj", "v_proj")


def build(model: Path, out: Path, seed: int) -> None:
    """Write the adapter for ``model`` (a Llama folder with ``config.json``) into ``out``."""
    import torch
    from safetensors.torch import save_file

    config = json.loads((model / "config.json").read_text())
    hidden = int(config["hidden_size"])
    head_dim = int(config.get("head_dim") or hidden // int(config["num_attention_heads"]))
    kv_out = int(config["num_key_value_heads"]) * head_dim
    outs = {"q_proj": int(config["num_attention_heads"]) * head_dim, "v_proj": kv_out}
    gen = torch.Generator().manual_seed(seed)
    tensors: dict[str, torch.Tensor] = {}
    for layer in range(int(config["num_hidden_layers"])):
        for target in TARGETS:
            prefix = f"base_model.model.model.layers.{layer}.self_attn.{target}"
            tensors[f"{prefix}.lora_A.weight"] = (
                torch.randn(RANK, hidden, generator=gen) * 0.02).contiguous()
            tensors[f"{prefix}.lora_B.weight"] = (
                torch.randn(outs[target], RANK, generator=gen) * 0.02).contiguous()
    out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out / "adapter_model.safetensors"))
    adapter_config = {
        "peft_type": "LORA", "task_type": "CAUSAL_LM", "r": RANK, "lora_alpha": ALPHA,
        "lora_dropout": 0.0, "target_modules": list(TARGETS), "bias": "none",
        "fan_in_fan_out": False, "base_model_name_or_path": str(model),
        "modules_to_save": None, "use_rslora": False, "use_dora": False,
    }
    (out / "adapter_config.json").write_text(json.dumps(adapter_config, indent=2) + "\n")


def main() -> None:
    """Command line: ``--model``, ``--out``, ``--seed``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--model", type=Path, required=True, help="the tiny Llama folder")
    parser.add_argument("--out", type=Path, required=True, help="the adapter folder to write")
    parser.add_argument("--seed", type=int, default=0, help="random seed of the weights")
    args = parser.parse_args()
    build(args.model, args.out, args.seed)


if __name__ == "__main__":
    main()
