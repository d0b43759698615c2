"""Bad input, one row each: commands meeting folders they do not use: each names the folder, what it holds and the command that fits it."""

import json

from bad_inputs import (
    BAD_YAML_CARD,
    CommandFailed,
    bad,
    bad_input_tests,
    char_gpt_folder,
    engine_export,
    minitf,
    native_gpt_folder,
    saved_gpt,
    saved_model,
    with_safetensors_header,
    write,
)
from factories import make_seq2seq_source


def seq2seq_config_with_gpt_weights(tmp):
    """A seq2seq folder (config, tokenizer pair) whose model.safetensors is a GPT's."""
    import shutil

    folder = make_seq2seq_source(tmp / "seq2seq")
    shutil.copyfile(saved_model(tmp / "other", "gpt") / "model.safetensors", folder / "model.safetensors")
    return folder


BAD_INPUTS = [
    # Commands meeting folders they do not use: each names the folder, what it holds and the command that fits it.
    bad(
        "embed-gpt-folder",
        lambda tmp: minitf("embed", saved_model(tmp, "gpt"), "hi"),
        CommandFailed,
        r"exit 2: .*gpt holds a gpt model \(minitf_gpt, MiniTFGPTForCausalLM\); `minitf embed` needs an encoder "
        r"model: use `minitf generate`",
    ),
    bad(
        "embed-seq2seq-folder",
        lambda tmp: minitf("embed", saved_model(tmp, "seq2seq"), "hi"),
        CommandFailed,
        r"seq2seq holds a seq2seq model \(minitf_seq2seq, .*`minitf embed` needs an encoder model: use `minitf "
        r"translate`",
    ),
    bad(
        "embed-native-gpt-export",
        lambda tmp: minitf(
            "embed",
            saved_gpt(
                tmp,
                lambda folder: write(
                    folder / "config.json", json.dumps({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]})
                ),
            ),
            "hi",
        ),
        CommandFailed,
        r"holds a gpt model \(gpt2, GPT2LMHeadModel\); `minitf embed` needs an encoder model",
    ),
    bad(
        "generate-encoder-folder",
        lambda tmp: minitf("generate", saved_model(tmp, "encoder"), "hi"),
        CommandFailed,
        r"encoder holds an encoder model \(minitf_encoder, MiniTFEncoderModel\); `minitf generate` needs a gpt "
        r"model: use `minitf embed`",
    ),
    bad(
        "generate-seq2seq-folder",
        lambda tmp: minitf("generate", saved_model(tmp, "seq2seq"), "hi"),
        CommandFailed,
        r"`minitf generate` needs a gpt model: use `minitf translate`",
    ),
    bad(
        "translate-gpt-folder",
        lambda tmp: minitf("translate", saved_model(tmp, "gpt"), "hi"),
        CommandFailed,
        r"gpt holds a gpt model .*`minitf translate` needs a seq2seq model: use `minitf generate`",
    ),
    bad(
        "translate-seq2seq-config-gpt-weights",
        lambda tmp: minitf("translate", seq2seq_config_with_gpt_weights(tmp), "hi"),
        CommandFailed,
        r"exit 2: .*model.safetensors holds tensors named like a minitf_gpt model .* but config.json is "
        r"minitf_seq2seq",
    ),
    bad(
        "translate-encoder-folder",
        lambda tmp: minitf("translate", saved_model(tmp, "encoder"), "hi"),
        CommandFailed,
        r"`minitf translate` needs a seq2seq model: use `minitf embed`",
    ),
    bad(
        "generate-onnx-export",
        lambda tmp: minitf("generate", engine_export(tmp, "onnxruntime", "embedder", "minitf_encoder"), "hi"),
        CommandFailed,
        r"export is an onnxruntime embedder export of a minitf_encoder model, which `minitf generate` does not "
        r"run; use `minitf embed`",
    ),
    bad(
        "embed-ctranslate2-export",
        lambda tmp: minitf("embed", engine_export(tmp, "ctranslate2", "generator", "minitf_gpt"), "hi"),
        CommandFailed,
        r"a ctranslate2 generator export of a minitf_gpt model, which `minitf embed` does not run; use `minitf "
        r"generate`",
    ),
    bad(
        "info-gguf-file",
        lambda tmp: minitf("info", write(tmp / "model.gguf", "GGUF\x03")),
        CommandFailed,
        r"model.gguf is a GGUF file \(minitf export gguf\), which runs in llama.cpp or Ollama",
    ),
    bad(
        "info-config-not-json",
        lambda tmp: minitf("info", saved_gpt(tmp, lambda folder: write(folder / "config.json", "{hidden_size: 16"))),
        CommandFailed,
        r"exit 2: minitf info: error: .*config.json is not JSON \(Expecting property name.*save or convert",
    ),
    bad(
        "info-config-a-list",
        lambda tmp: minitf("info", saved_gpt(tmp, lambda folder: write(folder / "config.json", "[1, 2]"))),
        CommandFailed,
        r"config.json holds a JSON array, not an object",
    ),
    bad(
        "info-safetensors-not-json",
        lambda tmp: minitf("info", saved_gpt(tmp, with_safetensors_header(b"{not json"))),
        CommandFailed,
        r"model.safetensors is not a readable safetensors file \(.*invalid JSON",
    ),
    bad(
        "info-safetensors-header-a-list",
        lambda tmp: minitf("info", saved_gpt(tmp, with_safetensors_header(b"[1, 2]"))),
        CommandFailed,
        r"model.safetensors is not a readable safetensors file \(.*invalid type",
    ),
    bad(
        "info-safetensors-offsets-past-end",
        lambda tmp: minitf(
            "info",
            saved_gpt(
                tmp, with_safetensors_header(b'{"w": {"dtype": "F32", "shape": [400], "data_offsets": [0, 1600]}}')
            ),
        ),
        CommandFailed,
        r"model.safetensors is not a readable safetensors file \(.*file not fully covered",
    ),
    bad(
        "info-safetensors-unknown-dtype",
        lambda tmp: minitf(
            "info",
            saved_gpt(tmp, with_safetensors_header(b'{"w": {"dtype": "F99", "shape": [4], "data_offsets": [0, 16]}}')),
        ),
        CommandFailed,
        r"model.safetensors is not a readable safetensors file \(.*unknown variant `F99`",
    ),
    bad(
        "info-card-bad-yaml",
        lambda tmp: minitf("info", saved_gpt(tmp, lambda folder: write(folder / "README.md", BAD_YAML_CARD))),
        CommandFailed,
        r"exit 2: minitf info: error: .*README.md: its YAML metadata does not parse \(line 3, column 5: expected "
        r"',' or '\]'.*fix the lines between its --- markers",
    ),
    bad(
        "push-card-bad-yaml",
        lambda tmp: minitf(
            "push", saved_gpt(tmp, lambda folder: write(folder / "README.md", BAD_YAML_CARD)), "me/model"
        ),
        CommandFailed,
        r"exit 2: minitf push: error: .*gpt/README.md: its YAML metadata does not parse \(line 3",
    ),
    bad(
        "serve-incomplete-ctranslate2-export",
        lambda tmp: minitf("serve", engine_export(tmp, "ctranslate2", "generator", "minitf_gpt")),
        CommandFailed,
        r"exit 2: minitf serve: error: .*export: its minitf_export.json says it is a ctranslate2 generator export, but "
        r"it has no model.bin, which such an export holds; export the model again with minitf export",
    ),
    bad(
        "info-export-file-not-json",
        lambda tmp: minitf("info", write(tmp / "export/minitf_export.json", "{engine").parent),
        CommandFailed,
        r"minitf_export.json is not JSON \(Expecting property name.*export the model again with minitf export",
    ),
    bad(
        "generate-export-file-a-list",
        lambda tmp: minitf("generate", write(tmp / "export/minitf_export.json", "[1]").parent, "hi"),
        CommandFailed,
        r"minitf_export.json holds a JSON array, not an object; export the model again",
    ),
    bad(
        "translate-empty-text",
        lambda tmp: minitf("translate", make_seq2seq_source(tmp), ""),
        CommandFailed,
        r"exit 2: minitf translate: error: Cannot translate an empty text; give at least one word",
    ),
    bad(
        "export-ctranslate2-export",
        lambda tmp: minitf(
            "export", "gguf", engine_export(tmp, "ctranslate2", "generator", "minitf_gpt"), tmp / "out.gguf"
        ),
        CommandFailed,
        r"export is an engine export \(it holds minitf_export.json\); export the MiniTF folder it was made from",
    ),
    bad(
        "export-config-a-list",
        lambda tmp: minitf(
            "export", "native", saved_gpt(tmp, lambda folder: write(folder / "config.json", "[1]")), tmp / "out"
        ),
        CommandFailed,
        r"gpt holds no model_type, not a MiniTF model \(model_type minitf_gpt",
    ),
    bad(
        "export-out-named-as-positional",
        lambda tmp: minitf("export", "native", char_gpt_folder(tmp), write(tmp / "notes/todo.txt", "mine").parent),
        CommandFailed,
        r"exit 2: minitf export native: error: OUT .*notes is not empty; choose another folder or pass --overwrite",
    ),
    bad(
        "export-config-not-json",
        lambda tmp: minitf(
            "export", "native", saved_gpt(tmp, lambda folder: write(folder / "config.json", "{model")), tmp / "out"
        ),
        CommandFailed,
        r"config.json is not JSON \(Expecting",
    ),
    bad(
        "generate-empty-prompt",
        lambda tmp: minitf("generate", char_gpt_folder(tmp), "ab", ""),
        CommandFailed,
        r"exit 2: minitf generate: error: prompt \[1\] is empty; give the text to continue",
    ),
    bad(
        "generate-native-gpt2-past-positions",
        lambda tmp: minitf("generate", native_gpt_folder(tmp), "abc " * 10),
        CommandFailed,
        r"exit 2: minitf generate: error: the prompt is 40 tokens; this model reads at most 16",
    ),
    bad(
        "embed-empty-text",
        lambda tmp: minitf("embed", saved_model(tmp, "encoder"), "a cat", ""),
        CommandFailed,
        r"exit 2: minitf embed: error: text \[1\] is empty; every text to embed needs at least one character",
    ),
]
test_bad_input_is_refused_naming_the_problem, test_ids_are_unique = bad_input_tests(BAD_INPUTS)
