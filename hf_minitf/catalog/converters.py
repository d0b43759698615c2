"""The sources `minitf convert SOURCE` takes, one registry entry each: the original project, the function that
converts it from Python (as `hf_minitf.conversion` exports it), its module, and its help: what it reads,
what it infers from the weights and what must be given. Light to import, so `minitf convert SOURCE --help` needs no torch.

Adding a source is one entry here plus its module in `conversion/` (see CONTRIBUTING.md).
"""

from __future__ import annotations

from typing import NamedTuple


class Converter(NamedTuple):
    """One source of `minitf convert SOURCE`."""

    project: str
    """The original codebase, as its users know it."""
    function: str
    """The converting function, exported by hf_minitf.conversion."""
    module: str
    """Its module in hf_minitf.conversion."""
    summary: str
    description: str
    license: str | None = None
    """The license the original project states, as a Hub license id; None where it states none (the card then says
    `other` and asks for one). Of the original codebases, only MiniEmbed states one (MIT, in its LICENSE)."""
    checkpoint_file: str = ""
    """The checkpoint file `minitf export original --format NAME` writes, named as the original project names it."""
    exported: str = ""
    """What `minitf export original --format NAME` writes: the checkpoint and the side files."""


CHAR_GPT_DESCRIPTION = """\
Convert a nanoGPT-style character-level GPT to `MiniTFGPTForCausalLM` + a character tokenizer.

Input: the model's state_dict (`torch.save(model.state_dict())` or safetensors) and its character list.
Inferred from the weights: vocabulary size, hidden size, context (block_size), layers, MLP width, and whether
the LM head is tied. Not in the weights: the number of heads (`num_heads`, or the original constructor
arguments as JSON).

The original `generate` feeds only the last `block_size` tokens at each step. The converted config sets
`context_overflow="crop"` (the model cuts longer inputs to their last `max_position_embeddings` tokens) and
the saved generation config `use_cache=False`, so a plain `generate()` continues past the context exactly
like the original, recomputing the window at each step. For cached, faster generation inside the context,
pass `use_cache=True` (and keep prompt plus new tokens within the context) or set `context_overflow="error"`."""

FRAWDLLM_DESCRIPTION = """\
Convert a FrawdLLM model to `MiniTFGPTForCausalLM` + its byte-level BPE tokenizer (and FrawdLLM's
`Embeddings` layer to the GPT's embedding weights).

Input, one of:
- a FrawdLLM training checkpoint (`{"model_state_dict", "config", ...}`, whose pickled
  `src.model.config.ModelConfig` is read into a stand-in without running any FrawdLLM code), or a bare
  state_dict (torch.save or safetensors), with `--tokenizer` (the `tokenizers` JSON of its BPE);
- a Hugging Face folder FrawdLLM published with its `scripts/convert_to_hf.py` (`config.json` with
  `model_type: "frawdllm"`, `model.safetensors` with `model.`-prefixed keys, `tokenizer.json`), or the Hub
  repository id of one. Only its JSON and safetensors files are read (a repository's code is not even
  downloaded); `HF_HUB_OFFLINE=1` reads the repository from the local cache.
Inferred from the weights: vocabulary size, hidden size, layers, MLP width, learned positions or RoPE
(no `embeddings.pos_emb`), the context length (learned: position rows; RoPE: the causal-mask buffer,
which spans 4 x context_length), tied LM head. From the stored config when present: everything, checked
against the weights. Not in a bare state_dict: the number of heads (`num_heads`, a ModelConfig JSON, or a
size that matches one of FrawdLLM's presets), and a RoPE context length when the mask buffer was dropped.
Special-token ids default to FrawdLLM's (<|pad|>=0, <|unk|>=1, <|bos|>=2, <|eos|>=3) and must agree with
the tokenizer.

FrawdLLM's `use_rmsnorm` and `use_swiglu` flags (set by its `tiny-llama` and `small-llama` presets) are read
by none of its model code: its blocks always build LayerNorm and the GELU MLP. So the weights decide: a
checkpoint with LayerNorm biases and a plain fc1/fc2 MLP converts (the card names the flags that were set
but had no effect); only weights that really are RMSNorm (norms without bias) or SwiGLU (a gate projection)
are refused, naming the keys.

Chat: when the tokenizer holds `<|user|>` and `<|assistant|>` (FrawdLLM's SFT/DPO chat models), the converted
tokenizer gets a chat template giving exactly FrawdLLM's format `<|bos|><|user|>{instruction}<|assistant|>
{response}<|eos|>`. A tokenizer file without them, for a model two tokens larger, gets them at the next two
ids, as FrawdLLM's chat scripts add them.

FrawdLLM's own loss takes `targets` already shifted and ignores pad id 0; the converted model's `labels`
follow transformers (labels = input ids, shifted inside, -100 ignored): pass `labels` with pad set to -100."""

MINIEMBED_DESCRIPTION = """\
Convert a MiniEmbed embedding model to `MiniTFEncoderModel` + a fast tokenizer, saved as a folder that is
both a Hugging Face model and a SentenceTransformer (and a Transformer-embedding layer, `TransformerEmbedding`,
to the encoder's embedding weights).

Input: the model weights (`model.safetensors`, or `model.pt`: a state_dict or a dict holding one), MiniEmbed's
`config.json` (its constructor arguments: vocab_size, d_model, num_heads, num_layers, d_ff, max_seq_len,
dropout, pad_token_id) and its `tokenizer.json` (`{vocab_size, word_to_id}`).
Inferred from the weights: vocabulary size, hidden size, layers, feed-forward width, and the maximum length
(rows of the stored positional table, checked against the sinusoidal formula). From config.json: the head
count (no weight shape reveals it; `num_heads` may be given instead), dropout and pad id, checked against
the weights. The SentenceTransformer (Transformer -> mean Pooling -> Normalize) gives MiniEmbed's `encode`."""

HKPROJ_DESCRIPTION = """\
Convert an hkproj pytorch-transformer translation model (its early version and the later ones) to
`MiniTFSeq2SeqForConditionalGeneration` + the paired source/target tokenizer.

Input: a training checkpoint `tmodel_XX.pt` (`{"model_state_dict", ...}`), or a bare state_dict (torch.save
or safetensors), and the two `tokenizers` files `tokenizer_{src}.json`, `tokenizer_{tgt}.json`.
Inferred from the weights: both vocabulary sizes, hidden size, layers, feed-forward width, the maximum
length (the stored positional tables, checked against the sinusoidal formula), q/k/v/o biases (later
versions dropped them), the projection's name, and the norm variant: per-feature gains (hkproj's last
version: `std + eps`, plain logits) or the early version's scalar gain; scalar gains far below 1 can only come
from training the early version's `std * eps` norm. Not in the weights: the head count (hkproj's train.py uses
build_transformer's default h=8; pass `num_heads`), and, for scalar gains near 1 (an untrained early-version
model, or hkproj's `std + eps` fix), which norm formula the code used (`norm_type`).
The model returns log-probabilities as `logits` for the scalar-norm versions (their ProjectionLayer ends in
log_softmax), plain scores for the last version; argmax, beams and the loss are the same either way.
With the early version's norm and gains near 1, attention scores reach ~1e12 and the original's masking (scores set
to -1e9) leaks masked positions into the softmax, so a decoder state depends on the prefix length; the
generation config then sets `use_cache=False`, which recomputes the prefix at each step as the original's
greedy_decode does and reproduces its tokens (a KV cache would keep states computed from shorter prefixes)."""

TRANSFORMER_EMBEDDING_DESCRIPTION = """\
Convert a Transformer-embedding layer (`TransformerEmbedding`: token embedding with padding row, scaled by
sqrt(d_model), plus a fixed sinusoidal table) into MiniTF encoder embedding weights: writes
embeddings.safetensors (weights under MiniTF names) and embedding_config.json (vocab_size, hidden_size,
max_position_embeddings, sinusoidal positions, scaled embeddings), to load into a larger MiniTFEncoderConfig
model with strict=False. The padding row is the one the encoder's pad_token_id must name (the layer's pad_idx,
0 by default)."""

FRAWDLLM_EMBEDDINGS_DESCRIPTION = """\
Convert FrawdLLM's `Embeddings` layer alone (token embedding, plus the learned position embedding unless it
uses RoPE) into MiniTF GPT embedding weights: writes embeddings.safetensors (weights under MiniTF names) and
embedding_config.json (vocab_size, hidden_size, position_embedding_type and, for learned positions,
max_position_embeddings), to load into a larger MiniTFGPTConfig model with strict=False."""


CONVERTERS: dict[str, Converter] = {
    "char-gpt": Converter(
        "nanoGPT-style character GPT",
        "convert_char_gpt",
        "char_gpt",
        "nanoGPT-style character GPT -> MiniTFGPTForCausalLM + char tokenizer",
        CHAR_GPT_DESCRIPTION,
        checkpoint_file="model.pt",
        exported="model.pt (the state_dict, `torch.save(model.state_dict())`: causal-mask buffers included, lm_head "
        "sharing wte's tensor), vocab.json (the characters in id order), config.json (GPT's constructor arguments: "
        "vocab_size, block_size, n_embd, n_head, n_layer, dropout)",
    ),
    "frawdllm": Converter(
        "FrawdLLM",
        "convert_frawdllm",
        "frawdllm",
        "FrawdLLM checkpoint, published folder or Hub repo id (learned or RoPE, chat models too) -> MiniTFGPTForCausalLM + its BPE tokenizer",
        FRAWDLLM_DESCRIPTION,
        checkpoint_file="best.pt",
        exported="best.pt (FrawdLLM's training checkpoint layout: epoch 0, global_step 0, model_state_dict with the "
        "attention-mask buffers and lm_head sharing the token embedding's tensor, empty optimizer_state_dict and "
        "scheduler_state_dict, val_loss None, and `config` as a plain dict of ModelConfig's fields instead of the "
        "pickled dataclass, so the file loads with torch.load(weights_only=True): build the model with "
        "FrawdLLM(ModelConfig(**checkpoint['config']))), config.json (the same ModelConfig fields, as FrawdLLM's "
        "convert_to_hf.py names them), tokenizer.json (its `tokenizers` byte-level BPE, framing texts as "
        "<|bos|> text <|eos|> again)",
    ),
    "miniembed": Converter(
        "MiniEmbed",
        "convert_miniembed",
        "miniembed",
        "MiniEmbed embedding model -> MiniTFEncoderModel + tokenizer + SentenceTransformer",
        MINIEMBED_DESCRIPTION,
        license="mit",
        checkpoint_file="model.safetensors",
        exported="model.safetensors (MiniTransformerEmbedding's state_dict, the positional table included), "
        "config.json (its constructor arguments: vocab_size, d_model, num_heads, num_layers, d_ff, max_seq_len, "
        "dropout, pad_token_id), tokenizer.json (its word-level vocabulary, {vocab_size, word_to_id})",
    ),
    "hkproj": Converter(
        "hkproj pytorch-transformer",
        "convert_hkproj",
        "hkproj",
        "hkproj pytorch-transformer translation model -> MiniTFSeq2SeqForConditionalGeneration",
        HKPROJ_DESCRIPTION,
        checkpoint_file="tmodel_00.pt",
        exported="tmodel_00.pt (train.py's layout: epoch 0, model_state_dict with both positional tables, empty "
        "optimizer_state_dict, global_step 0), config.json (build_transformer's arguments: src_vocab_size, "
        "tgt_vocab_size, src_seq_len, tgt_seq_len, d_model, N, h, dropout, d_ff), the two `tokenizers` files under "
        "the names they were converted from (tokenizer_source.json and tokenizer_target.json when not recorded)",
    ),
    "transformer-embedding": Converter(
        "Transformer-embedding layer (TransformerEmbedding)",
        "convert_transformer_embedding",
        "miniembed",
        "Transformer-embedding layer (TransformerEmbedding) alone -> MiniTF encoder embedding weights",
        TRANSFORMER_EMBEDDING_DESCRIPTION,
        checkpoint_file="embedding.pt",
        exported="embedding.pt (the layer's state_dict: pe, token_embedding.weight), config.json (its constructor "
        "arguments: vocab_size, d_model, max_len, pad_idx=0)",
    ),
    "frawdllm-embeddings": Converter(
        "FrawdLLM Embeddings layer",
        "convert_frawdllm_embeddings",
        "frawdllm",
        "FrawdLLM's Embeddings layer alone -> MiniTF GPT embedding weights",
        FRAWDLLM_EMBEDDINGS_DESCRIPTION,
        checkpoint_file="embeddings.pt",
        exported="embeddings.pt (the layer's state_dict: token_emb.weight, and pos_emb.weight for learned positions), "
        "config.json (the ModelConfig fields the layer fixes: vocab_size, n_embd, use_rope, and context_length for "
        "learned positions)",
    ),
}

ORIGINAL_FORMAT_FIELD = "original_format"
"""The config.json field a conversion records its source in (`{"format": SOURCE, ...}` with what the original's files
hold that the MiniTF config does not), so that `minitf export original` writes the same files back; it survives
`save_pretrained` after fine-tuning."""


class OriginalExport(NamedTuple):
    """`minitf export original`: a sub-command of `minitf export` beside the formats, made from this entry."""

    summary: str
    description: str


ORIGINAL_EXPORT = OriginalExport(
    "back to the original project's checkpoint and side files (char GPT, FrawdLLM, MiniEmbed, hkproj, embedding layers)",
    "Write a MiniTF folder (converted, then fine-tuned with the Hugging Face tools or `minitf train --resume`) back "
    "as the checkpoint and side files of the original project it came from, named and laid out as that project "
    "writes and reads them, with the same numbers out: `minitf convert FORMAT` of what it writes gives the same "
    "model again. FORMAT is a source of `minitf convert`; the default is the one the conversion recorded in "
    f"config.json (`{ORIGINAL_FORMAT_FIELD}`), else the original whose layout the folder fits (a GPT with a "
    "character tokenizer: char-gpt; another GPT: frawdllm; an encoder: miniembed; a translator: hkproj; the folder "
    "of an embedding layer's conversion: its layer). What the original code cannot compute (another activation, "
    "norm or eps, rotary variant, a head not tied, a chat template other than FrawdLLM's, a tokenizer the original "
    "does not read, ...) is refused before anything is written, naming the field. Pickled files hold tensors and "
    "plain containers only (torch.load(weights_only=True) reads them); the folder appears whole or not at all.\n\n"
    "What each format writes:\n\n"
    + "\n".join(f"- {name}: {converter.exported}" for name, converter in CONVERTERS.items()),
)
"""What `minitf export original --help` says."""

__all__ = ["CONVERTERS", "ORIGINAL_EXPORT", "ORIGINAL_FORMAT_FIELD", "Converter", "OriginalExport"]
