"""Every test model and folder, made one way: tiny models, tiny folders per family, the conversion fixtures
converted, the export sources and engine exports, so that tests agree on what "the tiny GPT" is.

Random weights use a wide init so that greedy choices are not near-ties (float32 rounding in another engine must
not flip them). Conversion and export code is imported inside the functions that use it.
"""

import atexit
import functools
import inspect
import json
import shutil
import tempfile
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

from hf_minitf import (
    MiniTFEncoderConfig,
    MiniTFEncoderModel,
    MiniTFGPTConfig,
    MiniTFGPTForCausalLM,
    MiniTFSeq2SeqConfig,
    MiniTFSeq2SeqForConditionalGeneration,
    char_tokenizer,
    save_sentence_transformer,
    train_bpe_tokenizer,
    train_translation_tokenizers,
    train_wordlevel_tokenizer,
)
from hf_minitf.catalog.presets import PRESETS
from hf_minitf.training.quickstart import RECIPES

DATA = Path(__file__).parent / "data"

# --- tiny models: the one factory every model test builds from -------------------------------------------------------
# Each family's sizes are small enough for a test to build dozens of models; tests pass what they need different.

TINY_LAYERS = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4)
"""Two layers of 32 with 4 heads: the width of the tiny GPT and translator and of most saved test models."""
# The saved tiny models' sizes (their vocabulary and special ids are their tokenizer's).
SAVED_GPT_SIZES = dict(TINY_LAYERS, initializer_range=0.3)
SAVED_SIZES = dict(SAVED_GPT_SIZES, intermediate_size=64)
"""SAVED_GPT_SIZES with an FFN of 64: the saved tiny translators and encoders."""
TINY_ENCODER_LAYERS = dict(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32)
TINY_SIZES = {
    "gpt": dict(SAVED_GPT_SIZES, vocab_size=61, max_position_embeddings=96, pad_token_id=0),
    "encoder": dict(TINY_ENCODER_LAYERS, vocab_size=100, max_position_embeddings=24),
    "seq2seq": dict(SAVED_SIZES, src_vocab_size=37, vocab_size=41, max_position_embeddings=40, initializer_range=1.0),
}
TINY_CLASSES = {
    "gpt": (MiniTFGPTConfig, MiniTFGPTForCausalLM),
    "encoder": (MiniTFEncoderConfig, MiniTFEncoderModel),
    "seq2seq": (MiniTFSeq2SeqConfig, MiniTFSeq2SeqForConditionalGeneration),
}
SPECIAL_IDS = ("pad_token_id", "bos_token_id", "eos_token_id")


def with_tokenizer(family: str, tokenizer, **fields) -> dict:
    """Config `fields` of a model of `family` with the tokenizer's vocabulary size(s) and, where `fields` do not set
    them, its special ids."""
    special = {name: getattr(tokenizer, name) for name in SPECIAL_IDS if getattr(tokenizer, name, None) is not None}
    if family == "seq2seq":
        vocabulary = dict(src_vocab_size=tokenizer.source_vocab_size, vocab_size=tokenizer.target_vocab_size)
    else:
        vocabulary = dict(vocab_size=len(tokenizer))
    return {**special, **fields, **vocabulary}


def tiny_config(family: str, **overrides):
    """The config of a tiny model of `family` (gpt, encoder or seq2seq), with `overrides` applied."""
    config_class, _ = TINY_CLASSES[family]
    return config_class(**{**TINY_SIZES[family], **overrides})


# The seed each family's model is built after, unless a test gives another.
TINY_SEEDS = {"gpt": 1, "encoder": 0, "seq2seq": 3}


def tiny_model(
    family: str, seed: int | None = None, model_class: type | None = None, tokenizer=None, **overrides
) -> torch.nn.Module:
    """A tiny random model of `family` in eval mode, built after `torch.manual_seed(seed)` (by default the family's
    seed in TINY_SEEDS); `model_class` picks another head (e.g. MiniTFEncoderForSequenceClassification), a
    `tokenizer` gives the vocabulary and special ids (`with_tokenizer`). The GPT and seq2seq sizes have large
    weights, so that greedy decoding wanders instead of repeating one token."""
    config = tiny_config(family, **(overrides if tokenizer is None else with_tokenizer(family, tokenizer, **overrides)))
    torch.manual_seed(TINY_SEEDS[family] if seed is None else seed)
    return (model_class or TINY_CLASSES[family][1])(config).eval()


def random_model(family: str, tokenizer, seed: int = 0, **fields) -> torch.nn.Module:
    """A model of `family` in eval mode with random weights (after `torch.manual_seed(seed)`), exactly the config
    `fields` (no tiny sizes under them) with the tokenizer's vocabulary and special ids (`with_tokenizer`)."""
    config_class, model_class = TINY_CLASSES[family]
    torch.manual_seed(seed)
    return model_class(config_class(**with_tokenizer(family, tokenizer, **fields))).eval()


def save_with_tokenizer(model, tokenizer, folder: Path) -> Path:
    """`model` and `tokenizer` saved with `save_pretrained` in `folder`, the tokenizer first: the model's card then
    checks its example text with it."""
    tokenizer.save_pretrained(folder)
    model.save_pretrained(folder)
    return folder


def _save_folder(family: str, model, tokenizer, folder: Path) -> Path:
    """An encoder saved as a SentenceTransformer folder (as training writes it), other families with
    `save_with_tokenizer`."""
    if family == "encoder":
        save_sentence_transformer(model, tokenizer, folder)
        return folder
    return save_with_tokenizer(model, tokenizer, folder)


def random_model_folder(family: str, folder: Path, tokenizer, seed: int = 0, **fields) -> Path:
    """`random_model(family, tokenizer, seed, **fields)` saved with its tokenizer (an encoder as a
    SentenceTransformer folder): how tests and benchmarks write a model folder of given sizes."""
    return _save_folder(family, random_model(family, tokenizer, seed, **fields), tokenizer, folder)


def tiny_model_folder(family: str, folder: Path, tokenizer, seed: int | None = None, **overrides) -> Path:
    """`tiny_model(family, seed, tokenizer=tokenizer, **overrides)` saved with its tokenizer (an encoder as a
    SentenceTransformer folder)."""
    return _save_folder(family, tiny_model(family, seed, tokenizer=tokenizer, **overrides), tokenizer, folder)


SAVED_MODEL_FILES = frozenset(
    {
        "README.md",
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
    }
)
"""The files of a saved GPT folder with its card: the model, its generation config and one tokenizer.json."""


def preset_fields(family: str, name: str, **changes) -> dict:
    """The config fields of a catalog preset (its vocabulary size included, dropout off: benchmarks run in eval
    mode), with `changes`."""
    preset = PRESETS[family][name]
    fields = {key: value for key, value in preset.config.items() if not key.endswith("dropout")}
    return {**fields, **({"vocab_size": preset.vocab_size} if preset.vocab_size else {}), **changes}


QUICKSTART_GPT = {
    key: value for key, value in RECIPES["gpt"].options["config_overrides"].items() if not key.endswith("dropout")
}
"""What `minitf quickstart` changes in the GPT preset "tiny" (hf_minitf/training/quickstart.py), but dropout."""


def quickstart_fields(family: str, **changes) -> dict:
    """The config fields of the model `minitf quickstart` trains of `family` (the preset "tiny", the GPT's with
    QUICKSTART_GPT), dropout off, with `changes`."""
    return preset_fields(family, "tiny", **{**(QUICKSTART_GPT if family == "gpt" else {}), **changes})


# --- tiny folders per family: saved models with tokenizers, for the engine tests -------------------------------------

ENGINE_TEXT = "the quick brown fox jumps over the lazy dog. a stitch in time saves nine!\n"
"""The text the engine tests' tiny GPT and encoder tokenizers are made from."""
PAIRS = [
    ("the cat sat on the mat", "il gatto sedeva sul tappeto"),
    ("the dog runs in the park", "il cane corre nel parco"),
    ("a bird sings a song", "un uccello canta una canzone"),
    ("the sun is warm today", "il sole è caldo oggi"),
    ("we read a good book", "leggiamo un buon libro"),
]
SENTENCES = ["the quick brown fox", "a lazy dog sleeps in the sun", "time saves nine", "dog"]
GPT_PROMPTS = ["the qu", "a stitch", "fox"]


def make_gpt(
    folder: Path,
    position_embedding_type: str = "learned",
    rope_interleaved: bool = True,
    seed: int = 0,
    tokenizer=None,
    **config_fields,
) -> Path:
    """A tiny GPT folder (SAVED_GPT_SIZES, 64 positions) of `tokenizer`, by default characters of ENGINE_TEXT."""
    fields = {**SAVED_GPT_SIZES, "max_position_embeddings": 64, **config_fields}
    fields.update(position_embedding_type=position_embedding_type, rope_interleaved=rope_interleaved)
    tokenizer = char_tokenizer(ENGINE_TEXT) if tokenizer is None else tokenizer
    return random_model_folder("gpt", folder, tokenizer, seed, **fields)


def make_seq2seq(folder: Path, seed: int = 0, **config_fields) -> Path:
    """A tiny translator folder (SAVED_SIZES, 16 positions) of word vocabularies of PAIRS."""
    tokenizer = train_translation_tokenizers(PAIRS, min_frequency=1)
    fields = {**SAVED_SIZES, "max_position_embeddings": 16, **config_fields}
    return random_model_folder("seq2seq", folder, tokenizer, seed, **fields)


def make_encoder(folder: Path, seed: int = 0) -> Path:
    """A tiny SentenceTransformer folder (two layers of 32, FFN 64, 32 positions) of a word vocabulary."""
    tokenizer = train_wordlevel_tokenizer(SENTENCES + [ENGINE_TEXT], vocab_size=64, min_frequency=1, max_length=32)
    fields = dict(TINY_LAYERS, intermediate_size=64, max_position_embeddings=32)
    return random_model_folder("encoder", folder, tokenizer, seed, **fields)


GPT_KINDS = {
    "learned": {},
    "rope_interleaved": {"position_embedding_type": "rope"},
    "rope_halves": {"position_embedding_type": "rope", "rope_interleaved": False},
}
SEQ2SEQ_KINDS = {
    "layer_norm": {},
    "hkproj_first_norm": {
        "norm_type": "scalar_std_times_eps",
        "attention_mask_value": -1e9,
        "output_log_softmax": True,
    },
}


def once_per_process(function):
    """`functools.cache` keyed on the arguments as bound, defaults applied: `f(a)` and `f(a, default)` are one call
    (with plain `functools.cache` they are two, and the second writes the same folder again)."""
    signature = inspect.signature(function)
    cached = functools.cache(function)

    @functools.wraps(function)
    def call(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return cached(*bound.args, **bound.kwargs)

    return call


@functools.cache
def workspace() -> Path:
    """One folder per test process for the models and exports the engine test modules share (made once)."""
    root = Path(tempfile.mkdtemp(prefix="hf_minitf_engines_"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    return root


@once_per_process
def model_folder(family: str, kind: str) -> Path:
    """A tiny MiniTF folder: family gpt (GPT_KINDS), seq2seq (SEQ2SEQ_KINDS) or encoder (kind "tiny", or
    "miniembed": the converted MiniEmbed fixture)."""
    folder = workspace() / f"{family}_{kind}"
    if family == "gpt":
        return make_gpt(folder, **GPT_KINDS[kind])
    if family == "seq2seq":
        return make_seq2seq(folder, **SEQ2SEQ_KINDS[kind])
    return convert_miniembed_fixture(folder) if kind == "miniembed" else make_encoder(folder)


# --- the conversion fixtures of tests/data, converted ----------------------------------------------------------------

GPT_FIXTURES = ("char_gpt", "frawdllm_learned", "frawdllm_rope")
"""The GPT conversion fixtures of tests/data."""


def write_frawdllm_fixture_tokenizer(path: Path) -> Path:
    """A byte-level BPE without merges laid out like FrawdLLM's: <|pad|> <|unk|> <|bos|> <|eos|>, then 92 byte
    symbols (the 96 ids of the fixtures' vocabulary), saved as `path`."""
    symbols = sorted(pre_tokenizers.ByteLevel.alphabet())[:92]
    vocab = {token: index for index, token in enumerate(["<|pad|>", "<|unk|>", "<|bos|>", "<|eos|>", *symbols])}
    bpe = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<|unk|>"))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.save(str(path))
    return path


def word_level_tokenizer(prefix: str, size: int) -> Tokenizer:
    """A WordLevel of `size` ids laid out like hkproj's: [UNK] [PAD] [SOS] [EOS], then the words `{prefix}4` to
    `{prefix}{size - 1}` (each word's number is its id), split on whitespace."""
    words = ["[UNK]", "[PAD]", "[SOS]", "[EOS]", *(f"{prefix}{index}" for index in range(4, size))]
    tokenizer = Tokenizer(models.WordLevel(vocab={word: index for index, word in enumerate(words)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    return tokenizer


HKPROJ_TOKENIZERS = {"tokenizer_en.json": ("s", 40), "tokenizer_it.json": ("t", 45)}
"""hkproj's tokenizer files, sized to its fixtures' vocabularies: name -> (word prefix, size)."""


def write_hkproj_tokenizers(folder: Path) -> Path:
    """HKPROJ_TOKENIZERS written in `folder`."""
    for name, (prefix, size) in HKPROJ_TOKENIZERS.items():
        word_level_tokenizer(prefix, size).save(str(folder / name))
    return folder


def miniembed_fixture_vocabulary() -> dict:
    """MiniEmbed's released vocabulary (tests/data/miniembed_tokenizer) cut to the fixture model's 97 ids, in its
    tokenizer.json layout."""
    words = json.loads((DATA / "miniembed_tokenizer" / "tokenizer.json").read_text())["word_to_id"]
    return {"vocab_size": 97, "word_to_id": {word: index for word, index in words.items() if index < 97}}


def convert_gpt_fixture(root: Path, name: str) -> Path:
    """The GPT conversion fixture `name` (GPT_FIXTURES) converted into `root / name`."""
    from hf_minitf.conversion.char_gpt import convert_char_gpt
    from hf_minitf.conversion.frawdllm import convert_frawdllm

    root.mkdir(parents=True, exist_ok=True)
    if name == "char_gpt":
        convert_char_gpt(
            DATA / "char_gpt/checkpoint.pt", root / "char_gpt", vocab=DATA / "char_gpt/vocab.json", num_heads=4
        )
        # The converted char GPT crops like the original (refused by the native export): the same model with
        # context_overflow="error" is exported.
        config_path = root / "char_gpt/config.json"
        config_path.write_text(json.dumps({**json.loads(config_path.read_text()), "context_overflow": "error"}))
    else:
        tokenizer = root / "frawdllm_tokenizer.json"
        convert_frawdllm(
            DATA / name / "checkpoint.pt",
            root / name,
            tokenizer=tokenizer if tokenizer.is_file() else write_frawdllm_fixture_tokenizer(tokenizer),
        )
    return root / name


def convert_miniembed_fixture(folder: Path) -> Path:
    """The MiniEmbed conversion fixture (tests/data/minitf_embedding) as a SentenceTransformer folder, with
    MiniEmbed's released vocabulary cut to the fixture model's 97 ids."""
    from hf_minitf.conversion.miniembed import convert_miniembed

    convert_miniembed(
        DATA / "minitf_embedding" / "checkpoint.pt",
        folder,
        tokenizer=miniembed_fixture_vocabulary(),
        config=DATA / "minitf_embedding" / "config.json",
    )
    return folder


# --- export sources: the fixtures plus random models covering what they do not ---------------------------------------
# (trained BPE with merges, untied head, no attention bias, relu, rotate-half rotary, learned-position encoder, a
# context long enough for 50 greedy tokens)

EXPORT_TEXT = (
    "the quick brown fox jumps over the lazy dog. " * 20
    + "hello world, a tiny model exported everywhere. " * 20
    + "café naïve résumé — 1234567890\n"
)
"""The text the export sources' random models train their tokenizers on."""


def _random_gpt(folder: Path, tokenizer, seed: int, **config) -> Path:
    return make_gpt(folder, seed=seed, tokenizer=tokenizer, **{"max_position_embeddings": 80, **config})


def make_gpt_sources(root: Path) -> dict[str, Path]:
    """name -> MiniTF GPT folder."""
    sources = {name: convert_gpt_fixture(root, name) for name in GPT_FIXTURES}
    bpe = train_bpe_tokenizer([EXPORT_TEXT], vocab_size=300, min_frequency=1)
    sources["bpe_learned"] = _random_gpt(root / "bpe_learned", bpe, 1)
    sources["bpe_rope_untied"] = _random_gpt(
        root / "bpe_rope_untied", bpe, 2, position_embedding_type="rope", tie_word_embeddings=False, rope_theta=500.0
    )
    chars = char_tokenizer(EXPORT_TEXT)
    sources["char_rope_no_bias"] = _random_gpt(
        root / "char_rope_no_bias", chars, 3, position_embedding_type="rope", attention_bias=False, layer_norm_eps=1e-6
    )
    sources["char_learned_relu"] = _random_gpt(
        root / "char_learned_relu", chars, 4, hidden_act="relu", intermediate_size=64
    )
    sources["char_rope_rotate_half"] = _random_gpt(
        root / "char_rope_rotate_half", chars, 5, position_embedding_type="rope", rope_interleaved=False
    )
    return sources


def make_chat_gpt_sources(root: Path) -> dict[str, Path]:
    """name -> GPT folder with a chat template: "chatml" (a BPE GPT), "simple" (a character GPT whose vocabulary
    spells the role names), "frawdllm" (FrawdLLM's RoPE fixture converted with a chat tokenizer: its own format)."""
    from helpers import write_frawdllm_tokenizer

    from hf_minitf import set_chat_template
    from hf_minitf.conversion.frawdllm import convert_frawdllm

    root.mkdir(parents=True, exist_ok=True)
    bpe = train_bpe_tokenizer([EXPORT_TEXT], vocab_size=300, min_frequency=1)
    chatml = _random_gpt(root / "chatml", bpe, 1)
    set_chat_template(chatml, "chatml")
    simple = _random_gpt(root / "simple", char_tokenizer(EXPORT_TEXT + "System: User: Assistant:"), 3)
    set_chat_template(simple, "simple")
    tokenizer = write_frawdllm_tokenizer(root / "frawdllm_chat_tokenizer.json", chat=True)
    convert_frawdllm(DATA / "frawdllm_rope/checkpoint.pt", root / "frawdllm", tokenizer=tokenizer)
    return {"chatml": chatml, "simple": simple, "frawdllm": root / "frawdllm"}


LEARNED_ENCODER = dict(position_embedding_type="learned", scale_embeddings=False, attention_bias=False)
"""An encoder unlike MiniEmbed's: learned positions, unscaled embeddings, no attention bias."""


def make_encoder_sources(root: Path) -> dict[str, Path]:
    """name -> MiniTF encoder folder (SentenceTransformer folders, as conversion and training write them)."""
    root.mkdir(parents=True, exist_ok=True)
    convert_miniembed_fixture(root / "miniembed")
    tokenizer = train_wordlevel_tokenizer([EXPORT_TEXT], vocab_size=60, min_frequency=1, max_length=24)
    fields = dict(SAVED_SIZES, max_position_embeddings=24, **LEARNED_ENCODER)
    random_model_folder("encoder", root / "learned_encoder", tokenizer, 6, **fields)
    return {"miniembed": root / "miniembed", "learned_encoder": root / "learned_encoder"}


def make_seq2seq_source(root: Path) -> Path:
    """The hkproj fixture converted (a seq2seq folder, which no export takes)."""
    from hf_minitf.conversion.hkproj import convert_hkproj

    root.mkdir(parents=True, exist_ok=True)
    write_hkproj_tokenizers(root)
    convert_hkproj(
        DATA / "seq2seq_transformer_trained_like/checkpoint.pt",
        root / "seq2seq",
        num_heads=4,
        source_tokenizer=root / "tokenizer_en.json",
        target_tokenizer=root / "tokenizer_it.json",
    )
    return root / "seq2seq"


TRANSLATOR_EOS_BOOST = 3.0
"""Added to the random quickstart-like translator's [EOS] logit, so that its translations end at varied lengths."""


@once_per_process
def hkproj_source() -> Path:
    """hkproj's trained-like conversion fixture (its first norm, the -1e9 mask, log-softmax outputs), once."""
    return make_seq2seq_source(workspace() / "hkproj_source")


@once_per_process
def quickstart_like_source() -> Path:
    """A tiny translator with the quickstart's vocabularies (its English-Italian task), random weights, once."""
    from hf_minitf.training.tasks import english_italian_pairs

    pairs = english_italian_pairs(train=300, held_out=10).train
    tokenizer = train_translation_tokenizers(pairs, min_frequency=1, model_max_length=24)
    fields = dict(SAVED_SIZES, max_position_embeddings=24)
    folder = random_model_folder("seq2seq", workspace() / "quickstart_like", tokenizer, seed=5, **fields)
    model = MiniTFSeq2SeqForConditionalGeneration.from_pretrained(folder)
    with torch.no_grad():
        model.lm_head.bias[model.config.eos_token_id] += TRANSLATOR_EOS_BOOST
    model.save_pretrained(folder)
    return folder


# --- engine exports: made once per test process in workspace() -------------------------------------------------------


@once_per_process
def ctranslate2_export(family: str, kind: str, quantization: str = "float32") -> Path:
    from hf_minitf.export.ctranslate2 import export_ctranslate2

    return export_ctranslate2(
        model_folder(family, kind), workspace() / f"{family}_{kind}_ct2_{quantization}", quantization=quantization
    )


ENCODER_ACCENTED_TEXT = "a naïve café, 42 times: déjà vu"
"""Words with accents, digits and punctuation in the engine encoders' vocabularies."""
ENCODER_KINDS = ("miniembed", "learned", "quickstart")
"""The encoders the engine exports of embeddings are checked on (`engine_encoder`)."""


@once_per_process
def engine_encoder(kind: str) -> Path:
    """An encoder folder of ENCODER_KINDS: "miniembed", the converted MiniEmbed fixture; "learned", learned
    positions, unscaled embeddings, no attention bias, wide init; "quickstart", the quickstart's size (the encoder
    preset "tiny": 2 layers x 128, 4 heads, FFN 256, 64 positions), random, with a word vocabulary."""
    if kind == "miniembed":
        return model_folder("encoder", "miniembed")
    texts = SENTENCES + [ENGINE_TEXT, ENCODER_ACCENTED_TEXT] + [source for source, _ in PAIRS]
    if kind == "learned":
        tokenizer = train_wordlevel_tokenizer(texts, vocab_size=64, min_frequency=1, max_length=24)
        fields = dict(SAVED_GPT_SIZES, intermediate_size=32, max_position_embeddings=24, **LEARNED_ENCODER)
    else:
        tokenizer = train_wordlevel_tokenizer(texts, vocab_size=200, min_frequency=1, max_length=64)
        fields = preset_fields("encoder", "tiny", initializer_range=0.2)
    return random_model_folder("encoder", workspace() / f"encoder_{kind}", tokenizer, 1, **fields)


@once_per_process
def onnx_export(quantize: tuple[str, ...] = ("q8",)) -> Path:
    """The converted MiniEmbed fixture exported to ONNX with the variants `quantize`."""
    from hf_minitf.export.onnx import export_onnx

    return export_onnx(
        model_folder("encoder", "miniembed"), workspace() / f"encoder_onnx_{'_'.join(quantize)}", quantize=quantize
    )


@once_per_process
def gpt_source(name: str) -> Path:
    """A GPT conversion fixture (GPT_FIXTURES) converted, or a tiny GPT of GPT_KINDS."""
    return convert_gpt_fixture(workspace() / "fixtures", name) if name in GPT_FIXTURES else model_folder("gpt", name)


@once_per_process
def onnx_gpt_export(name: str, quantize: tuple[str, ...] = ()) -> Path:
    """`gpt_source(name)` exported to ONNX with the variants `quantize`."""
    from hf_minitf.export.onnx import export_onnx

    return export_onnx(gpt_source(name), workspace() / f"gpt_{name}_onnx_{'_'.join(quantize)}", quantize=quantize)


@once_per_process
def onnx_translator_export(kind: str = "layer_norm", quantize: tuple[str, ...] = ()) -> Path:
    """The tiny seq2seq folder `model_folder("seq2seq", kind)` exported to ONNX with the variants `quantize`."""
    from hf_minitf.export.onnx import export_onnx

    return export_onnx(
        model_folder("seq2seq", kind), workspace() / f"seq2seq_{kind}_onnx_{'_'.join(quantize)}", quantize=quantize
    )


# --- prompts and MiniTF's own greedy tokens, which the exports are compared with -------------------------------------


def prompt_ids(folder: Path, count: int = 4) -> list[int]:
    """The first `count` ids of a text in the folder's tokenizer."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder)("hello world, the quick fox", add_special_tokens=False).input_ids[
        :count
    ]


def minitf_greedy(folder: Path, prompt: list[int], new_tokens: int) -> list[int]:
    """MiniTF's greedy continuation (KV cache on, no stop at an end token): the new tokens."""
    model = MiniTFGPTForCausalLM.from_pretrained(folder).eval()
    model.generation_config.eos_token_id = None
    with torch.no_grad():
        output = model.generate(
            torch.tensor([prompt]),
            attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
            max_new_tokens=new_tokens,
            do_sample=False,
            use_cache=True,
            pad_token_id=model.config.pad_token_id or 0,
        )
    return output[0, len(prompt) :].tolist()
