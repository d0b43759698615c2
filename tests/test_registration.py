"""Installed means usable: in a fresh process that never imports hf_minitf, transformers' Auto classes, pipelines,
SentenceTransformer and TRL get the MiniTF classes without `trust_remote_code` (hf_minitf.pth runs
`_hf_minitf_autoregister` at interpreter start); with the start-up hook off, the folders still load as remote code.
Each check runs in its own subprocess, the way a user's script would."""

import json
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path
from typing import Any

import pytest
from factories import tiny_model

from _hf_minitf_autoregister import DISABLE_VARIABLE, RegisteringFinder
from hf_minitf import char_tokenizer, save_sentence_transformer, train_translation_tokenizers, train_wordlevel_tokenizer

ROOT = Path(__file__).parent.parent
SENTENCES = ["the cat sat on the mat", "a dog ran in the park"]
PAIRS = [("one two", "uno due"), ("two three", "due tre"), ("three one", "tre uno")]


def run_fresh(code: str, cwd: Path, hook: bool = True, timeout: int = 300, python_options: list[str] = ()) -> Any:
    """Run `code` in a new interpreter (the hook on or off); it prints one JSON value last, which is returned."""
    env = {**os.environ}
    env.pop(DISABLE_VARIABLE, None)
    if not hook:
        env[DISABLE_VARIABLE] = "1"
    command = [sys.executable, *python_options, "-c", textwrap.dedent(code)]
    result = subprocess.run(
        command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, f"subprocess failed:\n{result.stdout}\n{result.stderr[-4000:]}"
    assert "could not register" not in result.stderr, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """A saved folder of each family: a char GPT, a SentenceTransformer encoder, a seq2seq with its tokenizer pair."""
    root = tmp_path_factory.mktemp("installed")
    gpt_tokenizer = char_tokenizer("abcdefghij \n")
    gpt = tiny_model("gpt", vocab_size=len(gpt_tokenizer), pad_token_id=gpt_tokenizer.pad_token_id)
    gpt.save_pretrained(root / "gpt")
    gpt_tokenizer.save_pretrained(root / "gpt")
    encoder_tokenizer = train_wordlevel_tokenizer(SENTENCES, vocab_size=40, min_frequency=1, max_length=24)
    save_sentence_transformer(
        tiny_model("encoder", vocab_size=len(encoder_tokenizer)), encoder_tokenizer, root / "encoder"
    )
    seq2seq_tokenizer = train_translation_tokenizers(PAIRS, min_frequency=1)
    seq2seq = tiny_model(
        "seq2seq", src_vocab_size=seq2seq_tokenizer.source_vocab_size, vocab_size=seq2seq_tokenizer.target_vocab_size
    )
    seq2seq.save_pretrained(root / "seq2seq")
    seq2seq_tokenizer.save_pretrained(root / "seq2seq")
    return root


def test_start_up_installs_only_a_finder_and_import_transformers_imports_no_minitf(tmp_path):
    result = run_fresh(
        """
        import json, sys
        at_start = {name: name in sys.modules for name in ("hf_minitf", "transformers", "torch")}
        finder = type(sys.meta_path[0]).__name__
        import transformers
        print(json.dumps({"at_start": at_start, "finder": finder, "after": "hf_minitf" in sys.modules}))
        """,
        tmp_path,
    )
    assert result == {
        "at_start": {"hf_minitf": False, "transformers": False, "torch": False},
        "finder": RegisteringFinder.__name__,
        "after": False,
    }


@pytest.mark.parametrize(
    "statement",
    ["import transformers", "from transformers import AutoTokenizer", "from transformers import AutoModel, pipeline"],
)
def test_a_process_that_meets_no_minitf_folder_imports_only_minitf_configs(statement, tmp_path):
    """What the hook adds to a process that never uses MiniTF: its light modules (configs, tokenizer, pipeline
    task), never a module of another package, and never the model code (which pulls torch's model stack)."""
    code = f"""
        import json, sys
        {statement}
        print(json.dumps(sorted(sys.modules)))
        """
    with_hook = set(run_fresh(code, tmp_path))
    without = set(run_fresh(code, tmp_path, hook=False))
    added = with_hook - without
    assert {name for name in added if not name.startswith(("hf_minitf", "_hf_minitf"))} == set()
    assert not {
        name for name in added if name.startswith(("hf_minitf.modeling.modeling_", "hf_minitf.modeling.layers"))
    }


@pytest.mark.parametrize("order", ["config first", "auto model first"])
def test_model_classes_are_registered_when_a_minitf_config_is_built(order, folders):
    """A config built before or after `modeling_auto` loads, from a folder or from `AutoConfig.for_model`."""
    first, second = (
        ("from transformers import AutoConfig", "from transformers import AutoModelForCausalLM")
        if order == "config first"
        else ("from transformers import AutoModelForCausalLM", "from transformers import AutoConfig")
    )
    result = run_fresh(
        f"""
        import json, sys
        {first}
        {second}
        config = AutoConfig.from_pretrained("gpt")
        built = AutoConfig.for_model("minitf_seq2seq", hidden_size=16, num_attention_heads=2, intermediate_size=32)
        from transformers import AutoModelForSeq2SeqLM
        print(json.dumps({{
            "gpt": type(AutoModelForCausalLM.from_config(config)).__module__,
            "seq2seq": type(AutoModelForSeq2SeqLM.from_config(built)).__module__,
        }}))
        """,
        folders,
    )
    assert result == {
        "gpt": "hf_minitf.modeling.modeling_minitf_gpt",
        "seq2seq": "hf_minitf.modeling.modeling_minitf_seq2seq",
    }


def start_file() -> Path:
    """The `hf_minitf.start` of this environment's site-packages."""
    import site

    (path,) = [
        Path(folder) / "hf_minitf.start"
        for folder in site.getsitepackages()
        if (Path(folder) / "hf_minitf.start").is_file()
    ]
    return path


def test_the_pep_829_entry_point_alone_registers(folders):
    """What Python 3.15 and later run (and, from 3.18, only that): `hf_minitf.start`'s entry point, resolved as
    site.py does (`pkgutil.resolve_name`), with no `.pth` import line run: here `python -S`, the site-packages
    folders put on sys.path by hand."""
    result = run_fresh(
        f"""
        import json, pkgutil, sys
        sys.path.extend({[path for path in sys.path if path]!r})
        entry_point = open({str(start_file())!r}, encoding="utf-8").read().strip()
        ran_pth = any(type(finder).__name__ == "RegisteringFinder" for finder in sys.meta_path)
        pkgutil.resolve_name(entry_point)()
        from transformers import AutoModelForCausalLM
        print(json.dumps({{"entry point": entry_point, "ran pth": ran_pth,
                          "gpt": type(AutoModelForCausalLM.from_pretrained("gpt")).__module__}}))
        """,
        folders,
        python_options=["-S"],
    )
    assert result == {
        "entry point": "_hf_minitf_autoregister:start",
        "ran pth": False,
        "gpt": "hf_minitf.modeling.modeling_minitf_gpt",
    }


def test_auto_classes_load_the_installed_classes_without_import_or_trust_remote_code(folders):
    result = run_fresh(
        """
        import json
        from transformers import (AutoConfig, AutoModel, AutoModelForCausalLM, AutoModelForSeq2SeqLM,
                                  AutoModelForSequenceClassification, AutoTokenizer)

        def module(thing):
            return type(thing).__module__

        print(json.dumps({
            "config": module(AutoConfig.from_pretrained("gpt")),
            "gpt": module(AutoModelForCausalLM.from_pretrained("gpt")),
            "gpt base": module(AutoModel.from_pretrained("gpt")),
            "encoder": module(AutoModel.from_pretrained("encoder")),
            "classifier": module(AutoModelForSequenceClassification.from_pretrained("encoder", num_labels=2)),
            "seq2seq": module(AutoModelForSeq2SeqLM.from_pretrained("seq2seq")),
            "seq2seq tokenizer": module(AutoTokenizer.from_pretrained("seq2seq")),
        }))
        """,
        folders,
    )
    assert result == {
        "config": "hf_minitf.modeling.configuration_minitf_gpt",
        "gpt": "hf_minitf.modeling.modeling_minitf_gpt",
        "gpt base": "hf_minitf.modeling.modeling_minitf_gpt",
        "encoder": "hf_minitf.modeling.modeling_minitf_encoder",
        "classifier": "hf_minitf.modeling.modeling_minitf_encoder",
        "seq2seq": "hf_minitf.modeling.modeling_minitf_seq2seq",
        "seq2seq tokenizer": "hf_minitf.modeling.tokenization_minitf_seq2seq",
    }


def test_registration_waits_for_a_half_imported_transformers_module(folders):
    """A transformers model class imported first loads `modeling_auto` from inside `modeling_layers`, which the
    MiniTF layers subclass: registering the models right then failed, and they were never registered."""
    result = run_fresh(
        """
        import json
        from transformers import LlamaForCausalLM
        from transformers import AutoModelForCausalLM
        print(json.dumps(type(AutoModelForCausalLM.from_pretrained("gpt")).__module__))
        """,
        folders,
    )
    assert result == "hf_minitf.modeling.modeling_minitf_gpt"


def test_pipelines_and_sentence_transformers_without_import(folders):
    result = run_fresh(
        """
        import json
        from sentence_transformers import SentenceTransformer
        from transformers import pipeline

        generate = pipeline("text-generation", model="gpt")
        translate = pipeline("minitf-translation", model="seq2seq")
        embedder = SentenceTransformer("encoder")
        print(json.dumps({
            "text-generation": type(generate.model).__module__,
            "generated": generate("abc", max_new_tokens=4, do_sample=False)[0]["generated_text"][:3],
            "minitf-translation": type(translate.model).__module__,
            "translated": isinstance(translate("one two", max_new_tokens=3)[0]["translation_text"], str),
            "sentence-transformers": type(embedder[0].auto_model).__module__,
            "embedding": list(embedder.encode(["the cat"]).shape),
        }))
        """,
        folders,
    )
    assert result == {
        "text-generation": "hf_minitf.modeling.modeling_minitf_gpt",
        "generated": "abc",
        "minitf-translation": "hf_minitf.modeling.modeling_minitf_seq2seq",
        "translated": True,
        "sentence-transformers": "hf_minitf.modeling.modeling_minitf_encoder",
        "embedding": [1, 16],
    }


def test_trl_sft_trains_a_minitf_gpt_without_import(folders, tmp_path):
    pytest.importorskip("trl")
    result = run_fresh(
        f"""
        import json
        from datasets import Dataset
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from trl import SFTConfig, SFTTrainer

        model = AutoModelForCausalLM.from_pretrained("gpt")
        tokenizer = AutoTokenizer.from_pretrained("gpt")
        data = Dataset.from_dict({{"text": ["abc def ghij", "jihg fed cba", "aabbcc ddeeff"] * 4}})
        settings = SFTConfig(output_dir={str(tmp_path / "sft")!r}, max_steps=2, per_device_train_batch_size=4,
                             learning_rate=1e-3, report_to=[], logging_steps=1, save_strategy="no",
                             use_cpu=True, dataloader_num_workers=0)
        trainer = SFTTrainer(model=model, args=settings, train_dataset=data, processing_class=tokenizer)
        trainer.train()
        losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
        print(json.dumps({{"module": type(trainer.model).__module__, "steps": trainer.state.global_step,
                          "losses": len(losses)}}))
        """,
        folders,
        timeout=600,
    )
    assert result == {"module": "hf_minitf.modeling.modeling_minitf_gpt", "steps": 2, "losses": 2}


@pytest.mark.langchain
def test_langchain_embeddings_without_import(folders):
    pytest.importorskip("langchain_huggingface")
    result = run_fresh(
        """
        import json
        from langchain_huggingface import HuggingFaceEmbeddings

        embeddings = HuggingFaceEmbeddings(model_name="encoder")
        vector = embeddings.embed_query("the cat sat")
        print(json.dumps({"module": type(embeddings._client[0].auto_model).__module__, "size": len(vector)}))
        """,
        folders,
    )
    assert result == {"module": "hf_minitf.modeling.modeling_minitf_encoder", "size": 16}


def test_with_the_hook_off_the_folders_load_as_remote_code(folders):
    """What a user without hf_minitf gets (transformers does not look for the package, only for registered classes):
    a request for `trust_remote_code`, then the folder's own copy of the code."""
    result = run_fresh(
        """
        import json
        from transformers import AutoModelForCausalLM
        try:
            AutoModelForCausalLM.from_pretrained("gpt", trust_remote_code=False)  # no prompt: refuse at once
            refused = None
        except ValueError as error:
            refused = "trust_remote_code=True" in str(error)
        model = AutoModelForCausalLM.from_pretrained("gpt", trust_remote_code=True)
        print(json.dumps({"refused": refused, "module": type(model).__module__.split(".")[0]}))
        """,
        folders,
        hook=False,
    )
    assert result == {"refused": True, "module": "transformers_modules"}


def test_the_wheel_carries_the_start_up_hook(tmp_path):
    """`pip install hf-minitf` puts hf_minitf.pth and its module at the top of site-packages. (Built from a copy:
    a build writes build/ and egg-info beside the sources.)"""
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md", "_hf_minitf_autoregister.py"):
        shutil.copy2(ROOT / name, source / name)
    for name in ("hf_minitf", "conversion", "model_cards"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(source),
        ],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (wheel,) = tmp_path.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        pth = archive.read("hf_minitf.pth").decode()
        start = archive.read("hf_minitf.start").decode()
    assert {"hf_minitf.pth", "hf_minitf.start", "_hf_minitf_autoregister.py", "hf_minitf/registration.py"} <= names
    assert pth.startswith("import _hf_minitf_autoregister;")
    assert start.strip() == "_hf_minitf_autoregister:start"


@pytest.mark.parametrize(
    ("value", "installed"),
    [
        ("1", False),
        ("true", False),
        ("YES", False),
        ("on", False),
        ("0", True),
        ("false", True),
        ("no", True),
        ("", True),
    ],
)
def test_the_variable_that_turns_registration_off_is_read_as_a_boolean(tmp_path, value, installed):
    """HF_MINITF_NO_AUTOREGISTER=0 (or false, no, empty) keeps the start-up install; 1, true, yes, on skip it."""
    code = """
        import json, sys
        print(json.dumps(any(type(finder).__name__ == "RegisteringFinder" for finder in sys.meta_path)))
    """
    env = {**os.environ, DISABLE_VARIABLE: value}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) is installed
