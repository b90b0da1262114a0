"""Build the tiny Llama model that the real-vLLM tests and the demo serve (no hub needed).

Run it with the vLLM venv's python (it has ``transformers``, ``tokenizers`` and ``torch``;
``./dev`` does it on first use)::

    $FLEETWATCH_VLLM_PYTHON tools/build_tiny_llm.py --out DIR

It writes a Hugging Face model folder:

* a byte-level BPE tokenizer (vocabulary 4096, special tokens ``<unk> <s> </s> <pad>``)
  trained with ``tokenizers`` on ``tools/data/tokenizer-train.txt`` (CPython stdlib source,
  see ``tools/data/README.md``), saved as ``PreTrainedTokenizerFast`` with a simple chat
  template;
* ``LlamaConfig(vocab_size=4096, hidden_size=128, intermediate_size=256,
  num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
  max_position_embeddings=2048)`` with random weights from a fixed seed (about 1.4 M
  parameters, 5.6 MB in float32).

``--layers N`` builds the same model with N decoder layers (same tokenizer, same seed).
``./dev`` also builds a 24-layer one (``tiny-llama-24l``, about 5 M parameters): its
engine step (≈ 8 ms per decode step on one core, eager mode, 4× the 2-layer model's)
outweighs the API server's per-token work, so requests queue in the engine, as on a
GPU server, and not in the API server. The concurrency sweep runs on it (see
``fleetwatch.demo.vllm_sweep``).

The text the model writes is noise; scheduling, batching, KV cache, preemption and metrics
are vLLM's own. The output is deterministic: the same script and text give the same files
(``--check`` prints a digest of them).
"""

from __future__ import annotations

import argparse
import hashlib
import os
from pathlib import Path

HERE = Path(__file__).resolve().parent
TRAIN_TEXT = HERE / "data" / "tokenizer-train.txt"
VOCAB_SIZE = 4096
SPECIAL_TOKENS = ["<unk>", "<s>", "</s>", "<pad>"]
SEED = 20261201
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<s>{{ message['role'] }}: {{ message['content'] }}\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<s>assistant:{% endif %}"
)


def build_tokenizer(out: Path) -> None:
    """Train the byte-level BPE on `TRAIN_TEXT` and save it as ``PreTrainedTokenizerFast``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train([str(TRAIN_TEXT)], trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        model_max_length=2048,
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)


def build_model(out: Path, layers: int = 2) -> None:
    """Save a randomly initialised Llama of ``layers`` decoder layers (seed `SEED`) next to
    the tokenizer."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(SEED)
    config = LlamaConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=2048,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=3,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config)
    model.eval()
    model.save_pretrained(out, safe_serialization=True)


def digest(folder: Path) -> str:
    """SHA-256 over the folder's files (names and bytes), to check the build is deterministic."""
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        h.update(path.relative_to(folder).as_posix().encode() + b"\0")
        h.update(path.read_bytes())
    return h.hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="model folder to write")
    parser.add_argument("--layers", type=int, default=2, help="decoder layers (default 2)")
    parser.add_argument("--check", action="store_true", help="print a digest of the files")
    args = parser.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    args.out.mkdir(parents=True, exist_ok=True)
    build_tokenizer(args.out)
    if args.layers < 1:
        parser.error(f"--layers must be at least 1, not {args.layers}")
    build_model(args.out, args.layers)
    print(f"tiny Llama model ({args.layers} layers) and tokenizer written to {args.out}")
    if args.check:
        print(f"digest {digest(args.out)}")


if __name__ == "__main__":
    main()
