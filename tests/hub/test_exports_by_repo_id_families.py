"""The encoder's and the translator's exports that `minitf push --all-runtimes` publishes (`push_all_runtimes`),
loaded back from the loopback Hub by repo id with every entry point the docs name for them (README.md,
docs/publishing.md, docs/export.md, docs/export_engines.md and the export cards), as tests/hub/test_exports_by_repo_id.py
does for the GPT's:

- encoder, the native repo: `SentenceTransformer(REPO)`, and `AutoModel` + `AutoTokenizer` with the card's masked
  mean; the ONNX repo (`REPO-ONNX`): ONNX Runtime on its `snapshot_download` (the card's code), and transformers.js's
  `pipeline("feature-extraction", REPO-ONNX, {dtype: "fp32"})` with mean pooling, normalized, as the card's web page
  calls it (in Node, the Hub's URL as its `remoteHost`); the CTranslate2 repo (`REPO-ct2`): `ctranslate2.Encoder` on
  its download (the card's code); `minitf embed` on each download;
- translator, the native repo: `AutoModelForSeq2SeqLM` + `AutoTokenizer` and `generate()` (transformers 5 has no
  translation pipeline; the MiniTF repos' `minitf-translation` task: tests/hub/test_hub.py); the CTranslate2 repo:
  `ctranslate2.Translator` on its download; `minitf translate` on the ONNX and CTranslate2 downloads (the ONNX card's
  only runner: its graphs run through the package).

Each family's entry points that need no package run in one fresh process with hf-minitf installed and one without
it; `minitf embed/translate`, which need the package, run here (a fresh process would add nothing). Embeddings must
be the MiniTF source's within 1e-5 of their magnitude, translations its greedy ones token for token. (The encoder's
GGUF and web page are not run here: llama.cpp's embeddings and the browser are the `engines` and `browser` tests.)"""

import contextlib
import io
import json
import textwrap

import numpy as np
import pytest
import torch
from factories import PAIRS, SENTENCES, make_encoder, make_seq2seq
from huggingface_hub import snapshot_download
from sentence_transformers import SentenceTransformer
from test_exports_by_repo_id import run_fresh
from tokenizers import Tokenizer
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
from transformers_js import NodeRunner

from hf_minitf.cli import main as minitf_main
from hf_minitf.publishing import push_all_runtimes

REPOS = {"encoder": "org/exp-encoder", "translator": "org/exp-translator"}
TEXTS = SENTENCES[:2]
SOURCE_TEXT = PAIRS[0][0]

# What each family's entry points compute, in one fresh process: `result[ENTRY_POINT]` (embeddings or target tokens).
PROGRAMS = {
    "encoder": """
        import ctranslate2, numpy as np, onnxruntime, torch
        from huggingface_hub import snapshot_download
        from sentence_transformers import SentenceTransformer
        from tokenizers import Tokenizer
        from transformers import AutoModel, AutoTokenizer, PreTrainedTokenizerFast

        def pooled(states, mask):
            mean = (states * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
            return mean / np.linalg.norm(mean, axis=1, keepdims=True)

        result = {"sentence_transformers": SentenceTransformer(REPO).encode(TEXTS).tolist()}
        tokenizer, model = AutoTokenizer.from_pretrained(REPO), AutoModel.from_pretrained(REPO)
        batch = tokenizer(TEXTS, padding=True, return_tensors="pt")
        with torch.no_grad():
            states = model(**batch).last_hidden_state.numpy()
        result["transformers"] = pooled(states, batch["attention_mask"].numpy()).tolist()
        result["native_class"] = type(model).__name__

        folder = snapshot_download(REPO + "-ONNX")
        tokenizer = PreTrainedTokenizerFast.from_pretrained(folder)
        session = onnxruntime.InferenceSession(f"{folder}/onnx/model.onnx", providers=["CPUExecutionProvider"])
        batch = tokenizer(TEXTS, padding=True, truncation=True, return_tensors="np")
        feeds = {name: batch[name].astype(np.int64) for name in ("input_ids", "attention_mask")}
        (states,) = session.run(["last_hidden_state"], feeds)
        result["onnxruntime"] = pooled(states, feeds["attention_mask"]).tolist()

        folder = snapshot_download(REPO + "-ct2")
        tokenizer = Tokenizer.from_file(f"{folder}/tokenizer.json")
        ids = [encoding.ids for encoding in tokenizer.encode_batch(TEXTS)]
        states = np.array(ctranslate2.Encoder(folder).forward_batch(ids).last_hidden_state)
        mask = np.array([[1.0] * len(row) + [0.0] * (states.shape[1] - len(row)) for row in ids])
        result["ctranslate2"] = pooled(states, mask).tolist()
        """,
    "translator": """
        import ctranslate2
        from huggingface_hub import snapshot_download
        from tokenizers import Tokenizer
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        tokenizer, model = AutoTokenizer.from_pretrained(REPO), AutoModelForSeq2SeqLM.from_pretrained(REPO)
        output = model.generate(**tokenizer(SOURCE_TEXT, return_tensors="pt"))[0, 1:].tolist()  # after the start
        ids = [index for index in output if index not in (model.config.eos_token_id, model.config.pad_token_id)]
        # its tokenizer spells a word's start with "▁" (SentencePiece's convention)
        result = {"transformers": [token.removeprefix("▁") for token in tokenizer.convert_ids_to_tokens(ids)]}
        result["native_class"] = type(model).__name__

        folder = snapshot_download(REPO + "-ct2")
        tokens = Tokenizer.from_file(f"{folder}/source_tokenizer.json").encode(SOURCE_TEXT).tokens
        positions = json.load(open(f"{folder}/minitf_export.json"))["max_position_embeddings"]
        translated = ctranslate2.Translator(folder).translate_batch([tokens], beam_size=1, max_decoding_length=positions - 1)
        result["ctranslate2"] = translated[0].hypotheses[0]
        """,
}
NATIVE_CLASSES = {"encoder": "XLMRobertaXLModel", "translator": "PegasusForConditionalGeneration"}
MINITF_COMMANDS = {"encoder": "embed", "translator": "translate"}
ENGINE_REPOS = ("-ONNX", "-ct2")
"""The repos whose download `minitf embed/translate` runs (ONNX Runtime, CTranslate2)."""


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("family_exports")
    # seed 3: a translation of SOURCE_TEXT of varied tokens (seed 0's repeats one word)
    return {"encoder": make_encoder(root / "exp-encoder"), "translator": make_seq2seq(root / "exp-translator", seed=3)}


@pytest.fixture(scope="module")
def pushed(hub, sources):
    """Each family's exports pushed once, as `minitf push --all-runtimes` pushes them (GGUF f32 only)."""
    for family, folder in sources.items():
        push_all_runtimes(folder, REPOS[family], gguf_dtypes=("f32",), note=lambda line: None)
    return hub


def minitf(*argv) -> str:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert minitf_main([str(arg) for arg in argv]) == 0, argv
    return printed.getvalue()


@pytest.fixture(scope="module")
def expected(sources) -> dict:
    """The MiniTF sources' outputs: the encoder's embeddings of TEXTS, the translator's greedy target tokens for
    SOURCE_TEXT (its generation config; after the start token, up to the end), and what `minitf embed/translate` prints."""
    encoder, translator = sources["encoder"], sources["translator"]
    tokenizer = AutoTokenizer.from_pretrained(translator)
    model = AutoModelForSeq2SeqLM.from_pretrained(translator).eval()
    with torch.no_grad():
        ids = model.generate(**tokenizer(SOURCE_TEXT, return_tensors="pt"))[0, 1:].tolist()  # after the start
    target = Tokenizer.from_file(str(translator / "target_tokenizer.json"))
    ends = {model.config.pad_token_id, model.config.eos_token_id}
    tokens = [target.id_to_token(index) for index in ids if index not in ends]
    assert tokens, "the translator translates SOURCE_TEXT to something"
    return {
        "encoder": SentenceTransformer(str(encoder)).encode(TEXTS),
        "translator": tokens,
        "minitf": {
            "encoder": minitf("embed", encoder, *TEXTS),
            "translator": minitf("translate", translator, SOURCE_TEXT),
        },
    }


def program(family: str) -> str:
    """The code of the family's entry points, printing their results as one JSON line."""
    constants = f"REPO, TEXTS, SOURCE_TEXT = {REPOS[family]!r}, {TEXTS!r}, {SOURCE_TEXT!r}\n"
    return "import json\n" + constants + textwrap.dedent(PROGRAMS[family]) + "print(json.dumps(result))\n"


def assert_same_output(family: str, output, expected, where: str) -> None:
    """Embeddings within 1e-5 of their magnitude, translations token for token."""
    if family == "encoder":
        output = np.asarray(output)
        assert output.shape == expected.shape, where
        assert np.abs(output - expected).max() <= 1e-5 * np.abs(expected).max(), where
    else:
        assert output == expected, where


ENTRY_POINTS = {
    "encoder": ("sentence_transformers", "transformers", "onnxruntime", "ctranslate2"),
    "translator": ("transformers", "ctranslate2"),
}


@pytest.mark.parametrize("installed", [True, False], ids=["with_hf_minitf", "without_hf_minitf"])
@pytest.mark.parametrize("family", list(PROGRAMS))
def test_each_export_runs_by_repo_id_in_a_fresh_process(pushed, expected, family, installed, tmp_path):
    result = run_fresh(program(family), installed, tmp_path)
    assert result["native_class"] == NATIVE_CLASSES[family]
    for entry_point in ENTRY_POINTS[family]:
        assert_same_output(family, result[entry_point], expected[family], entry_point)


@pytest.mark.parametrize("family", list(PROGRAMS))
def test_minitf_runs_each_engine_download_as_the_source(pushed, expected, family):
    """`minitf embed/translate` on the `snapshot_download` of the ONNX and CTranslate2 repos prints what it prints
    for the MiniTF folder."""
    texts = TEXTS if family == "encoder" else [SOURCE_TEXT]
    for suffix in ENGINE_REPOS:
        printed = minitf(MINITF_COMMANDS[family], snapshot_download(REPOS[family] + suffix), *texts)
        if family == "encoder":
            vectors = [json.loads(line) for line in printed.splitlines()]
            reference = [json.loads(line) for line in expected["minitf"][family].splitlines()]
            assert_same_output(family, vectors, np.array(reference), suffix)
        else:
            assert printed == expected["minitf"][family], suffix


def test_transformers_js_embeds_with_the_encoders_onnx_repo_by_repo_id(pushed, expected, node_modules, tmp_path):
    """The encoder's ONNX repo by its id, as its card's web page loads it: transformers.js downloads it from the Hub
    (the loopback one's URL for huggingface.co); its feature-extraction pipeline, mean-pooled and normalized, gives
    the source's SentenceTransformer embeddings."""
    cache = tmp_path / "transformers_js_cache"
    with NodeRunner("embed", REPOS["encoder"] + "-ONNX", "fp32", hub=(pushed.url, cache)) as node:
        embeddings = node.ask({"sentences": TEXTS})["result"]
    assert_same_output("encoder", embeddings, expected["encoder"], "transformers.js")
    assert (cache / (REPOS["encoder"] + "-ONNX") / "onnx" / "model.onnx").is_file()  # downloaded, not found on disk
