"""The card linter of tests/card_lint.py finds each kind of problem it checks for, and passes a card that has none
(small hand-written cards: these run in seconds, tests/hub/test_card_lint.py lints the package's cards)."""

import textwrap

from card_lint import CHECKS, CardTarget, lint_card

MODEL_INDEX = """\
model-index:
- name: m
  results:
  - task:
      type: text-generation
    dataset:
      name: held-out split
      type: held-out-split
    metrics:
    - type: eval_loss
      value: 2.5
"""

GOOD = f"""\
---
license: mit
library_name: transformers
pipeline_tag: text-generation
tags:
- minitf
language:
- en
- it
{MODEL_INDEX}---

# A model

## Use

```python
print("scores", [0.25, 0.5])  # scores [0.25, 0.5]
```

## Results

| metric | value |
|---|---|
| eval_loss | 2.5 |

## Runs in

| Runtime | File | Speed |
|---|---|---|
| onnxruntime | onnx/model.onnx | 10 tokens/s |
"""

BAD = f"""\
---
license: my-license
tags:
- other
base_model: /tmp/somewhere/source
datasets:
- ./corpus.txt
language: english
minitf_source: lintcard-source
{MODEL_INDEX}---

# A model

## Use

```python
print("similarity")  # tensor([[1.0000, 0.8224]])
raise RuntimeError("the example prompt is not in the vocabulary")
```

## Usage

```python
print("again")
```

## Citation

[More Information Needed]

### BibTeX

## Results

| metric | value |
|---|---|
| eval_loss | 2.7 |

## Runs in

| Runtime | File | Speed |
|---|---|---|
| onnxruntime | lintcard-source-onnx/onnx/model.onnx | 10 tokens/s |
"""


def target(tmp_path, card: str, measured: dict) -> CardTarget:
    (tmp_path / "onnx").mkdir()
    (tmp_path / "onnx" / "model.onnx").write_bytes(b"")
    (tmp_path / "README.md").write_text(textwrap.dedent(card))
    names = frozenset({"lintcard-source", "lintcard-source-onnx"})
    return CardTarget("card", tmp_path, measured=measured, local_names=names, forbidden=(str(tmp_path),))


def test_a_card_meeting_the_standard_passes_every_check(tmp_path):
    assert lint_card(target(tmp_path, GOOD, {"eval_loss": 2.5})) == {check: [] for check in CHECKS}


def test_each_check_finds_what_it_is_for(tmp_path):
    problems = lint_card(target(tmp_path, BAD, {"eval_loss": 2.5}))
    assert problems["metadata"] == [
        "license 'my-license' is not on the Hub's license list",
        "no pipeline_tag",
        "no library_name",
        "tags ['other'] lack 'minitf'",
        "base_model '/tmp/somewhere/source' but the card's model has no Hub source",
        "datasets names a local path './corpus.txt'",
        "language 'english' is not a list of ISO 639 codes",
        "minitf_source: 'lintcard-source' names a local folder",
    ]
    assert problems["paths"] == [
        "names the path /tmp/somewhere/source",
        "names the path lintcard-source-onnx/onnx/model.onnx",
    ]
    assert problems["figures"] == [
        "Results: eval_loss 2.7, measured 2.5",
        "Runs in names lintcard-source-onnx/onnx/model.onnx, not a file of this model",
        "python block 1 shows 1.0000, which running it does not print",
        "python block 1 shows 0.8224, which running it does not print",
    ]
    assert problems["usage"] == ["2 usage sections: Use, Usage"]
    assert problems["empty_sections"] == ["section ## Citation is empty", "section ### BibTeX is empty"]
    assert problems["snippets"] == ["python block 1 fails: RuntimeError: the example prompt is not in the vocabulary"]


def test_figures_nobody_measured_and_a_license_other_without_its_name(tmp_path):
    card = GOOD.replace("license: mit", "license: other")
    problems = lint_card(target(tmp_path, card, {}))
    assert problems["metadata"] == ["license 'other' without a license_name"]
    assert problems["figures"] == [
        "model-index eval_loss = 2.5 was not measured on this model",
        "Results: row '| eval_loss | 2.5 |' has no measured metric",
    ]


def test_snippets_run_against_the_folder_whatever_name_the_card_gives_it(tmp_path):
    folder = tmp_path / "my-model"
    folder.mkdir()
    blocks = [
        'import os\nassert os.path.isdir("your-name/my-model")',
        'import os\nassert os.path.isdir("my-model")',
        'import os\nassert os.path.isfile("path/to/this/folder/README.md")',
        'import os\nassert os.path.isdir("your-name/other-model")',
    ]
    card = "---\nlicense: mit\n---\n# M\n\n## Use\n\n" + "".join(f"```python\n{code}\n```\n\n" for code in blocks)
    (folder / "README.md").write_text(card)
    assert lint_card(CardTarget("card", folder))["snippets"] == ["python block 4 fails: AssertionError"]


def test_examples_the_models_tokenizer_does_not_spell(tmp_path):
    """Every text a card's code gives the model is read with its tokenizer: a character vocabulary without capitals
    spells "the cat" but neither "Hello" nor "Once upon a time"."""
    from hf_minitf import char_tokenizer

    char_tokenizer("the cat sat on the mat\n").save_pretrained(tmp_path)
    code = """\
```python
inputs = tokenizer("Hello", return_tensors="pt")
print(generate("the cat"))
ids = [encoding.ids for encoding in tokenizer.encode_batch(["the mat", "The Mat"])]
tokens = [source.encode(text).tokens for text in ["a cat"]]
```

`minitf generate path/to/this/folder "Once upon a time"` prints it.

```bash
llama-cli -m model.gguf -p "the cat" -n 50 --temp 0
ollama run my-model "Hi"
```
"""
    (tmp_path / "README.md").write_text("---\nlicense: mit\n---\n# M\n\n## Use\n\n" + code)
    assert lint_card(CardTarget("card", tmp_path), [{"error": None, "stdout": ""}])["examples"] == [
        f"example {text!r} is not spelled by the model's tokenizer"
        for text in ("Hello", "The Mat", "Once upon a time", "Hi")
    ]
