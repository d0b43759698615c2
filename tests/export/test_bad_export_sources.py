"""Bad input, one row each: `minitf export` meeting source folders that are not what they claim (a vocab_size below
the tokenizer's, a truncated or non-object JSON file, a tokenizer claiming more entries than any vocabulary has) and
a disk that fills up while the export is written. Each ends in exit 2 and one line naming the file or folder and what
is wrong, and leaves nothing half-written."""

import errno
import json
import re
from pathlib import Path

import pytest
from bad_inputs import CommandFailed, bad, bad_input_tests, char_gpt_folder, minitf, refused_arguments, write
from factories import DATA, convert_miniembed_fixture, make_encoder, make_seq2seq, write_hkproj_tokenizers
from helpers import llama_cpp_hidden
from safetensors import SafetensorError

import hf_minitf.export.source as source_module
from hf_minitf import MiniTFEncoderModel, MiniTFGPTForCausalLM, MiniTFSeq2SeqForConditionalGeneration

MODEL_CLASSES = {
    "minitf_gpt": MiniTFGPTForCausalLM,
    "minitf_encoder": MiniTFEncoderModel,
    "minitf_seq2seq": MiniTFSeq2SeqForConditionalGeneration,
}
OUT = {"gguf": "out.gguf"}  # the other formats write a folder, `out`


def without_llama_cpp(action, *args) -> None:
    """`action(*args)` with llama-cpp-python unimportable (`helpers.llama_cpp_hidden`)."""
    with llama_cpp_hidden():
        action(*args)


def smaller(folder: Path, **shrink: int) -> Path:
    """`folder`'s model saved again with each config field of `shrink` (a vocabulary size) made that much smaller,
    so that its tokenizer emits ids past the embedding."""
    model_class = MODEL_CLASSES[json.loads((folder / "config.json").read_text())["model_type"]]
    config = model_class.config_class.from_pretrained(folder)
    for field, by in shrink.items():
        setattr(config, field, getattr(config, field) - by)
    model_class(config).save_pretrained(folder)
    return folder


def gpt(tmp: Path, **shrink: int) -> Path:
    """The char GPT of "abc " (8 tokens, vocab_size 8), `smaller` by `shrink`."""
    return smaller(char_gpt_folder(tmp), **shrink)


def encoder(tmp: Path, **shrink: int) -> Path:
    return smaller(make_encoder(tmp / "encoder"), **shrink)


def seq2seq(tmp: Path, **shrink: int) -> Path:
    return smaller(make_seq2seq(tmp / "seq2seq"), **shrink)


def edited(folder: Path, name: str, edit) -> Path:
    """`folder` with its file `name` replaced by `edit(text)`."""
    write(folder / name, edit((folder / name).read_text(encoding="utf-8")))
    return folder


def halved(text: str) -> str:
    return text[: len(text) // 2]


def with_merges(count: int):
    def edit(text: str) -> str:
        data = json.loads(text)
        data["model"]["merges"] = ["a b"] * count
        return json.dumps(data)

    return edit


# A chat template writing a header once, before the first message: no per-role wrapping, no exact Ollama TEMPLATE.
HEADER_TEMPLATE = "chat:{% for m in messages %}{{ m['content'] }}\n{% endfor %}"

# A chat template changing each message (the issue's): Ollama's {{ .Content }} would pass it unchanged.
CHANGING_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] + ': ' + m['content'] | replace('a', 'b') | upper }}\n{% endfor %}"
)


def with_chat_template(template: str):
    def edit(text: str) -> str:
        return json.dumps({**json.loads(text), "chat_template": template})

    return edit


def export(fmt: str, source: Path, tmp: Path) -> None:
    minitf("export", fmt, source, tmp / OUT.get(fmt, "out"))


def limited(limit: int, action):
    """`action` with TOKENIZER_MAX_ENTRIES lowered to `limit` (the real bound is far above these tiny tokenizers)."""

    def run(tmp: Path) -> None:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(source_module, "TOKENIZER_MAX_ENTRIES", limit)
            action(tmp)

    return run


NO_SPACE = OSError(errno.ENOSPC, "No space left on device", "model.safetensors")
# How the Rust-backed safetensors and numpy's tofile (the ONNX and GGUF weights) report a full disk.
SAFETENSORS_NO_SPACE = SafetensorError(
    'Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "No space left on device" })'
)
SHORT_WRITE = OSError("49152 requested and 464 written")


def no_space(*args, **kwargs):
    raise NO_SPACE


def disk_full(target: str, action, error: BaseException = NO_SPACE):
    """`action` with `target` (module.function, a writer the export calls inside its output folder) raising
    `error`, as a full disk does."""

    def full(*args, **kwargs):
        raise error

    def run(tmp: Path) -> None:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(target, full)
            action(tmp)
        assert not (tmp / "out").exists() and not (tmp / "out.gguf").exists(), "a disk-full export left its output"
        assert not list(tmp.glob(".out*")), "a disk-full export left a partial file"

    return run


def too_small(fmt: str, size: int = 8, by: int = 2) -> str:
    return (
        rf"exit 2: minitf export {fmt}: error: .*chars: the tokenizer has {size} tokens \(added tokens included\) but config.json's "
        rf"vocab_size is {size - by}; ids {size - by} to {size - 1} "
    )


MODELS = {"gpt": (gpt, "chars"), "encoder": (encoder, "encoder"), "seq2seq": (seq2seq, "seq2seq")}  # maker, folder
BREAKS = {  # how a JSON file is broken: the edit, and what the refusal says of the file
    "truncated": (halved, r"is not JSON \(.*\); "),
    "a-list": (lambda text: "[]", "holds a JSON array, not an object"),
    "a-string": (lambda text: '"x"', "holds a JSON string, not an object"),
}


def broken_json(fmt: str, model: str, name: str, how: str):
    """A row: `minitf export FMT` of a `model` (MODELS) whose JSON file `name` is broken `how` (BREAKS), refused
    naming the file and what is wrong with it."""
    make, folder = MODELS[model]
    edit, problem = BREAKS[how]
    return bad(
        f"{fmt}-{model}-{name.replace('/', '-')}-{how}",
        lambda tmp: export(fmt, edited(make(tmp), name, edit), tmp),
        CommandFailed,
        rf"exit 2: minitf export {fmt}: error: .*{folder}/{re.escape(name)} {problem}",
    )


def disk_full_export(fmt: str, model: str, writer: str, error: BaseException):
    """A row: `minitf export FMT` of a `model` (MODELS) while `writer` (module.function) fails with `error`, as it
    does on a full disk: refused naming the output, nothing written."""
    make, _ = MODELS[model]
    return bad(
        f"{fmt}-{model}-disk-full",
        disk_full(writer, lambda tmp: export(fmt, make(tmp), tmp), error),
        CommandFailed,
        rf"exit 2: minitf export {fmt}: error: the disk is full \(No space left on device\): nothing was written to "
        rf"OUT [^ ]*/{re.escape(OUT.get(fmt, 'out'))}; free some space there and run again",
    )


def vocab_below_tokenizer(fmt: str, model: str, by: int, field: str = "vocab_size", side: str = ""):
    """A row: `minitf export FMT` of a `model` (MODELS) whose config `field` is `by` below its tokenizer's size (the
    `side` one of a seq2seq: source, target), refused naming both sizes and the folder."""
    make, folder = MODELS[model]
    tokenizer = rf"{side} tokenizer \({side}_tokenizer.json\)" if side else "tokenizer"
    return bad(
        f"{fmt}-{model}-{field.replace('_', '-')}-below-{side + '-' if side else ''}tokenizer",
        lambda tmp: export(fmt, make(tmp, **{field: by}), tmp),
        CommandFailed,
        rf"exit 2: minitf export {fmt}: error: .*{folder}: the {tokenizer} has \d+ tokens \(added tokens included\) "
        rf"but config.json's {field} is \d+",
    )


BAD_INPUTS = [
    # 1. vocab_size smaller than the tokenizer: every export refuses it, naming both sizes and the folder.
    *(
        bad(
            f"{fmt}-gpt-vocab-size-below-tokenizer",
            lambda tmp, fmt=fmt: export(fmt, gpt(tmp, vocab_size=2), tmp),
            CommandFailed,
            too_small(fmt),
        )
        for fmt in ("native", "gguf", "ollama", "ctranslate2", "onnx", "web")
    ),
    *(vocab_below_tokenizer(fmt, "encoder", 3) for fmt in ("native", "ctranslate2", "gguf")),
    vocab_below_tokenizer("ctranslate2", "seq2seq", 1, "src_vocab_size", "source"),
    *(vocab_below_tokenizer(fmt, "seq2seq", 1, side="target") for fmt in ("ctranslate2", "native")),
    # 2. JSON files that are cut off or not objects: the file and what is wrong, no traceback.
    broken_json("native", "gpt", "tokenizer.json", "truncated"),
    broken_json("gguf", "gpt", "tokenizer.json", "a-list"),
    broken_json("onnx", "gpt", "tokenizer.json", "a-string"),
    broken_json("native", "gpt", "tokenizer_config.json", "a-list"),
    broken_json("ctranslate2", "seq2seq", "source_tokenizer.json", "truncated"),
    broken_json("native", "seq2seq", "target_tokenizer.json", "truncated"),
    broken_json("onnx", "encoder", "modules.json", "truncated"),
    broken_json("gguf", "encoder", "modules.json", "truncated"),
    broken_json("onnx", "encoder", "1_Pooling/config.json", "a-list"),
    broken_json("ctranslate2", "encoder", "1_Pooling/config.json", "a-list"),
    bad(
        "native-config-a-string",
        lambda tmp: export("native", edited(gpt(tmp), "config.json", lambda text: '"x"'), tmp),
        CommandFailed,
        r"exit 2: minitf export native: error: .*chars/config.json holds a JSON string, not an object of config "
        r"fields",
    ),
    # GGUF types and Ollama templates: what the export cannot write exactly is refused before anything is written.
    bad(
        "gguf-unknown-dtype",
        lambda tmp: refused_arguments("export", "gguf", gpt(tmp), tmp / "out.gguf", "--dtype", "q3_k_s"),
        CommandFailed,
        r"exit 2: .*argument --dtype: invalid choice: 'q3_k_s'",
    ),
    bad(
        "gguf-k-quant-the-gguf-package-cannot-write",
        lambda tmp: without_llama_cpp(
            minitf, "export", "gguf", char_gpt_folder(tmp, hidden_size=256), tmp / "out.gguf", "--dtype", "q6_k"
        ),
        CommandFailed,
        r"exit 2: minitf export gguf: error: cannot export to GGUF at q6_k: \d+ tensor\(s\) \(first token_embd.weight\) "
        r"take Q6_K, which the gguf package [\d.]+ cannot quantize; install llama.cpp's quantizer "
        r'\(pip install "hf-minitf\[llama\]"\) and export again, or choose q8_0, .*\.\n$',
    ),
    bad(
        "gguf-agreement-text-missing",
        lambda tmp: minitf("export", "gguf", gpt(tmp), tmp / "out.gguf", "--agreement-text", tmp / "none.txt"),
        CommandFailed,
        r"exit 2: minitf export gguf: error: --agreement-text .*none.txt: no such file; give a UTF-8 text file",
    ),
    bad(
        "gguf-agreement-text-without-prompts",
        lambda tmp: minitf(
            "export", "gguf", gpt(tmp), tmp / "out.gguf", "--agreement-text", write(tmp / "short.txt", "ab\nc\n")
        ),
        CommandFailed,
        r"exit 2: minitf export gguf: error: the agreement text has no line of 4 tokens or more; give text with one "
        r"prompt per line\.\n$",
    ),
    bad(
        "ollama-chat-template-not-wrapping-by-role",
        lambda tmp: export(
            "ollama", edited(gpt(tmp), "tokenizer_config.json", with_chat_template(HEADER_TEMPLATE)), tmp
        ),
        CommandFailed,
        r"exit 2: minitf export ollama: error: cannot translate the tokenizer's chat template to an Ollama TEMPLATE: "
        r"it writes user otherwise than message by message; .*Write the Modelfile's TEMPLATE by hand",
    ),
    bad(
        "ollama-chat-template-changing-each-message",
        lambda tmp: export(
            "ollama", edited(gpt(tmp), "tokenizer_config.json", with_chat_template(CHANGING_TEMPLATE)), tmp
        ),
        CommandFailed,
        r"exit 2: minitf export ollama: error: cannot translate the tokenizer's chat template to an Ollama TEMPLATE: "
        r"it changes each message's content \(\| replace, \| upper\), where Ollama's \{\{ \.Content \}\} passes it "
        r"unchanged; .*Write the Modelfile's TEMPLATE by hand",
    ),
    bad(
        "ollama-encoder",
        lambda tmp: export("ollama", encoder(tmp), tmp),
        CommandFailed,
        r"exit 2: minitf export ollama: error: cannot export to Ollama: model_type='minitf_encoder'",
    ),
    bad(
        "onnx-encoder-pooling-path-outside",
        lambda tmp: export(
            "onnx",
            edited(encoder(tmp), "modules.json", lambda text: text.replace('"1_Pooling"', '"../../outside"')),
            tmp,
        ),
        CommandFailed,
        r"exit 2: minitf export onnx: error: .*encoder: modules.json's Pooling path is '../../outside', a path out of "
        r"the folder",
    ),
    # 3. A tokenizer file claiming more entries than any vocabulary has: refused before any per-entry work.
    bad(
        "native-tokenizer-vocab-over-limit",
        limited(5, lambda tmp: export("native", gpt(tmp), tmp)),
        CommandFailed,
        r"exit 2: minitf export native: error: .*chars/tokenizer.json: its model's vocab holds 8 entries, more than "
        r"the 5 any real tokenizer has",
    ),
    bad(
        "gguf-tokenizer-merges-over-limit",
        limited(10, lambda tmp: export("gguf", edited(gpt(tmp), "tokenizer.json", with_merges(11)), tmp)),
        CommandFailed,
        r"chars/tokenizer.json: its model's merges holds 11 entries, more than the 10 any real tokenizer has",
    ),
    bad(
        "ctranslate2-source-tokenizer-vocab-over-limit",
        limited(5, lambda tmp: export("ctranslate2", seq2seq(tmp), tmp)),
        CommandFailed,
        r"seq2seq/source_tokenizer.json: its model's vocab holds \d+ entries, more than the 5",
    ),
    # 4. A full disk (the writer failing as each reports it): the output named, nothing written.
    disk_full_export("native", "gpt", "hf_minitf.export.native.save_file", NO_SPACE),
    disk_full_export("native", "seq2seq", "hf_minitf.export.native_seq2seq.save_file", NO_SPACE),
    disk_full_export("native", "encoder", "hf_minitf.export.native.save_file", SAFETENSORS_NO_SPACE),
    disk_full_export("gguf", "gpt", "gguf.GGUFWriter.write_tensors_to_file", SHORT_WRITE),
    disk_full_export("gguf", "encoder", "gguf.GGUFWriter.write_tensors_to_file", SHORT_WRITE),
    disk_full_export("onnx", "encoder", "hf_minitf.export.onnx.export_encoder_graph", SHORT_WRITE),
    disk_full_export("onnx", "gpt", "hf_minitf.export.onnx_decoder.export_decoder_graph", NO_SPACE),
    disk_full_export("web", "gpt", "hf_minitf.export.onnx_decoder.export_decoder_graph", NO_SPACE),
]


def converted(tmp: Path, fixture: str) -> Path:
    """The fixture `fixture` of tests/data converted (FrawdLLM with a chat tokenizer), into `tmp / "converted"`."""
    from helpers import write_frawdllm_tokenizer

    from hf_minitf.conversion import convert_char_gpt, convert_frawdllm, convert_hkproj

    out, data = tmp / "converted", DATA / fixture
    if fixture == "char_gpt":
        convert_char_gpt(data / "checkpoint.pt", out, vocab=data / "vocab.json", original_config=data / "config.json")
    elif fixture.startswith("frawdllm"):
        tokenizer = write_frawdllm_tokenizer(tmp / "tokenizer.json", chat=True)
        convert_frawdllm(data / "checkpoint.pt", out, tokenizer=tokenizer)
    elif fixture == "minitf_embedding":
        convert_miniembed_fixture(out)
    else:
        write_hkproj_tokenizers(tmp)
        convert_hkproj(
            data / "checkpoint.pt",
            out,
            source_tokenizer=tmp / "tokenizer_en.json",
            target_tokenizer=tmp / "tokenizer_it.json",
            config=data / "config.json",
            norm_type="scalar_std_times_eps",  # untrained: gains near 1 do not tell the formula
        )
    return out


def with_config(**fields):
    def edit(text: str) -> str:
        return json.dumps({**json.loads(text), **fields})

    return edit


def not_original(fixture: str, name: str, edit, field: str, project: str):
    """A row: `minitf export original` of the converted `fixture` whose file `name` is changed by `edit` into what its
    original project cannot compute, refused naming `field` (and nothing written)."""
    return bad(
        f"original-{fixture.replace('_', '-')}-{field.replace('_', '-')}",
        lambda tmp: minitf("export", "original", edited(converted(tmp, fixture), name, edit), tmp / "out"),
        CommandFailed,
        rf"exit 2: minitf export original: error: {project} cannot express {field}",
    )


ORIGINAL_BAD_INPUTS = [
    # 5. Back to an original project: what its code cannot compute, refused naming the field, nothing written.
    not_original(
        "char_gpt", "config.json", with_config(hidden_act="gelu_new"), "hidden_act", "nanoGPT-style character GPT"
    ),
    not_original(
        "char_gpt", "config.json", with_config(layer_norm_eps=1e-6), "layer_norm_eps", "nanoGPT-style character GPT"
    ),
    not_original(
        "char_gpt",
        "config.json",
        with_config(attention_dropout=0.3),
        "attention_dropout",
        "nanoGPT-style character GPT",
    ),
    not_original("frawdllm_rope", "config.json", with_config(rope_interleaved=False), "rope_interleaved", "FrawdLLM"),
    not_original("frawdllm_rope", "config.json", with_config(rope_theta=500000.0), "rope_theta", "FrawdLLM"),
    not_original(
        "frawdllm_rope", "config.json", with_config(max_position_embeddings=62), "max_position_embeddings", "FrawdLLM"
    ),
    not_original(
        "frawdllm_rope", "chat_template.jinja", lambda text: HEADER_TEMPLATE, "this chat_template", "FrawdLLM"
    ),
    not_original(
        "minitf_embedding", "config.json", with_config(scale_embeddings=False), "scale_embeddings", "MiniEmbed"
    ),
    not_original("minitf_embedding", "config.json", with_config(hidden_act="relu"), "hidden_act", "MiniEmbed"),
    not_original(
        "minitf_embedding", "tokenizer.json", with_config(normalizer=None), "this tokenizer's normalizer", "MiniEmbed"
    ),
    not_original(
        "seq2seq_transformer",
        "config.json",
        with_config(layer_norm_eps=1e-5),
        "layer_norm_eps",
        "hkproj pytorch-transformer",
    ),
    not_original(
        "seq2seq_transformer",
        "config.json",
        with_config(attention_mask_value=None),
        "attention_mask_value",
        "hkproj pytorch-transformer",
    ),
    not_original(
        "seq2seq_transformer",
        "config.json",
        with_config(output_log_softmax=False),
        "output_log_softmax",
        "hkproj pytorch-transformer",
    ),
    bad(
        "original-frawdllm-as-char-gpt",
        lambda tmp: minitf("export", "original", converted(tmp, "frawdllm_rope"), tmp / "out", "--format", "char-gpt"),
        CommandFailed,
        r"exit 2: minitf export original: error: nanoGPT-style character GPT cannot express "
        r"position_embedding_type='rope': it has learned positions \(wpe\) only",
    ),
    bad(
        "original-frawdllm-learned-as-char-gpt",
        lambda tmp: minitf(
            "export", "original", converted(tmp, "frawdllm_learned"), tmp / "out", "--format", "char-gpt"
        ),
        CommandFailed,
        r"exit 2: minitf export original: error: .*converted/tokenizer.json is no character list .*the char GPT reads "
        r"vocab.json, one character per id",
    ),
    bad(
        "original-encoder-as-hkproj",
        lambda tmp: minitf("export", "original", encoder(tmp), tmp / "out", "--format", "hkproj"),
        CommandFailed,
        r"exit 2: minitf export original: error: .*encoder is a encoder model; --format hkproj writes hkproj "
        r"pytorch-transformer's files from seq2seq models \(for encoder models: miniembed\)",
    ),
]

test_bad_export_source_is_refused_naming_the_problem, test_ids_are_unique = bad_input_tests(
    BAD_INPUTS + ORIGINAL_BAD_INPUTS
)


def test_disk_full_from_python_keeps_errno(tmp_path, monkeypatch):
    """From Python, a full disk stays an OSError with errno ENOSPC (callers that test errno keep working)."""
    from hf_minitf.export.native import export_native

    monkeypatch.setattr("hf_minitf.export.native.save_file", no_space)
    with pytest.raises(OSError, match=r"the disk is full .*nothing was written to the output folder") as error:
        export_native(gpt(tmp_path), tmp_path / "out")
    assert error.value.errno == errno.ENOSPC
    assert not (tmp_path / "out").exists()
