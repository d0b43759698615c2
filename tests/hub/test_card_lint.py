"""Issue 48's card standard over every card the package writes (tests/card_lint.py): trained GPT, encoder and
translator; converted GPT and encoder; each export of the GPT (native, ONNX, web, CTranslate2, Ollama, the native
folder with GGUF files that `minitf push --native --gguf` publishes, the GGUF repo's folder of `--all-runtimes`), of
the encoder (native, ONNX, CTranslate2) and of the translator (native, ONNX, CTranslate2); a folder
`minitf eval` measured; the pushed repos on the loopback Hub, and a native export of a pushed repo (its card must
name that repo as `base_model`).

Every folder is made once per module, in the order a user makes them (the exports after training, the push after
the exports, so that a source card would show any row an export wrote into it). Each (card, check) is one test.
"""

import contextlib
import io
import json
import os
import shutil
from pathlib import Path

import pytest
from card_lint import CHECKS, CardTarget, lint_card, run_snippets
from factories import convert_gpt_fixture, convert_miniembed_fixture
from huggingface_hub import snapshot_download
from isolation import REPO_ROOT

from hf_minitf.cli import main
from hf_minitf.publishing import _gguf_repo as gguf_repo
from hf_minitf.training.tasks import english_italian_pairs, paraphrase_pairs
from hf_minitf.training.trainers import TrainSettings, train_encoder, train_gpt, train_seq2seq

TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
STEPS = TrainSettings(max_steps=2, batch_size=4, progress=False)
GPT_TEXT = "the cat sat on the mat\n" * 20
"""A character vocabulary without a capital letter: it spells neither "Hello" nor "Once upon a time"."""
OWNER = "lint-org"
GGUF_BASE_MODEL = f"{OWNER}/lintcard-gpt"
"""The repo `minitf push SRC lint-org/lintcard-gpt --all-runtimes` pushes the native folder to: its GGUF repo's base."""

try:
    import ctranslate2  # noqa: F401

    HAS_CTRANSLATE2 = True
except ImportError:
    HAS_CTRANSLATE2 = False

CARDS = {
    "trained_gpt": "lintcard-gpt",
    "trained_encoder": "lintcard-encoder",
    "trained_translator": "lintcard-translator",
    "converted_gpt": "lintcard-converted/frawdllm_learned",
    "converted_encoder": "lintcard-miniembed",
    "export_native": "lintcard-gpt-native",
    "export_onnx": "lintcard-gpt-onnx",
    "export_web": "lintcard-gpt-web",
    "export_ctranslate2": "lintcard-gpt-ct2",
    "export_ollama": "lintcard-gpt-ollama",
    "gguf_repo": "lintcard-gpt-GGUF",
    "export_native_encoder": "lintcard-encoder-native",
    "export_onnx_encoder": "lintcard-encoder-onnx",
    "export_ctranslate2_encoder": "lintcard-encoder-ct2",
    "export_native_translator": "lintcard-translator-native",
    "export_onnx_translator": "lintcard-translator-onnx",
    "export_ctranslate2_translator": "lintcard-translator-ct2",
    "evaluated_translator": "evaluated/lintcard-translator",
    "export_native_of_hub_repo": "lintcard-hub-gpt-native",
    "hub_gpt": f"{OWNER}/lintcard-gpt",
    "hub_encoder": f"{OWNER}/lintcard-encoder",
    "hub_translator": f"{OWNER}/lintcard-translator",
    "hub_converted_gpt": f"{OWNER}/lintcard-converted-gpt",
    "hub_native_gguf": f"{OWNER}/lintcard-gpt-native",
}
"""Each card's name -> its folder under the module's root, or its repo on the loopback Hub."""

LOCAL_NAMES = frozenset(path.split("/")[0] for path in CARDS.values() if not path.startswith(OWNER))

EXPORTS = [name for name in CARDS if name.startswith("export_") or name == "gguf_repo"]
EXPORT_SOURCES = {
    name: next((f"trained_{family}" for family in ("encoder", "translator") if name.endswith(family)), "trained_gpt")
    for name in EXPORTS
}
"""Each export's source folder: what its card's examples are spelled with (an Ollama folder has no tokenizer file)."""
CLEAN_FIGURES = tuple(name for name in EXPORTS if name.split("_")[1] in ("native", "onnx", "ctranslate2"))
"""Exports exact to float32 rounding: the source's measured figures are theirs too."""
CTRANSLATE2_CARDS = tuple(name for name in CARDS if name.startswith("export_ctranslate2"))


def cli(*argv) -> str:
    """`minitf ARGV` in this process; what it printed. A non-zero status fails the fixture."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(io.StringIO()) as errors:
        status = main([str(arg) for arg in argv])
    assert status == 0, f"minitf {' '.join(map(str, argv))}: {status}\n{errors.getvalue()[-3000:]}"
    return printed.getvalue()


def train_all(root: Path) -> dict[str, dict[str, float]]:
    """The three trained folders; each one's held-out figures as training returned them."""
    return {
        "trained_gpt": train_gpt(
            GPT_TEXT, root / CARDS["trained_gpt"], block_size=16, settings=STEPS, config_overrides=TINY
        ).eval_results,
        "trained_encoder": train_encoder(
            paraphrase_pairs(40, 4).train, root / CARDS["trained_encoder"], settings=STEPS, config_overrides=TINY
        ).eval_results,
        "trained_translator": train_seq2seq(
            english_italian_pairs(40, 4).train,
            root / CARDS["trained_translator"],
            settings=STEPS,
            config_overrides=TINY,
        ).eval_results,
    }


def export_all(root: Path) -> None:
    """Every export of the trained GPT (and the native, ONNX and CTranslate2 ones of the encoder and the translator);
    the native and CTranslate2 ones verified as `minitf export` verifies them
    (their Runs in rows, in their cards and the source's), the ONNX ones not (ONNX Runtime's start takes most of a
    minute on two busy cores; the rows are the same table)."""
    source = root / CARDS["trained_gpt"]
    cli("export", "native", source, root / CARDS["export_native"])
    cli("export", "onnx", source, root / CARDS["export_onnx"], "--no-verify")
    cli("export", "web", source, root / CARDS["export_web"], "--no-verify")
    if HAS_CTRANSLATE2:
        cli("export", "ctranslate2", source, root / CARDS["export_ctranslate2"])
    for family in ("encoder", "translator"):
        trained = root / CARDS[f"trained_{family}"]
        cli("export", "native", trained, root / CARDS[f"export_native_{family}"])
        cli("export", "onnx", trained, root / CARDS[f"export_onnx_{family}"], "--no-verify")
        if HAS_CTRANSLATE2:
            cli("export", "ctranslate2", trained, root / CARDS[f"export_ctranslate2_{family}"])
    cli("export", "ollama", source, root / CARDS["export_ollama"])
    # The GGUF repo's folder as `minitf push --all-runtimes` writes it before uploading (the rest of that push
    # would export and verify every runtime again).
    gguf_repo(source, root / CARDS["gguf_repo"], ("q8_0",), f"{OWNER}/lintcard-gpt-GGUF", GGUF_BASE_MODEL, None)


def evaluate(root: Path) -> dict[str, float]:
    """A copy of the trained translator measured by `minitf eval` on held-out pairs: the figures it printed."""
    folder = shutil.copytree(root / CARDS["trained_translator"], root / CARDS["evaluated_translator"])
    data = root / "held_out_pairs.jsonl"
    pairs = english_italian_pairs(40, 4).held_out
    data.write_text("".join(json.dumps({"source": source, "target": target}) + "\n" for source, target in pairs))
    return json.loads(cli("eval", folder, "--data", data, "--json", "--no-progress"))["figures"]


def publish(root: Path) -> None:
    """`minitf push` of the trained and converted folders, `minitf push --native --gguf q8_0` of the GPT, and a
    native export made from the pushed GPT's repo id."""
    for name in ("gpt", "encoder", "translator"):
        cli("push", root / CARDS[f"trained_{name}"], CARDS[f"hub_{name}"])
    cli("push", root / CARDS["converted_gpt"], CARDS["hub_converted_gpt"])
    cli("push", root / CARDS["trained_gpt"], CARDS["hub_native_gguf"], "--native", "--gguf", "q8_0", "--no-verify")
    cli("export", "native", CARDS["hub_gpt"], root / CARDS["export_native_of_hub_repo"])


@pytest.fixture(scope="module")
def linted(tmp_path_factory, hub) -> dict[str, dict[str, list[str]]]:
    """Every card of CARDS made and linted: card -> check -> problems."""
    root = tmp_path_factory.mktemp("cards")
    measured = train_all(root)
    convert_gpt_fixture(root / "lintcard-converted", "frawdllm_learned")
    convert_miniembed_fixture(root / CARDS["converted_encoder"])
    export_all(root)
    measured["evaluated_translator"] = {**measured["trained_translator"], **evaluate(root)}
    publish(root)
    for name in CLEAN_FIGURES:
        measured[name] = measured[EXPORT_SOURCES[name]]
    for name in ("gpt", "encoder", "translator"):
        measured[f"hub_{name}"] = measured[f"trained_{name}"]
    measured["hub_native_gguf"] = measured["export_native_of_hub_repo"] = measured["trained_gpt"]
    targets = []
    for name, where in CARDS.items():
        if name in CTRANSLATE2_CARDS and not HAS_CTRANSLATE2:
            continue
        repo_id = where if where.startswith(OWNER) else None
        folder = (
            Path(snapshot_download(repo_id, local_dir=root / "downloads" / where.replace("/", "--")))
            if repo_id
            else root / where
        )
        targets.append(
            CardTarget(
                name,
                folder,
                repo_id=repo_id,
                measured=measured.get(name, {}),
                base_model={"export_native_of_hub_repo": CARDS["hub_gpt"], "gguf_repo": GGUF_BASE_MODEL}.get(name),
                kind="space" if name == "export_web" else ("export" if "export" in name or "gguf" in name else "model"),
                local_names=LOCAL_NAMES,
                forbidden=(str(root),),
                model_id=repo_id,
                tokenizer_folder=root / CARDS[EXPORT_SOURCES[name]] if name in EXPORT_SOURCES else None,
            )
        )
    # Every snippet talks to the loopback Hub (the local ones need no Hub; any download they try lands there).
    environment = hub.subprocess_env(
        PYTHONPATH=os.pathsep.join(filter(None, [REPO_ROOT, os.environ.get("PYTHONPATH")]))
    )
    snippets = run_snippets(targets, env=environment)
    return {target.name: lint_card(target, snippets[target.name]) for target in targets}


KNOWN_PROBLEMS: dict[tuple[str, str], str] = {}
"""Problems found and not fixed yet (strict: a fix makes the test pass and fail as unexpected)."""


def _case(card: str, check: str):
    marks = []
    if card in CTRANSLATE2_CARDS and not HAS_CTRANSLATE2:
        marks.append(pytest.mark.skip(reason="ctranslate2 is not installed"))
    if (card, check) in KNOWN_PROBLEMS:
        marks.append(pytest.mark.xfail(reason=KNOWN_PROBLEMS[card, check], strict=True))
    return pytest.param(card, check, marks=marks, id=f"{card}-{check}")


@pytest.mark.parametrize(("card", "check"), [_case(card, check) for card in CARDS for check in CHECKS])
def test_card_meets_the_standard(linted, card, check):
    assert linted[card][check] == [], "\n".join(linted[card][check])
