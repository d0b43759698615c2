"""Loss curves of training, side by side: an original project's own model and the MiniTF model of the same family, in
the same bare loop on the same batches (benchmarks/training_speed.py's), from the first step, over several seeds.

    python benchmarks/training_loss.py [--family gpt|encoder|seq2seq] [--char-gpt-source PATH]
        [--miniembed-source PATH] [--hkproj-source PATH] [--hkproj-norm NORM] [--seeds 3] [--steps 60]
        [--words 500] [--dropout P] [--cases NAME ...] [--json FILE] [--smoke]

Cases, each at training_speed.py's dims, batches, loss and optimizer, its model built after `torch.manual_seed(seed)`:
- `original`: the original's own model, from its own initialization (PyTorch's defaults in all three originals);
- `minitf, converted start`: that same initial model converted by `hf_minitf.conversion` (what `minitf convert`
  plans: the config and the weights). Both then start as the same function, so a difference between their curves
  comes from the training (forward, loss, backward, optimizer), not from the initialization;
- `minitf`: the MiniTF model from its own initialization, where `minitf train` starts (transformers' normal(0, 0.02)
  weights).

Where the MiniTF model draws its dropout masks in the original's order, the converted start's curve is the original's
up to float rounding, step by step; where it does not, the two are equal only in distribution (compare the seeds'
spread), and `--dropout 0` takes dropout out to compare them step by step. The figure printed: the largest relative
difference between the two losses of one step, same seed.

The data are training_speed.py's: the GPT's tokens follow a fixed random chain (each token is followed by one of 4,
so no model can score below ln 4 = 1.386); the pairs are random sentences and their word-for-word translations.
`--words` sets the pairs' vocabulary (default 500: small enough for 60 steps to learn from; the timing benchmark
uses the originals' sizes). Each (case, seed) runs in its own process, one after another.

hkproj's model file is its early version, whose norm divides by std * eps: its activations reach ~1e6, its losses
~1e6, and its attention scores ~1e12, beyond what float32 computes the same way twice, so even its first loss
depends on the order of the operations. `--hkproj-norm scalar_std_plus_eps` trains it as hkproj fixed it (dividing
by std + eps), converted with that norm.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from common import dated_results_path, machine, main_or_worker, write_json
from training_speed import EARLY_NORM, FAMILIES, FIXED_NORM, batch_shape, loop_steps, model_fields, source_dest

SCRIPT = str(Path(__file__).resolve())
CASES = {"original": "original", "minitf, converted start": "converted", "minitf": "minitf"}
CHECKPOINTS = (1, 5, 10, 20, 30, 40, 50, 60)  # the steps the printed table shows (those within --steps)
LAST = 10  # a curve's end: the mean of its last LAST steps


def worker(spec: dict) -> None:
    """Train the case's model for `spec["steps"]` steps on the loop's batches in order; print the losses as JSON."""
    data, step = loop_steps(spec)
    losses = [step(data[index % len(data)])[1].item() for index in range(spec["steps"])]
    print(json.dumps({"losses": losses}), flush=True)


def curve(spec: dict, name: str) -> list[float]:
    """One case's loss curve for one seed, from its own process."""
    answer = subprocess.run(
        [sys.executable, SCRIPT, "--worker"], input=json.dumps(spec) + "\n", stdout=subprocess.PIPE, text=True
    )
    if answer.returncode != 0:
        raise RuntimeError(f"{name}, seed {spec['seed']}, failed (see stderr above)")
    return json.loads(answer.stdout.strip().splitlines()[-1])["losses"]


def spread(values: list[float]) -> str:
    """The seeds' mean and range of one figure."""
    return f"{statistics.mean(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def largest_relative_difference(first: list[list[float]], second: list[list[float]]) -> tuple[float, int]:
    """The largest |a - b| / |a| between two cases' losses of the same step and seed, and its step (1-based)."""
    pairs = [
        (abs(a - b) / abs(a), index + 1)
        for one, two in zip(first, second)
        for index, (a, b) in enumerate(zip(one, two))
    ]
    return max(pairs)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--family", choices=FAMILIES, default="gpt", help="the family to train (default: gpt)")
    for name, family in FAMILIES.items():
        parser.add_argument(family.source_option, type=Path, help=f"{family.original}'s model file (--family {name})")
    parser.add_argument("--seeds", type=int, default=3, help="seeds per case (default 3)")
    parser.add_argument("--steps", type=int, default=None, help="optimizer steps per curve (default 60, smoke 3)")
    parser.add_argument("--words", type=int, default=500, help="the pairs' word vocabulary (default 500)")
    parser.add_argument("--dropout", type=float, default=None, help="every dropout's probability (default: the dims')")
    parser.add_argument(
        "--hkproj-norm",
        choices=(EARLY_NORM, FIXED_NORM),
        default=EARLY_NORM,
        help=f"hkproj's norm: its early version's (the model file's, default) or its fix ({FIXED_NORM})",
    )
    parser.add_argument(
        "--cases",
        nargs="+",
        choices=CASES,
        help="only these cases (default: all three, or `minitf` alone without the original's model file)",
    )
    parser.add_argument("--smoke", action="store_true", help="tiny dims: check that everything runs")
    parser.add_argument("--json", type=Path, default=None, help="also write the curves to this JSON file")
    args = parser.parse_args(argv)
    args.steps = args.steps or (3 if args.smoke else 60)
    family = FAMILIES[args.family]
    source = getattr(args, source_dest(family))
    names = args.cases or [name for name in CASES if source or CASES[name] == "minitf"]
    if source is None and any(CASES[name] != "minitf" for name in names):
        parser.error(f"the original's cases need {family.source_option}")
    fields = model_fields(args.family, args.smoke)
    if args.dropout is not None:
        fields.update(hidden_dropout=args.dropout, attention_dropout=args.dropout)
    common = dict(
        family=args.family,
        fields=fields,
        smoke=args.smoke,
        steps=args.steps,
        words=args.words,
        hkproj_norm=args.hkproj_norm,
    )
    curves = {
        name: [
            curve(dict(common, case=CASES[name], seed=seed, source=str(source) if source else None), name)
            for seed in range(args.seeds)
        ]
        for name in names
    }

    shape = batch_shape(dict(family=args.family, smoke=args.smoke))
    dropout = fields.get("hidden_dropout", 0.1)
    norm = f", hkproj's norm {args.hkproj_norm}" if args.family == "seq2seq" else ""
    print(f"{machine()}; {args.family}{norm}, {shape}, dropout {dropout}, {args.steps} steps, seeds 0-{args.seeds - 1}")
    print("loss, mean over the seeds (their range)")
    print(f"{'step':>12s}  " + "  ".join(f"{name:26s}" for name in names))
    rows = [(str(step), lambda losses, step=step: losses[step - 1]) for step in CHECKPOINTS if step <= args.steps]
    rows.append((f"last {min(LAST, args.steps)} mean", lambda losses: statistics.mean(losses[-LAST:])))
    for label, figure in rows:
        print(
            f"{label:>12s}  "
            + "  ".join(f"{spread([figure(losses) for losses in curves[name]]):26s}" for name in names)
        )
    result: dict = dict(machine=machine(), family=args.family, dropout=dropout, steps=args.steps, curves=curves)
    if args.family == "seq2seq":
        result["hkproj_norm"] = args.hkproj_norm
    if {"original", "minitf, converted start"} <= set(curves):
        difference, step = largest_relative_difference(curves["original"], curves["minitf, converted start"])
        result["largest_relative_difference"] = dict(value=difference, step=step)
        print(
            f"original vs minitf, converted start, same seed: largest relative difference {difference:.2e} (step {step})"
        )
    if args.json or not args.smoke:
        write_json(args.json or dated_results_path(f"training-loss-{args.family}"), result)
    return result


if __name__ == "__main__":
    main_or_worker(lambda: main(sys.argv[1:]), worker)
