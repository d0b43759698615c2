"""Time per optimizer step of GPT training, side by side: the nanoGPT-style char GPT's own model in a bare PyTorch
loop, the MiniTF GPT in the same loop, and `minitf train gpt` (transformers' Trainer), each in its own process.

    python benchmarks/training_speed.py --char-gpt-source PATH/TO/char_gpt/model.py [--rounds 5] [--steps 6]
        [--compile] [--bf16] [--json FILE] [--smoke]

Dims: nanoGPT's shakespeare-char run (the catalog preset "shakespeare-char": 6 layers of 384, 6 heads, context
256, dropout 0.2; 65 characters), batch 8 x 128 tokens, AdamW at 1e-3, fp32. Cases:
- `original loop`: the char GPT's own `GPT` module (`--char-gpt-source`, its model file; left out without it):
  `logits, loss = model(x, y)`, `loss.backward()`, `optimizer.step()`, `optimizer.zero_grad()`.
- `minitf loop`: `MiniTFGPTForCausalLM` of the same dims in the same loop (`model(input_ids=x, labels=x).loss`).
- `minitf train gpt`: the command's own code (`hf_minitf.cli.main`, in the worker's process) on a text of the same
  characters with `--preset shakespeare-char --batch-size 8 --block-size 128 --no-progress`, its steps timed
  by a Trainer callback from one step's end to the next (data loading, collation, logging and callbacks included).
- with `--before DIR` (the files of another commit, e.g. `git archive COMMIT hf_minitf | tar -x -C DIR`): that
  code's `minitf loop` and `minitf train gpt` beside this one's.
- with `--compile`: `minitf train gpt --compile` and `minitf loop` over `torch.compile(model)` beside them; with
  `--bf16`: `minitf train gpt --mixed-precision bf16`.

Each round runs `--steps` timed steps of every case in turn (after untimed warm-up steps in each process); the
figure of a case is the median step over all rounds. Ratios are to the original loop (else to the MiniTF loop).
The machine is shared: read the ratios and the spread (the steps' min-max and the rounds' medians' range).
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import importlib.util
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path

from common import (
    dated_results_path,
    interleaved_parser,
    machine,
    main_or_worker,
    parse_interleaved,
    serve,
    time_interleaved,
    write_json,
)

SCRIPT = str(Path(__file__).resolve())
TEXT = (
    "First Citizen: Before we proceed any further, hear me speak. All: Speak, speak. First Citizen: You are all "
    "resolved rather to die than to famish? All: Resolved. resolved. First Citizen: First, you know Caius Marcius is "
    "chief enemy to the people. All: We know't, we know't. Let us kill him, and we'll have corn at our own price.\n"
    "ABCDEFGHIJKLMNOPQRSTUVWXYZ abcdefghijklmnopqrstuvwxyz 0123456789 !$&',-.:;?\n"
)
BATCH, BLOCK, LEARNING_RATE, WARMUP_STEPS = 8, 128, 1e-3, 3


def model_fields(smoke: bool) -> dict:
    """The MiniTF config fields of the timed models: the shakespeare-char preset (or a tiny one), 65 characters."""
    from hf_minitf.catalog.presets import PRESETS

    fields = dict(PRESETS["gpt"]["shakespeare-char"].config, vocab_size=65)
    if smoke:
        fields.update(hidden_size=64, num_hidden_layers=2, num_attention_heads=2)
    return fields


def batches(vocab: int, block: int, count: int):
    """`count` random (inputs, targets) batches of BATCH windows of `block` tokens of a fixed random token stream, the
    targets one token on, as nanoGPT's get_batch draws them."""
    import torch

    generator = torch.Generator().manual_seed(0)
    stream = torch.randint(0, vocab, (100_000,), generator=generator)
    starts = torch.randint(0, len(stream) - block - 1, (count, BATCH), generator=generator)
    windows = [torch.stack([stream[start : start + block + 1] for start in row.tolist()]) for row in starts]
    return [(window[:, :-1].contiguous(), window[:, 1:].contiguous()) for window in windows]


def original_model(source: str, fields: dict):
    """The char GPT's own `GPT` of the MiniTF fields' dims (random weights)."""
    loader = importlib.machinery.SourceFileLoader("char_gpt_original", source)
    spec = importlib.util.spec_from_loader("char_gpt_original", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module.GPT(
        vocab_size=fields["vocab_size"],
        block_size=fields["max_position_embeddings"],
        n_embd=fields["hidden_size"],
        n_head=fields["num_attention_heads"],
        n_layer=fields["num_hidden_layers"],
        dropout=fields["hidden_dropout"],
    )


def bare_loop(spec: dict):
    """One run of `spec["steps"]` optimizer steps of a model in a bare loop; returns each step's seconds."""
    import torch

    from hf_minitf import MiniTFGPTConfig, MiniTFGPTForCausalLM

    torch.manual_seed(0)
    fields = spec["fields"]
    if spec["case"] == "original":
        model = original_model(spec["source"], fields)

        def loss_of(inputs, targets):
            return model(inputs, targets)[1]
    else:
        model = MiniTFGPTForCausalLM(MiniTFGPTConfig(**fields))
        forward = torch.compile(model) if spec.get("compile") else model

        def loss_of(inputs, targets):  # the model shifts the labels itself
            return forward(input_ids=inputs, labels=inputs).loss

    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE)
    data = batches(fields["vocab_size"], spec["block"], 64)
    position = 0

    def run() -> list[float]:
        nonlocal position
        seconds = []
        for _ in range(spec["steps"]):
            inputs, targets = data[position % len(data)]
            position += 1
            started = time.perf_counter()
            loss_of(inputs, targets).backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            seconds.append(time.perf_counter() - started)
        return seconds

    for _ in range(WARMUP_STEPS):  # untimed: allocator, compilation
        run()
    return run


class StepClock:
    """A TrainerCallback (built lazily: transformers is imported in the worker) noting when each step ends."""

    def __new__(cls):
        from transformers import TrainerCallback

        class Clock(TrainerCallback):
            def __init__(self) -> None:
                self.ends: list[float] = []

            def on_step_end(self, args, state, control, **kwargs):
                self.ends.append(time.perf_counter())

        return Clock()


def command_run(spec: dict):
    """One run: `minitf train gpt` for WARMUP_STEPS + `steps` steps; returns the timed steps' seconds (the
    Trainer's own loop from one step's end to the next)."""
    import hf_minitf.training.common as training_common
    from hf_minitf.cli import main as cli_main

    folder = Path(tempfile.mkdtemp(prefix="training-speed-"))
    corpus = folder / "text.txt"
    corpus.write_text(TEXT * (1 + 40 * BATCH * spec["block"] * (WARMUP_STEPS + spec["steps"]) // len(TEXT)))
    run_trainer = training_common.run_trainer
    clock: list = []

    def timed_run_trainer(trainer, *args, **kwargs):
        clock.append(StepClock())
        trainer.add_callback(clock[-1])
        return run_trainer(trainer, *args, **kwargs)

    training_common.run_trainer = timed_run_trainer
    preset = ["--preset", "shakespeare-char"] if not spec.get("smoke") else ["--preset", "tiny"]
    arguments = [
        "train",
        "gpt",
        "--data",
        str(corpus),
        "--out",
        str(folder / "model"),
        "--overwrite",
        *preset,
        "--batch-size",
        str(BATCH),
        "--block-size",
        str(spec["block"]),
        "--max-steps",
        str(WARMUP_STEPS + spec["steps"] + 1),
        "--learning-rate",
        str(LEARNING_RATE),
        "--eval-fraction",
        "0",
        "--no-progress",
        *spec.get("options", []),
    ]

    def run() -> list[float]:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as errors:
            status = cli_main(arguments)
        if status != 0:
            raise RuntimeError(f"minitf train gpt failed: {errors.getvalue()[-2000:]}")
        ends = clock[-1].ends[WARMUP_STEPS:]
        return [later - earlier for earlier, later in zip(ends, ends[1:])]

    return run


def worker(spec: dict) -> None:
    if spec.get("code"):  # another checkout of the package, imported instead of this one
        sys.path.insert(0, spec["code"])
    if spec.get("threads"):
        import torch

        torch.set_num_threads(spec["threads"])
    run = command_run(spec) if spec["case"] == "command" else bare_loop(spec)
    if spec.get("code"):
        import hf_minitf

        assert hf_minitf.__file__.startswith(spec["code"]), hf_minitf.__file__
    serve(run, spec["pause"])


def specs(args) -> dict[str, dict]:
    fields = model_fields(args.smoke)
    common = dict(
        fields=fields, block=16 if args.smoke else BLOCK, steps=args.steps, pause=args.pause, threads=args.threads
    )
    cases: dict[str, dict] = {}
    if args.char_gpt_source:
        cases["original loop"] = dict(common, case="original", source=str(args.char_gpt_source))
    cases["minitf loop"] = dict(common, case="minitf")
    cases["minitf train gpt"] = dict(common, case="command", smoke=args.smoke)
    if args.before:
        before = dict(common, code=str(args.before.resolve()))
        cases["minitf loop, before"] = dict(before, case="minitf")
        cases["minitf train gpt, before"] = dict(before, case="command", smoke=args.smoke)
    if args.compile:
        cases["minitf loop, torch.compile"] = dict(common, case="minitf", compile=True)
        cases["minitf train gpt --compile"] = dict(common, case="command", smoke=args.smoke, options=["--compile"])
    if args.bf16:
        cases["minitf train gpt --mixed-precision bf16"] = dict(
            common, case="command", smoke=args.smoke, options=["--mixed-precision", "bf16"]
        )
    return cases


def main(argv: list[str] | None = None) -> list[dict]:
    parser = interleaved_parser(__doc__.split("\n\n")[0], unit="case")
    parser.add_argument("--char-gpt-source", type=Path, help="the nanoGPT-style char GPT's model file (the anchor)")
    parser.add_argument("--steps", type=int, default=None, help="timed optimizer steps per case and round (6)")
    parser.add_argument("--compile", action="store_true", help="also time torch.compile'd training")
    parser.add_argument("--cases", nargs="+", help="time only these cases (by name; default: every one asked for)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads per process (default: torch's)")
    parser.add_argument(
        "--before", type=Path, help="another checkout of the package (an earlier commit's files): its cases beside"
    )
    parser.add_argument("--bf16", action="store_true", help="also time bf16 autocast training")
    args = parse_interleaved(parser, argv)
    args.steps = args.steps or (2 if args.smoke else 6)
    cases = {name: spec for name, spec in specs(args).items() if not args.cases or name in args.cases}
    timings = time_interleaved(SCRIPT, cases, args.rounds)
    reference = "original loop" if "original loop" in timings else "minitf loop"
    steps = {name: [step for result in timing.results for step in result] for name, timing in timings.items()}
    rounds = {name: [statistics.median(result) for result in timing.results] for name, timing in timings.items()}
    base = statistics.median(steps[reference])
    rows = [
        dict(
            case=name,
            ms_per_step=1000 * statistics.median(steps[name]),
            step_range_ms=[1000 * min(steps[name]), 1000 * max(steps[name])],
            round_medians_ms=[1000 * value for value in rounds[name]],
            ratio_to_reference=statistics.median(steps[name]) / base,
            reference=reference,
        )
        for name in timings
    ]
    print(f"{machine()}; batch {BATCH} x {BLOCK} tokens, {args.rounds} rounds of {args.steps} steps")
    for row in rows:
        rounds_range = f"{min(row['round_medians_ms']):.0f}-{max(row['round_medians_ms']):.0f}"
        print(
            f"{row['case']:42s} {row['ms_per_step']:8.1f} ms/step  round medians {rounds_range} ms  "
            f"{row['ratio_to_reference']:.3f}x {reference}"
        )
    if args.json or not args.smoke:
        write_json(args.json or dated_results_path("training-speed"), dict(machine=machine(), rows=rows))
    return rows


if __name__ == "__main__":
    main_or_worker(lambda: main(sys.argv[1:]), worker)
