"""A saved folder's code is the model and nothing else: configuration, modeling and the shared layers (and the seq2seq
tokenizer). It loads with `trust_remote_code=True` where hf_minitf cannot be imported and gives the same outputs;
such a user's `save_pretrained` and `push_to_hub` behave as transformers' do (hf_minitf's cards, checks and file
modes come with the package, not with a folder's code)."""

import ast
import json
from pathlib import Path

import pytest
import torch
from factories import tiny_model
from isolation import run_without_hf_minitf

import hf_minitf
from hf_minitf import MiniTFSeq2SeqTokenizer, train_translation_tokenizers

# Per family one configuration file and one modeling file, the shared layers (and the translator's tokenizer pair).
SHARED_CODE = {"layers.py"}
FAMILY_CODE = {
    "gpt": SHARED_CODE | {"configuration_minitf_gpt.py", "modeling_minitf_gpt.py"},
    "encoder": SHARED_CODE | {"configuration_minitf_encoder.py", "modeling_minitf_encoder.py"},
    "seq2seq": SHARED_CODE
    | {"configuration_minitf_seq2seq.py", "modeling_minitf_seq2seq.py", "tokenization_minitf_seq2seq.py"},
}
AUTO_CLASSES = {"gpt": "AutoModelForCausalLM", "encoder": "AutoModel", "seq2seq": "AutoModelForSeq2SeqLM"}
PACKAGE = Path(hf_minitf.__file__).parent / "modeling"


def imported_siblings(path: Path) -> set[str]:
    """The sibling modules a file imports relatively (`from .x import y`), as file names."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {f"{node.module}.py" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level == 1}


def absolute_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    names |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level == 0}
    return {name.split(".")[0] for name in names}


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A saved folder of each family (the seq2seq one with its tokenizer), with its card, and the models."""
    root = tmp_path_factory.mktemp("saved")
    models = {family: tiny_model(family) for family in FAMILY_CODE}
    pairs = [("one two", "uno due"), ("two three", "due tre"), ("three", "tre")] * 2
    tokenizer = train_translation_tokenizers(pairs, min_frequency=1)
    models["seq2seq"] = tiny_model(
        "seq2seq", src_vocab_size=tokenizer.source_vocab_size, vocab_size=tokenizer.target_vocab_size
    )
    for family, model in models.items():
        model.save_pretrained(root / family)
    tokenizer.save_pretrained(root / "seq2seq")
    return root, models


@pytest.mark.parametrize("family", FAMILY_CODE)
def test_a_saved_folder_holds_only_model_code(saved, family):
    root, _ = saved
    folder = root / family
    code = {path.name for path in folder.glob("*.py")}
    assert code == FAMILY_CODE[family]
    for name in code:
        assert imported_siblings(folder / name) <= code, name  # the folder is complete
        assert "hf_minitf" not in absolute_imports(folder / name), name
    assert (folder / "README.md").is_file(), "hf_minitf is installed here: save_pretrained writes the card"


def test_contributing_states_the_lines_save_pretrained_copies(saved):
    """CONTRIBUTING.md's table of what a saved folder's code weighs is what saving one copies today."""
    import re

    root, _ = saved
    table = (PACKAGE.parent.parent / "CONTRIBUTING.md").read_text(encoding="utf-8")
    for family in FAMILY_CODE:
        row = re.search(rf"^\| {family}\b.*\| (\d+) files, ([\d,]+) lines \|$", table, re.MULTILINE)
        assert row is not None, family
        files = sorted((root / family).glob("*.py"))
        lines = sum(len(path.read_text(encoding="utf-8").splitlines()) for path in files)
        assert (int(row[1]), int(row[2].replace(",", ""))) == (len(files), lines), family


def test_model_code_never_imports_publishing_or_commands():
    """What the saved folders copy, followed through every relative import from the modeling files."""
    seen, pending = set(), [f"modeling_minitf_{family}.py" for family in FAMILY_CODE]
    pending.append(MiniTFSeq2SeqTokenizer.__module__.split(".")[-1] + ".py")
    while pending:
        name = pending.pop()
        if name not in seen:
            seen.add(name)
            pending.extend(imported_siblings(PACKAGE / name))
    assert seen == set().union(*FAMILY_CODE.values())


def test_without_hf_minitf_saved_folders_load_and_save_and_push_as_transformers_does(saved, hub, tmp_path):
    root, models = saved
    ids = torch.tensor([[2, 5, 6, 4]])  # inside the smallest vocabulary (the translation pair's source)
    with torch.no_grad():
        expected = {
            "gpt": models["gpt"](ids).logits,
            "encoder": models["encoder"](ids).last_hidden_state,
            "seq2seq": models["seq2seq"](ids, decoder_input_ids=torch.tensor([[2, 5]])).logits,
        }
    result = run_without_hf_minitf(
        f"""
        import json, os, torch, transformers
        root, ids, outputs, cards = {str(root)!r}, torch.tensor({ids.tolist()}), {{}}, {{}}
        for family, auto_class in {AUTO_CLASSES!r}.items():
            model = getattr(transformers, auto_class).from_pretrained(os.path.join(root, family),
                                                                     trust_remote_code=True).eval()
            with torch.no_grad():
                if family == "seq2seq":
                    output = model(ids, decoder_input_ids=torch.tensor([[2, 5]])).logits
                elif family == "gpt":
                    output = model(ids).logits
                else:
                    output = model(ids).last_hidden_state
            outputs[family] = [type(model).__module__, output.tolist()]
            copy = os.path.join({str(tmp_path)!r}, family)
            model.save_pretrained(copy)
            model.push_to_hub(f"org/remote-{{family}}")
            cards[family] = os.path.exists(os.path.join(copy, "README.md"))
        print(json.dumps({{"outputs": outputs, "cards": cards}}))
    """,
        cwd=str(tmp_path),
    )
    for family in FAMILY_CODE:
        module, output = result["outputs"][family]
        assert module.startswith("transformers_modules"), module
        expected_output = expected[family]
        assert (torch.tensor(output) - expected_output).abs().max() <= 1e-5 * max(1, expected_output.abs().max())
        assert result["cards"][family] is False, "transformers' save_pretrained writes no card"
        assert "- minitf" not in hub.read(f"org/remote-{family}", "README.md").decode("utf-8")
        pushed_code = {name for name in hub.files(f"org/remote-{family}") if name.endswith(".py")}
        assert pushed_code == FAMILY_CODE[family] - {"tokenization_minitf_seq2seq.py"}
        assert json.loads(hub.read(f"org/remote-{family}", "config.json"))["auto_map"]
