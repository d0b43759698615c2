"""Bad input, one row each: numbers given to the command line and to the API it calls: finite and in range, refused before any work."""

from bad_inputs import (
    TRAIN_GPT,
    CommandFailed,
    bad,
    bad_input_tests,
    refused_arguments,
    saved_gpt,
)
from transformers import AutoConfig

from hf_minitf import (
    MiniTFGPTConfig,
    train_bpe_tokenizer,
    train_wordlevel_tokenizer,
)
from hf_minitf.training.quickstart import QuickstartSteps
from hf_minitf.training.trainers import TrainingError, TrainSettings, train_gpt

# (id, arguments, message): `minitf ARGUMENTS` is refused by its parser, before any work, with `message`.
# fmt: off
REFUSED_ARGUMENTS = [
    ("cli-learning-rate-inf", [*TRAIN_GPT, "--learning-rate", "inf"], r"exit 2: minitf train gpt: error: argument --learning-rate: must be a finite number > 0, got inf"),
    ("cli-learning-rate-nan", [*TRAIN_GPT, "--learning-rate", "nan"], r"argument --learning-rate: must be a finite number > 0, got nan"),
    ("cli-weight-decay-inf", [*TRAIN_GPT, "--weight-decay", "inf"], r"argument --weight-decay: must be a finite number >= 0, got inf"),
    ("cli-epochs-inf", [*TRAIN_GPT, "--epochs", "inf"], r"argument --epochs: must be a finite number > 0 and <= 1,000,000, got inf"),
    ("cli-epochs-1e300", [*TRAIN_GPT, "--epochs", "1e300"], r"argument --epochs: must be a finite number > 0 and <= 1,000,000, got 1e300"),
    ("cli-warmup-inf", [*TRAIN_GPT, "--warmup", "inf"], r"argument --warmup: must be a finite number >= 0 and <= 1,000,000,000, got inf"),
    ("cli-max-steps-2-63", [*TRAIN_GPT, "--max-steps", 2**63], r"argument --max-steps: must be >= 1 and <= 1,000,000,000, got 9223372036854775808"),
    ("cli-batch-size-1e30", [*TRAIN_GPT, "--batch-size", 10**30], r"argument --batch-size: must be >= 1 and <= 1,000,000,000"),
    ("cli-vocab-size-1e12", [*TRAIN_GPT, "--vocab-size", 10**12], r"argument --vocab-size: must be >= 1 and <= 1,000,000, got 1000000000000"),
    ("cli-seed-2-70", [*TRAIN_GPT, "--seed", 2**70], r"argument --seed: must be >= 0 and < 4,294,967,296, got 1180591620717411303424"),
    ("cli-seed-negative", ["generate", "model", "hi", "--seed", -1], r"exit 2: minitf generate: error: argument --seed: must be >= 0 and < 4,294,967,296, got -1"),
    ("cli-steps-scale-inf", ["quickstart", "--steps-scale", "inf"], r"argument --steps-scale: must be a finite number > 0 and <= 1,000, got inf"),
    ("cli-temperature-1e-300", ["generate", "model", "hi", "--sample", "--temperature", "1e-300"], r"argument --temperature: must be a finite number >= 0.0001, got 1e-300 \(a lower temperature is greedy"),
    ("cli-max-new-tokens-1e12", ["generate", "model", "hi", "--max-new-tokens", 10**12], r"argument --max-new-tokens: must be >= 1 and <= 1,000,000, got 1000000000000"),
    ("cli-num-beams-1e9", ["translate", "model", "hi", "--num-beams", 10**9], r"argument --num-beams: must be >= 1 and <= 1,000, got 1000000000"),
    ("cli-port-past-65535", ["serve", "model", "--port", 70000], r"argument --port: must be >= 1 and <= 65,535, got 70000"),
    ("cli-convert-max-length-1e30", ["convert", "miniembed", "model.safetensors", "--tokenizer", "t.json", "--out", "o", "--max-length", 10**30], r"argument --max-length: must be >= 1 and <= 1,000,000,000"),
]

# (what, fields, message): TrainSettings(**fields) is a TrainingError matching `message`.
REFUSED_SETTINGS = [
    ("learning-rate-inf", dict(learning_rate=float("inf")), r"learning_rate must be a finite number > 0, got inf"),
    ("epochs-inf", dict(epochs=float("inf")), r"epochs must be a finite number in \(0, 1000000\], got inf"),
    ("warmup-nan", dict(warmup=float("nan")), r"warmup must be a finite number in \[0, 1000000000\], got nan"),
    ("warmup-past-max-steps", dict(max_steps=10, warmup=1e300), r"warmup must be a finite number in \[0, 1000000000\], got 1e\+300"),
    ("warmup-more-than-steps", dict(max_steps=10, warmup=20), r"warmup=20 steps is more than max_steps=10"),
    ("seed-2-70", dict(seed=2**70), r"seed must be an integer in \[0, 4294967295\], got 1180591620717411303424"),
    ("float-batch-size", dict(batch_size=8.5), r"batch_size must be an integer in \[1, 1000000000\], got 8.5"),
]
# fmt: on

BAD_INPUTS = [
    *(
        bad(name, lambda tmp, argv=argv: refused_arguments(*argv), CommandFailed, message)
        for name, argv, message in REFUSED_ARGUMENTS
    ),
    *(
        bad(f"api-{what}", lambda tmp, fields=fields: TrainSettings(**fields), TrainingError, message)
        for what, fields, message in REFUSED_SETTINGS
    ),
    bad(
        "api-warmup-past-the-epochs",
        lambda tmp: train_gpt(
            "abcd " * 40,
            tmp / "out",
            settings=TrainSettings(warmup=500, batch_size=4, progress=False),
            config_overrides=dict(
                max_position_embeddings=16, hidden_size=16, num_hidden_layers=1, num_attention_heads=2
            ),
        ),
        TrainingError,
        r"warmup=500 steps is more than this run's \d+ steps \(1 epochs of \d+ batches\)",
    ),
    bad(
        "api-steps-scale-inf",
        lambda tmp: QuickstartSteps().scaled(float("inf")),
        ValueError,
        r"step scale \(--steps-scale\) must be a finite number in \(0, 1000\], got inf",
    ),
    bad(
        "api-bpe-vocab-1e9",
        lambda tmp: train_bpe_tokenizer(["abc"], vocab_size=10**9),
        ValueError,
        r"vocab_size=1000000000 is more than the 1,000,000 tokens",
    ),
    bad(
        "api-wordlevel-vocab-1e30",
        lambda tmp: train_wordlevel_tokenizer(["a b"], vocab_size=10**30),
        ValueError,
        r"vocab_size=10+ is more than the 1,000,000 tokens",
    ),
    bad(
        "gpt-assignment-after-construction",
        lambda tmp: setattr(MiniTFGPTConfig(), "hidden_dropout", 3),
        ValueError,
        r"hidden_dropout must be a finite number in \[0.0, 1.0\), got 3",
    ),
    bad(
        "gpt-from-pretrained-kwarg",
        lambda tmp: AutoConfig.from_pretrained(saved_gpt(tmp), num_attention_heads=0),
        ValueError,
        r"num_attention_heads must be a positive integer, got 0",
    ),
]
test_bad_input_is_refused_naming_the_problem, test_ids_are_unique = bad_input_tests(BAD_INPUTS)
