"""Peak memory of `minitf convert frawdllm` on a FrawdLLM `base`-preset-sized checkpoint (random weights).

Writes, in a temporary folder, a training checkpoint as FrawdLLM saves it (model_state_dict with its mask
buffers, an Adam-sized optimizer state, the pickled ModelConfig) and the same weights as safetensors, then
converts each in a fresh process and reports that process's peak resident memory (VmHWM, reset after the
imports) above what it held after importing torch, transformers and hf_minitf, and how much of it was
anonymous memory rather than pages of the checkpoint file mapped in (sampled every 5 ms).

Usage: python benchmarks/conversion_memory.py [--preset base|small|tiny] [--no-optimizer]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import torch
from safetensors.torch import save_file

from hf_minitf.catalog import FRAWDLLM_PRESETS, FrawdLLMSize
from hf_minitf.conversion.frawdllm import DEFAULT_IDS, ModelConfigStandIn

# The FrawdLLM presets with learned positions, whose checkpoints this script writes.
PRESETS = {name: size for name, size in FRAWDLLM_PRESETS.items() if not size.rope}
# FrawdLLM's ModelConfig names of a catalog preset's fields (FrawdLLMSize's, in their order).
MODEL_CONFIG_NAMES = ("vocab_size", "n_embd", "n_layer", "n_head", "context_length", "use_rope", "dropout")

MEASURE = """
import json, sys, threading, time
def status_mb(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
import torch, transformers, hf_minitf
from hf_minitf.conversion.frawdllm import convert_frawdllm
with open("/proc/self/clear_refs", "w") as handle:  # reset the peak (VmHWM) to the current RSS
    handle.write("5")
baseline, baseline_anon = status_mb("VmRSS"), status_mb("RssAnon")
peak_anon, running = baseline_anon, True
def sample():  # anonymous memory (not file pages mapped from the checkpoint) sampled every 5 ms
    global peak_anon
    while running:
        peak_anon = max(peak_anon, status_mb("RssAnon"))
        time.sleep(0.005)
sampler = threading.Thread(target=sample)
sampler.start()
start = time.perf_counter()
checkpoint, tokenizer, out, heads = sys.argv[1:5]
convert_frawdllm(checkpoint, out, tokenizer=tokenizer, num_heads=int(heads))
peak = status_mb("VmHWM")
running = False
sampler.join()
print(json.dumps(dict(baseline_mb=baseline, peak_mb=peak, anon_mb=peak_anon - baseline_anon,
                      seconds=time.perf_counter() - start)))
"""


def frawdllm_config(preset: FrawdLLMSize) -> ModelConfigStandIn:
    """The ModelConfig FrawdLLM pickles into a training checkpoint, as an instance of the converter's stand-in for
    that class (registered under FrawdLLM's module name, so that torch.save pickles it as FrawdLLM does)."""
    for name in ("src", "src.model", "src.model.config"):
        sys.modules.setdefault(name, types.ModuleType(name))
    sys.modules["src.model.config"].ModelConfig = ModelConfigStandIn
    config = ModelConfigStandIn()
    vars(config).update(zip(MODEL_CONFIG_NAMES, preset))
    vars(config).update(use_rmsnorm=False, use_swiglu=False, **DEFAULT_IDS)
    return config


def make_checkpoints(folder: Path, preset: FrawdLLMSize, optimizer: bool) -> tuple[Path, Path, int]:
    """A FrawdLLM training checkpoint (.pt) and its bare state_dict (.safetensors); returns their weight bytes."""
    generator = torch.Generator().manual_seed(0)
    d, context = preset.hidden_size, preset.context_length

    def rand(*shape):
        return torch.randn(*shape, generator=generator) * 0.02

    state = {"embeddings.token_emb.weight": rand(preset.vocab_size, d), "embeddings.pos_emb.weight": rand(context, d)}
    for i in range(preset.num_layers):
        p = f"blocks.{i}."
        state.update(
            {
                p + "ln1.weight": torch.ones(d),
                p + "ln1.bias": torch.zeros(d),
                p + "attn.qkv_proj.weight": rand(3 * d, d),
                p + "attn.qkv_proj.bias": torch.zeros(3 * d),
                p + "attn.out_proj.weight": rand(d, d),
                p + "attn.out_proj.bias": torch.zeros(d),
                p + "attn.mask": torch.tril(torch.ones(context, context)).view(1, 1, context, context),
                p + "ln2.weight": torch.ones(d),
                p + "ln2.bias": torch.zeros(d),
                p + "mlp.fc1.weight": rand(4 * d, d),
                p + "mlp.fc1.bias": torch.zeros(4 * d),
                p + "mlp.fc2.weight": rand(d, 4 * d),
                p + "mlp.fc2.bias": torch.zeros(d),
            }
        )
    state["ln_f.weight"], state["ln_f.bias"] = torch.ones(d), torch.zeros(d)
    state["lm_head.weight"] = state["embeddings.token_emb.weight"]
    weight_bytes = sum(v.numel() * v.element_size() for k, v in state.items() if k != "lm_head.weight")

    params = {k: v for k, v in state.items() if not k.endswith("attn.mask") and k != "lm_head.weight"}
    optimizer_state = (
        {
            "state": {
                i: {"step": torch.tensor(1000.0), "exp_avg": torch.zeros_like(v), "exp_avg_sq": torch.zeros_like(v)}
                for i, v in enumerate(params.values())
            },
            "param_groups": [{"lr": 3e-4, "params": list(range(len(params)))}],
        }
        if optimizer
        else {}
    )
    pt = folder / "checkpoint.pt"
    torch.save(
        {
            "epoch": 3,
            "global_step": 1000,
            "model_state_dict": state,
            "optimizer_state_dict": optimizer_state,
            "scheduler_state_dict": {},
            "val_loss": 3.2,
            "config": frawdllm_config(preset),
        },
        pt,
    )
    st = folder / "model.safetensors"
    save_file({k: v.contiguous() for k, v in state.items() if k != "lm_head.weight"}, str(st))
    return pt, st, weight_bytes


def measure(checkpoint: Path, tokenizer: Path, out: Path, preset: FrawdLLMSize) -> dict:
    """Convert in a fresh process; its peak and anonymous memory above the imports, and the time taken."""
    result = subprocess.run(
        [sys.executable, "-c", MEASURE, str(checkpoint), str(tokenizer), str(out), str(preset.num_heads)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", choices=sorted(PRESETS), default="base")
    parser.add_argument(
        "--no-optimizer", action="store_true", help="save the training checkpoint without optimizer state"
    )
    args = parser.parse_args()
    preset = PRESETS[args.preset]
    from hf_minitf.tokenization.gpt import train_bpe_tokenizer

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        pt, st, weight_bytes = make_checkpoints(folder, preset, optimizer=not args.no_optimizer)
        tokenizer = train_bpe_tokenizer(["the quick brown fox jumps over the lazy dog"] * 20, vocab_size=300)
        tokenizer.backend_tokenizer.save(str(folder / "tokenizer.json"))
        print(
            f"preset {args.preset}: weights {weight_bytes / 2**20:.0f} MiB (fp32, incl. mask buffers); checkpoint.pt "
            f"{pt.stat().st_size / 2**20:.0f} MiB, model.safetensors {st.stat().st_size / 2**20:.0f} MiB"
        )
        for index, checkpoint in enumerate((pt, st)):
            numbers = measure(checkpoint, folder / "tokenizer.json", folder / f"out{index}", preset)
            print(
                f"{checkpoint.name:18s} peak RSS {numbers['peak_mb']:5.0f} MiB = {numbers['baseline_mb']:.0f} after "
                f"imports + {numbers['peak_mb'] - numbers['baseline_mb']:.0f} MiB for the conversion, of which "
                f"anonymous (not file-backed) at most {numbers['anon_mb']:.0f} MiB ({numbers['seconds']:.1f} s)"
            )


if __name__ == "__main__":
    main()
