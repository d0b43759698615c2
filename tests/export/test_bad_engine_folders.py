"""Bad input, one row each: engine export folders (CTranslate2, ONNX) that were tampered with. Each row copies a real
tiny export, breaks one thing and runs the command on it: exit 2 and one line naming the folder and the field or
file, never a traceback, and never a file from outside the folder (see docs/security.md)."""

import json
import shutil
from pathlib import Path

import pytest
from bad_inputs import (
    CommandFailed,
    bad,
    bad_input_tests,
    minitf,
    native_gpt_folder,
    write,
)
from factories import ctranslate2_export, onnx_export, onnx_gpt_export, onnx_translator_export

CT2_ENCODER = ("ctranslate2", "encoder")
CT2_GPT = ("ctranslate2", "gpt")
CT2_SEQ2SEQ = ("ctranslate2", "seq2seq")
ONNX_ENCODER = ("onnx", "encoder")
ONNX_GPT = ("onnx", "gpt")
ONNX_SEQ2SEQ = ("onnx", "seq2seq")
COMMANDS = {
    CT2_ENCODER: "embed",
    CT2_GPT: "generate",
    CT2_SEQ2SEQ: "translate",
    ONNX_ENCODER: "embed",
    ONNX_GPT: "generate",
    ONNX_SEQ2SEQ: "translate",
}
TEXT = {"generate": "the qu", "translate": "the cat sat", "embed": "the quick brown fox"}


def export_of(which: tuple[str, str]) -> Path:
    """The real tiny export `which` (made once per test process)."""
    return {
        CT2_ENCODER: lambda: ctranslate2_export("encoder", "miniembed"),
        CT2_GPT: lambda: ctranslate2_export("gpt", "learned"),
        CT2_SEQ2SEQ: lambda: ctranslate2_export("seq2seq", "layer_norm"),
        ONNX_ENCODER: lambda: onnx_export(),
        ONNX_GPT: lambda: onnx_gpt_export("learned"),
        ONNX_SEQ2SEQ: lambda: onnx_translator_export(),
    }[which]()


def tampered(which: tuple[str, str], edit, command: str | None = None, *texts: str):
    """A row's action: copy the export `which` to `tmp/export`, `edit(folder, tmp)` it, run `minitf COMMAND` on it."""

    def action(tmp: Path) -> None:
        folder = tmp / "export"
        shutil.copytree(export_of(which), folder, symlinks=True)
        edit(folder, tmp)
        name = command or COMMANDS[which]
        minitf(name, folder, *(texts or ([TEXT[name]] if name != "info" else [])))

    return action


def metadata(**changes):
    """An edit of minitf_export.json: each change sets a field (None removes it)."""

    def edit(folder: Path, tmp: Path) -> None:
        info = json.loads((folder / "minitf_export.json").read_text())
        info.update(changes)
        (folder / "minitf_export.json").write_text(json.dumps({k: v for k, v in info.items() if v is not None}))

    return edit


def json_file(name: str, change):
    """An edit of the folder's JSON file `name`: `change(value)` returns what it then holds."""

    def edit(folder: Path, tmp: Path) -> None:
        (folder / name).write_text(json.dumps(change(json.loads((folder / name).read_text()))))

    return edit


def cut(name: str, keep: float = 0.5):
    def edit(folder: Path, tmp: Path) -> None:
        data = (folder / name).read_bytes()
        (folder / name).write_bytes(data[: int(len(data) * keep)])

    return edit


def moved_out(name: str):
    """An edit replacing the folder's `name` with a link to a copy of it outside the folder."""

    def edit(folder: Path, tmp: Path) -> None:
        outside = tmp / "outside" / Path(name).name
        outside.parent.mkdir(exist_ok=True)
        shutil.move(folder / name, outside)
        (folder / name).symlink_to(outside)

    return edit


def default_file_outside(absolute: bool):
    """An edit pointing default_file at a working copy of the graph outside the folder (it ran: exit 0)."""

    def edit(folder: Path, tmp: Path) -> None:
        (tmp / "outside").mkdir()
        shutil.copy(folder / "onnx/model_quantized.onnx", tmp / "outside/model.onnx")
        target = str(tmp / "outside/model.onnx") if absolute else "../outside/model.onnx"
        metadata(default_file=target)(folder, tmp)

    return edit


def external_data_at(location_of):
    """An edit moving the graph's weights to external data outside the folder, its location `location_of(tmp)`
    (ONNX Runtime then refused it with a traceback)."""

    def edit(folder: Path, tmp: Path) -> None:
        import onnx
        from onnx.external_data_helper import convert_model_to_external_data

        graph = folder / "onnx/model_quantized.onnx"
        model = onnx.load(str(graph))
        convert_model_to_external_data(model, all_tensors_to_one_file=True, location="weights.data")
        onnx.save(model, str(graph))
        (tmp / "outside").mkdir()
        shutil.move(folder / "onnx/weights.data", tmp / "outside/weights.data")
        model = onnx.load(str(graph), load_external_data=False)
        for tensor in model.graph.initializer:
            for entry in tensor.external_data:
                if entry.key == "location":
                    entry.value = location_of(tmp)
        onnx.save(model, str(graph))

    return edit


def extra_token(folder: Path, tmp: Path) -> None:
    """Add to tokenizer.json a token whose id lies past the model's embedding table."""
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    new_id = max(entry["id"] for entry in tokenizer["added_tokens"]) + 100
    tokenizer["added_tokens"].append(
        {"id": new_id, "content": "<far>", "single_word": False, "lstrip": False, "rstrip": False}
        | {"normalized": False, "special": False}
    )
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))


def more_words(tokenizer: dict) -> dict:
    """A word-level tokenizer file's vocabulary with five more words, at ids past its last."""
    vocabulary = tokenizer["model"]["vocab"]
    vocabulary |= {f"extra{index}": len(vocabulary) + index for index in range(5)}
    return tokenizer


def native_with_metadata_of(which: tuple[str, str]):
    """A row's action: a native GPT export (no engine files) given the minitf_export.json of the export `which`."""

    def action(tmp: Path) -> None:
        folder = native_gpt_folder(tmp)
        shutil.copy(export_of(which) / "minitf_export.json", folder / "minitf_export.json")
        minitf("generate", folder, "abc")

    return action


AGAIN = "export the model again with minitf export"
OUT = "a folder's files may name only files inside it"
BAD_INPUTS = [
    # Paths: whatever the folder names must stay inside it.
    bad(
        "embed-default-file-out-of-the-folder",
        tampered(ONNX_ENCODER, default_file_outside(absolute=False)),
        CommandFailed,
        rf"exit 2: minitf embed: error: .*export: minitf_export.json's default_file is '../outside/model.onnx', a "
        rf"path out of the folder; {OUT}",
    ),
    bad(
        "embed-default-file-absolute",
        tampered(ONNX_ENCODER, default_file_outside(absolute=True)),
        CommandFailed,
        rf"exit 2: .*export: minitf_export.json's default_file is '/.*outside/model.onnx', an absolute path; {OUT}",
    ),
    bad(
        "info-default-file-out-of-the-folder",
        tampered(ONNX_ENCODER, metadata(default_file="../../model.onnx"), "info"),
        CommandFailed,
        r"exit 2: minitf info: error: .*export: minitf_export.json's default_file is '../../model.onnx', a path out",
    ),
    bad(
        "generate-files-entry-out-of-the-folder",
        tampered(ONNX_GPT, metadata(files=["onnx/model.onnx", "../elsewhere.onnx"])),
        CommandFailed,
        rf"exit 2: .*export: minitf_export.json's files is '../elsewhere.onnx', a path out of the folder; {OUT}",
    ),
    bad(
        "embed-external-data-out-of-the-folder",
        tampered(ONNX_ENCODER, external_data_at(lambda tmp: "../../outside/weights.data")),
        CommandFailed,
        r"exit 2: .*export: onnx/model_quantized.onnx's external data location of tensor \S+ is "
        rf"'../../outside/weights.data', a path out of the folder; {OUT}",
    ),
    bad(
        "embed-external-data-absolute",
        tampered(ONNX_ENCODER, external_data_at(lambda tmp: str(tmp / "outside/weights.data"))),
        CommandFailed,
        r"exit 2: .*export: onnx/model_quantized.onnx's external data location of tensor \S+ is '/.*weights.data', "
        r"an absolute path",
    ),
    bad(
        "embed-tokenizer-linked-out-of-the-folder",
        tampered(ONNX_ENCODER, moved_out("tokenizer.json")),
        CommandFailed,
        r"exit 2: minitf embed: error: .*export holds links to files outside it \(tokenizer.json -> "
        r"/.*outside/tokenizer.json\); an export runs only its own files",
    ),
    bad(
        "translate-vocabulary-linked-out-of-the-folder",
        tampered(CT2_SEQ2SEQ, moved_out("target_vocabulary.json")),
        CommandFailed,
        r"exit 2: minitf translate: error: .*export holds links to files outside it \(target_vocabulary.json -> ",
    ),
    bad(
        "generate-export-file-linked-out-of-the-folder",
        tampered(CT2_GPT, moved_out("minitf_export.json")),
        CommandFailed,
        r"exit 2: .*export: the file 'minitf_export.json' links to /.*outside/minitf_export.json, outside the folder",
    ),
    # The metadata: its fields, their types and values, checked in one place.
    bad(
        "generate-ctranslate2-no-max-positions",
        tampered(CT2_GPT, metadata(max_position_embeddings=None)),
        CommandFailed,
        rf"exit 2: .*export/minitf_export.json has no max_position_embeddings, which a generator export has; {AGAIN}",
    ),
    bad(
        "generate-onnx-max-positions-a-string",
        tampered(ONNX_GPT, metadata(max_position_embeddings="64")),
        CommandFailed,
        r"exit 2: .*export/minitf_export.json: max_position_embeddings is \"64\", not a positive integer",
    ),
    bad(
        "embed-default-file-a-number",
        tampered(ONNX_ENCODER, metadata(default_file=5)),
        CommandFailed,
        r"exit 2: .*export/minitf_export.json: default_file is 5, not a string",
    ),
    bad(
        "generate-position-type-unknown",
        tampered(CT2_GPT, metadata(position_embedding_type="alibi")),
        CommandFailed,
        r"exit 2: .*export/minitf_export.json: position_embedding_type is 'alibi', not one of learned, rope",
    ),
    # A swapped kind: metadata that does not match the files.
    bad(
        "generate-encoder-export-said-generator",
        tampered(ONNX_ENCODER, metadata(kind="generator", max_position_embeddings=24), "generate"),
        CommandFailed,
        r"exit 2: .*export/minitf_export.json: family 'minitf_encoder' does not make a generator export",
    ),
    bad(
        "generate-encoder-export-said-gpt",
        tampered(ONNX_ENCODER, metadata(kind="generator", family="minitf_gpt", max_position_embeddings=24), "generate"),
        CommandFailed,
        r"exit 2: .*export/onnx/model_quantized.onnx has no input position_ids, which the graph of an ONNX generator "
        r"has: its minitf_export.json says kind 'generator', which does not match the graph",
    ),
    bad(
        "translate-gpt-export-said-seq2seq",
        tampered(CT2_GPT, metadata(kind="translator", family="minitf_seq2seq"), "translate"),
        CommandFailed,
        r"exit 2: .*export: its minitf_export.json says it is a ctranslate2 translator export, but it has no "
        r"source_vocabulary.json, which such an export holds",
    ),
    bad(
        "generate-seq2seq-export-said-gpt",
        tampered(CT2_SEQ2SEQ, metadata(kind="generator", family="minitf_gpt"), "generate"),
        CommandFailed,
        r"exit 2: .*export: its minitf_export.json says it is a ctranslate2 generator export, but it has no "
        r"vocabulary.json",
    ),
    bad(
        "generate-native-folder-with-ctranslate2-metadata",
        native_with_metadata_of(CT2_GPT),
        CommandFailed,
        r"exit 2: .*native: its minitf_export.json says it is a ctranslate2 generator export, but it has no "
        r"model.bin, .*if this is a model folder, remove minitf_export.json",
    ),
    bad(
        "generate-native-folder-with-onnx-metadata",
        native_with_metadata_of(ONNX_GPT),
        CommandFailed,
        r"exit 2: .*native: its minitf_export.json says it is an onnxruntime generator export, but it has no "
        r"onnx/model.onnx",
    ),
    bad(
        "embed-ctranslate2-model-bin-missing",
        tampered(CT2_ENCODER, lambda folder, tmp: (folder / "model.bin").unlink()),
        CommandFailed,
        r"exit 2: .*export: its minitf_export.json says it is a ctranslate2 embedder export, but it has no "
        r"model.bin, which such an export holds",
    ),
    bad(
        "embed-ctranslate2-max-positions-a-string",
        tampered(CT2_ENCODER, metadata(max_position_embeddings="24")),
        CommandFailed,
        r"exit 2: .*export/minitf_export.json: max_position_embeddings is \"24\", not a positive integer",
    ),
    bad(
        "translate-onnx-decoder-graph-missing",
        tampered(ONNX_SEQ2SEQ, lambda folder, tmp: (folder / "onnx/decoder_with_past_model.onnx").unlink()),
        CommandFailed,
        r"exit 2: .*export: its minitf_export.json says it is an onnxruntime translator export, but it has no "
        r"onnx/decoder_with_past_model.onnx, which such an export holds",
    ),
    bad(
        "translate-onnx-decoder-graph-without-its-inputs",
        tampered(
            ONNX_SEQ2SEQ,
            lambda folder, tmp: shutil.copy(folder / "onnx/encoder_model.onnx", folder / "onnx/decoder_model.onnx"),
        ),
        CommandFailed,
        r"exit 2: .*export/onnx/decoder_model.onnx has no input encoder_attention_mask, encoder_hidden_states, "
        r"which the graph of an ONNX translator has",
    ),
    bad(
        "translate-onnx-no-end-token",
        tampered(ONNX_SEQ2SEQ, json_file("generation_config.json", lambda config: {**config, "eos_token_id": None})),
        CommandFailed,
        r"exit 2: .*export/generation_config.json must hold eos_token_id and one decoder_start_token_id",
    ),
    # Vocabularies shorter than the tokenizer: ids past the model's embedding.
    bad(
        "translate-onnx-target-vocabulary-past-the-decoder",
        tampered(ONNX_SEQ2SEQ, json_file("target_tokenizer.json", more_words)),
        CommandFailed,
        r"exit 2: .*export: the tokenizer has \d+ tokens but onnx/decoder_model.onnx holds a vocabulary of \d+",
    ),
    *(
        bad(
            f"{COMMANDS[which]}-ctranslate2-vocabulary-cut",
            tampered(which, json_file("vocabulary.json", lambda tokens: tokens[:5])),
            CommandFailed,
            r"exit 2: .*export: the tokenizer has \d+ tokens but vocabulary.json holds a vocabulary of 5, so some "
            r"token ids lie past the model's",
        )
        for which in (CT2_ENCODER, CT2_GPT)
    ),
    bad(
        "translate-source-vocabulary-cut",
        tampered(CT2_SEQ2SEQ, json_file("source_vocabulary.json", lambda tokens: tokens[:5])),
        CommandFailed,
        r"exit 2: .*export: the tokenizer has \d+ tokens but source_vocabulary.json holds a vocabulary of 5",
    ),
    bad(
        "generate-onnx-token-past-the-embedding",
        tampered(ONNX_GPT, extra_token, None, "the <far>"),
        CommandFailed,
        r"exit 2: .*export: the tokenizer has \d+ tokens but onnx/model.onnx holds a vocabulary of \d+",
    ),
    # Files cut short or of the wrong JSON type.
    *(
        bad(
            f"{COMMANDS[which]}-ctranslate2-model-bin-cut",
            tampered(which, cut("model.bin")),
            CommandFailed,
            rf"exit 2: .*export: CTranslate2 cannot load model.bin \(.*\); {AGAIN}",
        )
        for which in (CT2_GPT, CT2_ENCODER)
    ),
    bad(
        "generate-onnx-graph-cut",
        tampered(ONNX_GPT, cut("onnx/model.onnx", 0.3)),
        CommandFailed,
        r"exit 2: .*export/onnx/model.onnx is not an ONNX model \(",
    ),
    bad(
        "generate-ctranslate2-tokenizer-cut",
        tampered(CT2_GPT, cut("tokenizer.json")),
        CommandFailed,
        rf"exit 2: .*export/tokenizer.json is not JSON \(.*\); {AGAIN}",
    ),
    bad(
        "embed-tokenizer-a-list",
        tampered(ONNX_ENCODER, lambda folder, tmp: write(folder / "tokenizer.json", "[1]")),
        CommandFailed,
        r"exit 2: .*export/tokenizer.json holds a JSON array, not an object",
    ),
    bad(
        "generate-generation-config-a-list",
        tampered(CT2_GPT, lambda folder, tmp: write(folder / "generation_config.json", "[1]")),
        CommandFailed,
        r"exit 2: .*export/generation_config.json holds a JSON array, not an object",
    ),
    bad(
        "generate-onnx-eos-a-string",
        tampered(ONNX_GPT, json_file("generation_config.json", lambda config: {**config, "eos_token_id": "2"})),
        CommandFailed,
        r"exit 2: .*export/generation_config.json: eos_token_id is \"2\", not a token id or a list of token ids",
    ),
    bad(
        "embed-max-seq-length-a-string",
        tampered(
            ONNX_ENCODER, json_file("sentence_bert_config.json", lambda config: {**config, "max_seq_length": "8"})
        ),
        CommandFailed,
        r"exit 2: .*export/sentence_bert_config.json: max_seq_length is \"8\", not a positive integer",
    ),
]


test_bad_input_is_refused_naming_the_problem, test_ids_are_unique = bad_input_tests(BAD_INPUTS)


@pytest.mark.parametrize(
    "which", [CT2_ENCODER, CT2_GPT, CT2_SEQ2SEQ, ONNX_ENCODER, ONNX_GPT, ONNX_SEQ2SEQ], ids="-".join
)
def test_the_untampered_copies_run(tmp_path, which):
    """The rows' starting point: each copied export runs, so what a row refuses is what it broke."""
    tampered(which, lambda folder, tmp: None)(tmp_path)


def test_info_shows_a_link_out_of_the_folder_without_following_it(tmp_path, capsys):
    folder = tmp_path / "export"
    shutil.copytree(export_of(CT2_GPT), folder)
    moved_out("vocabulary.json")(folder, tmp_path)
    minitf("info", folder)
    listed = [line.strip() for line in capsys.readouterr().out.splitlines() if "vocabulary.json" in line]
    assert listed == [f"vocabulary.json (a link to {tmp_path / 'outside/vocabulary.json'}, outside the folder)"]
