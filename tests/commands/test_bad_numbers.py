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
    MiniTFEncoderConfig,
    MiniTFGPTConfig,
    MiniTFSeq2SeqConfig,
    train_bpe_tokenizer,
    train_wordlevel_tokenizer,
)
from hf_minitf.training.quickstart import QuickstartSteps
from hf_minitf.training.trainers import TrainingError, TrainSettings, train_gpt

BAD_INPUTS = [
    # Numbers given to the command line and to the API it calls: finite and in range, refused before any work.
    bad(
        "cli-learning-rate-inf",
        lambda tmp: refused_arguments(*TRAIN_GPT, "--learning-rate", "inf"),
        CommandFailed,
        r"exit 2: minitf train gpt: error: argument --learning-rate: must be a finite number > 0, got inf",
    ),
    bad(
        "cli-learning-rate-nan",
        lambda tmp: refused_arguments(*TRAIN_GPT, "--learning-rate", "nan"),
        CommandFailed,
        r"argument --learning-rate: must be a finite number > 0, got nan",
    ),
    bad(
        "cli-weight-decay-inf",
        lambda tmp: refused_arguments(*TRAIN_GPT, "--weight-decay", "inf"),
        CommandFailed,
        r"argument --weight-decay: must be a finite number >= 0, got inf",
    ),
    bad(
        "cli-epochs-inf",
        lambda tmp: refused_arguments(*TRAIN_GPT, "--epochs", "inf"),
        CommandFailed,
        r"argument --epochs: must be a finite number > 0 and <= 1,000,000, got inf",
    ),
    bad(
        "cli-epochs-1e300",
        lambda tmp: refused_arguments(*TRAIN_GPT, "--epochs", "1e300"),
        CommandFailed,
        r"argument --epochs: must be a finite number > 0 and <= 1,000,000, got 1e300",
    ),
    bad(
        "cli-warmup-inf",
        lambda tmp: refused_arguments(*TRAIN_GPT, "--warmup", "inf"),
        CommandFailed,
        r"argument --warmup: must be a finite number >= 0 and <= 1,000,000,000, got inf",
    ),
    bad(
        "cli-max-steps-2-63",
        lambda tmp: refused_arguments(*TRAIN_GPT, "--max-steps", 2**63),
        CommandFailed,
        r"argument --max-steps: must be >= 1 and <= 1,000,000,000, got 9223372036854775808",
    ),
    bad(
        "cli-batch-size-1e30",
        lambda tmp: refused_arguments(*TRAIN_GPT, "--batch-size", 10**30),
        CommandFailed,
        r"argument --batch-size: must be >= 1 and <= 1,000,000,000",
    ),
    bad(
        "cli-vocab-size-1e12",
        lambda tmp: refused_arguments(*TRAIN_GPT, "--vocab-size", 10**12),
        CommandFailed,
        r"argument --vocab-size: must be >= 1 and <= 1,000,000, got 1000000000000",
    ),
    bad(
        "cli-seed-2-70",
        lambda tmp: refused_arguments(*TRAIN_GPT, "--seed", 2**70),
        CommandFailed,
        r"argument --seed: must be >= 0 and < 4,294,967,296, got 1180591620717411303424",
    ),
    bad(
        "cli-seed-negative",
        lambda tmp: refused_arguments("generate", "model", "hi", "--seed", -1),
        CommandFailed,
        r"exit 2: minitf generate: error: argument --seed: must be >= 0 and < 4,294,967,296, got -1",
    ),
    bad(
        "cli-steps-scale-inf",
        lambda tmp: refused_arguments("quickstart", "--steps-scale", "inf"),
        CommandFailed,
        r"argument --steps-scale: must be a finite number > 0 and <= 1,000, got inf",
    ),
    bad(
        "cli-temperature-1e-300",
        lambda tmp: refused_arguments("generate", "model", "hi", "--sample", "--temperature", "1e-300"),
        CommandFailed,
        r"argument --temperature: must be a finite number >= 0.0001, got 1e-300 \(a lower temperature is greedy",
    ),
    bad(
        "cli-max-new-tokens-1e12",
        lambda tmp: refused_arguments("generate", "model", "hi", "--max-new-tokens", 10**12),
        CommandFailed,
        r"argument --max-new-tokens: must be >= 1 and <= 1,000,000, got 1000000000000",
    ),
    bad(
        "cli-num-beams-1e9",
        lambda tmp: refused_arguments("translate", "model", "hi", "--num-beams", 10**9),
        CommandFailed,
        r"argument --num-beams: must be >= 1 and <= 1,000, got 1000000000",
    ),
    bad(
        "cli-port-past-65535",
        lambda tmp: refused_arguments("serve", "model", "--port", 70000),
        CommandFailed,
        r"argument --port: must be >= 1 and <= 65,535, got 70000",
    ),
    bad(
        "cli-convert-max-length-1e30",
        lambda tmp: refused_arguments(
            "convert", "miniembed", "model.safetensors", "--tokenizer", "t.json", "--out", "o", "--max-length", 10**30
        ),
        CommandFailed,
        r"argument --max-length: must be >= 1 and <= 1,000,000,000",
    ),
    bad(
        "api-learning-rate-inf",
        lambda tmp: TrainSettings(learning_rate=float("inf")),
        TrainingError,
        r"learning_rate must be a finite number > 0, got inf",
    ),
    bad(
        "api-epochs-inf",
        lambda tmp: TrainSettings(epochs=float("inf")),
        TrainingError,
        r"epochs must be a finite number in \(0, 1000000\], got inf",
    ),
    bad(
        "api-warmup-nan",
        lambda tmp: TrainSettings(warmup=float("nan")),
        TrainingError,
        r"warmup must be a finite number in \[0, 1000000000\], got nan",
    ),
    bad(
        "api-warmup-past-max-steps",
        lambda tmp: TrainSettings(max_steps=10, warmup=1e300),
        TrainingError,
        r"warmup must be a finite number in \[0, 1000000000\], got 1e\+300",
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
        "api-warmup-more-than-steps",
        lambda tmp: TrainSettings(max_steps=10, warmup=20),
        TrainingError,
        r"warmup=20 steps is more than max_steps=10",
    ),
    bad(
        "api-seed-2-70",
        lambda tmp: TrainSettings(seed=2**70),
        TrainingError,
        r"seed must be an integer in \[0, 4294967295\], got 1180591620717411303424",
    ),
    bad(
        "api-float-batch-size",
        lambda tmp: TrainSettings(batch_size=8.5),
        TrainingError,
        r"batch_size must be an integer in \[1, 1000000000\], got 8.5",
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
        "gpt-unknown-positions",
        lambda tmp: MiniTFGPTConfig(position_embedding_type="alibi"),
        ValueError,
        r"position_embedding_type must be one of \('learned', 'rope'\), got 'alibi'",
    ),
    bad(
        "gpt-unknown-overflow",
        lambda tmp: MiniTFGPTConfig(context_overflow="wrap"),
        ValueError,
        r"context_overflow must be one of \('error', 'crop'\)",
    ),
    bad(
        "seq2seq-unknown-norm",
        lambda tmp: MiniTFSeq2SeqConfig(norm_type="rms"),
        ValueError,
        r"norm_type must be one of .*'layer_norm'.* got 'rms'",
    ),
    bad(
        "gpt-string-bool",
        lambda tmp: MiniTFGPTConfig(use_cache="yes"),
        ValueError,
        r"use_cache must be true or false, got 'yes'",
    ),
    bad(
        "encoder-int-bool",
        lambda tmp: MiniTFEncoderConfig(scale_embeddings=1),
        ValueError,
        r"scale_embeddings must be true or false, got 1 \(int\)",
    ),
    bad(
        "gpt-heads-do-not-divide",
        lambda tmp: MiniTFGPTConfig(hidden_size=30, num_attention_heads=4),
        ValueError,
        r"hidden_size=30 is not divisible by num_attention_heads=4.*\[1, 2, 3, 5, 6, 10, 15, 30\]",
    ),
    bad(
        "gpt-rope-odd-head-dim",
        lambda tmp: MiniTFGPTConfig(hidden_size=18, num_attention_heads=2, position_embedding_type="rope"),
        ValueError,
        r"Rotary positions need an even head dimension.*= 9",
    ),
    bad(
        "seq2seq-odd-hidden-size",
        lambda tmp: MiniTFSeq2SeqConfig(hidden_size=9, num_attention_heads=3),
        ValueError,
        r"sinusoidal positions need an even hidden_size, got 9",
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
