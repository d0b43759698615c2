"""`export_native`: every GPT and encoder conversion fixture (and small models covering the other config fields)
exported, loaded in a fresh process where hf_minitf cannot be imported and trust_remote_code is not passed, and
compared with the MiniTF model: logits / states within 1e-5 of max(1, |reference|), 50 greedy tokens identical,
left-padded batch rows equal to their alone-runs; refusals; the folder's files; the command line."""

import ast
import json
import re
import shlex

import pytest
import torch
from factories import DATA, GPT_FIXTURES, make_encoder_sources, make_gpt_sources, make_seq2seq_source, minitf_greedy
from helpers import (
    assert_one_line_error,
    assert_refused_writing_nothing,
    copy_with_config,
    run_cli,
    run_cli_in_a_fresh_process,
    update_json,
)
from isolation import run_without_hf_minitf
from safetensors.torch import load_file
from sentence_transformers import SentenceTransformer
from transformers import AutoTokenizer, GPTNeoXConfig

from hf_minitf import MiniTFEncoderModel, MiniTFGPTForCausalLM
from hf_minitf.cli import main as minitf_main
from hf_minitf.export import ExportRefused, export_native

TOLERANCE = 1e-5
TEXTS = ["the quick brown fox", "hello world, a tiny model", "dog"]


def scaled_diff(actual, expected) -> float:
    actual, expected = torch.as_tensor(actual).float(), torch.as_tensor(expected).float()
    return (actual - expected).abs().max().item() / max(1.0, expected.abs().max().item())


def _inputs(folder, config) -> dict:
    """Logit inputs (the fixture's when there is one), a prompt, the greedy length, and a left-padded batch."""
    name = folder.name
    fixture = DATA / name / "io.safetensors"
    generator = torch.Generator().manual_seed(0)
    if fixture.is_file():
        ids = load_file(fixture)["input_ids"]
    else:
        ids = torch.randint(config.vocab_size, (2, 12), generator=generator)
    learned = config.position_embedding_type == "learned"
    new_tokens = min(50, config.max_position_embeddings - 4) if learned else 50
    long_ids = (
        None
        if learned
        else torch.randint(config.vocab_size, (1, config.max_position_embeddings + 20), generator=generator)
    )
    rows = [ids[0, :3].tolist(), ids[1, :6].tolist()]
    return {
        "ids": ids.tolist(),
        "long_ids": long_ids.tolist() if long_ids is not None else None,
        "prompt": ids[0, :4].tolist(),
        "new_tokens": new_tokens,
        "rows": rows,
        "pad": config.pad_token_id if config.pad_token_id is not None else 0,
    }


def _minitf_padded(model, rows, pad, new_tokens=8) -> list[list[int]]:
    width = max(map(len, rows))
    ids = torch.tensor([[pad] * (width - len(row)) + row for row in rows])
    mask = torch.tensor([[0] * (width - len(row)) + [1] * len(row) for row in rows])
    with torch.no_grad():
        output = model.generate(ids, attention_mask=mask, max_new_tokens=new_tokens, do_sample=False, pad_token_id=pad)
    return output[:, width:].tolist()


NATIVE_RUN = """
import json, torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from sentence_transformers import SentenceTransformer
cases = json.loads({cases!r})
report = {{}}
def padded(model, rows, pad, new_tokens=8):
    width = max(map(len, rows))
    ids = torch.tensor([[pad] * (width - len(row)) + row for row in rows])
    mask = torch.tensor([[0] * (width - len(row)) + [1] * len(row) for row in rows])
    with torch.no_grad():
        output = model.generate(ids, attention_mask=mask, max_new_tokens=new_tokens, do_sample=False,
                                pad_token_id=pad)
    return output[:, width:].tolist()
for name, case in cases.items():
    folder = case["folder"]
    if case["kind"] == "gpt":
        model = AutoModelForCausalLM.from_pretrained(folder).eval()
        model.generation_config.eos_token_id = None
        result = {{"class": type(model).__name__}}
        with torch.no_grad():
            result["logits"] = model(torch.tensor(case["ids"])).logits.tolist()
            if case["long_ids"]:
                result["long_logits"] = model(torch.tensor(case["long_ids"])).logits.tolist()
            prompt = torch.tensor([case["prompt"]])
            greedy = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=case["new_tokens"],
                                    do_sample=False, pad_token_id=case["pad"])
        result["greedy"] = greedy[0, prompt.shape[1]:].tolist()
        result["padded"] = padded(model, case["rows"], case["pad"])
        result["alone"] = [padded(model, [row], case["pad"])[0] for row in case["rows"]]
        tokenizer = AutoTokenizer.from_pretrained(folder)
        result["text_ids"] = [tokenizer(text).input_ids for text in case["texts"]]
    else:
        encoder = SentenceTransformer(folder, device="cpu")
        result = {{"class": type(encoder[0].auto_model).__name__,
                   "embeddings": encoder.encode(case["texts"], convert_to_tensor=True).tolist()}}
        features = encoder.tokenize(case["texts"])
        with torch.no_grad():
            states = encoder[0].auto_model(input_ids=features["input_ids"],
                                           attention_mask=features["attention_mask"]).last_hidden_state
        result["states"] = (states * features["attention_mask"][..., None]).tolist()
        result["input_ids"] = features["input_ids"].tolist()
    report[name] = result
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Each source, its native export, MiniTF's reference outputs, and the native outputs from one fresh process."""
    root = tmp_path_factory.mktemp("native")
    sources = {**make_gpt_sources(root / "gpt"), **make_encoder_sources(root / "encoder")}
    cases, references = {}, {}
    for name, folder in sources.items():
        out = export_native(folder, root / "out" / name)
        if (folder / "modules.json").is_file():
            model = MiniTFEncoderModel.from_pretrained(folder).eval()
            encoder = SentenceTransformer(str(folder), device="cpu")
            features = encoder.tokenize(TEXTS)
            with torch.no_grad():
                states = model(features["input_ids"], attention_mask=features["attention_mask"]).last_hidden_state
            references[name] = {
                "embeddings": encoder.encode(TEXTS, convert_to_tensor=True),
                "states": states * features["attention_mask"][..., None],
                "input_ids": features["input_ids"].tolist(),
            }
            cases[name] = {"kind": "encoder", "folder": str(out), "texts": TEXTS}
            continue
        model = MiniTFGPTForCausalLM.from_pretrained(folder).eval()
        case = {"kind": "gpt", "folder": str(out), "texts": TEXTS, **_inputs(folder, model.config)}
        with torch.no_grad():
            reference = {"logits": model(torch.tensor(case["ids"])).logits}
            if case["long_ids"]:
                reference["long_logits"] = model(torch.tensor(case["long_ids"])).logits
        reference["greedy"] = minitf_greedy(folder, case["prompt"], case["new_tokens"])
        model.generation_config.eos_token_id = None
        reference["padded"] = _minitf_padded(model, case["rows"], case["pad"])
        tokenizer = AutoTokenizer.from_pretrained(folder)
        reference["text_ids"] = [tokenizer(text).input_ids for text in TEXTS]
        references[name] = reference
        cases[name] = case
    native = run_without_hf_minitf(NATIVE_RUN.format(cases=json.dumps(cases)), cwd=str(root), timeout=600)
    return {"sources": sources, "cases": cases, "references": references, "native": native, "root": root}


# The conversion fixtures and the random GPTs of `make_gpt_sources`.
GPT_CASES = [
    *GPT_FIXTURES,
    "bpe_learned",
    "bpe_rope_untied",
    "char_rope_no_bias",
    "char_learned_relu",
    "char_rope_rotate_half",
]
EXPECTED_CLASSES = {"learned": "GPT2LMHeadModel", "rope": "GPTNeoXForCausalLM"}


@pytest.mark.parametrize("name", GPT_CASES)
def test_gpt_export_gives_the_same_logits_and_tokens_without_hf_minitf(exported, name):
    reference, native = exported["references"][name], exported["native"][name]
    config = json.loads((exported["sources"][name] / "config.json").read_text())
    assert native["class"] == EXPECTED_CLASSES[config["position_embedding_type"]]
    assert scaled_diff(native["logits"], reference["logits"]) <= TOLERANCE
    if "long_logits" in reference:  # rotary positions past max_position_embeddings, as MiniTF allows
        assert scaled_diff(native["long_logits"], reference["long_logits"]) <= TOLERANCE
    assert native["greedy"] == reference["greedy"]
    assert len(native["greedy"]) == exported["cases"][name]["new_tokens"]
    assert native["padded"] == reference["padded"] == native["alone"]
    assert native["text_ids"] == reference["text_ids"]


def test_greedy_runs_50_tokens_on_every_model_with_room(exported):
    lengths = {name: len(exported["native"][name]["greedy"]) for name in GPT_CASES}
    assert all(length == 50 for name, length in lengths.items() if name not in ("char_gpt", "frawdllm_learned")), (
        lengths
    )


@pytest.mark.parametrize("name", ["miniembed", "learned_encoder"])
def test_encoder_export_is_a_sentence_transformer_with_the_same_embeddings(exported, name):
    reference, native = exported["references"][name], exported["native"][name]
    assert native["class"] == "XLMRobertaXLModel"
    assert native["input_ids"] == reference["input_ids"]
    assert scaled_diff(native["states"], reference["states"]) <= TOLERANCE
    assert scaled_diff(native["embeddings"], reference["embeddings"]) <= TOLERANCE
    modules = json.loads((exported["root"] / "out" / name / "modules.json").read_text())
    assert [module["type"].rsplit(".", 1)[-1] for module in modules] == ["Transformer", "Pooling", "Normalize"]


@pytest.mark.parametrize("name", ["char_gpt", "frawdllm_rope", "miniembed"])
def test_folder_has_no_code_and_reads_in_transformers_4(exported, name):
    out = exported["root"] / "out" / name
    files = {path.relative_to(out).as_posix() for path in out.rglob("*") if path.is_file()}
    assert not [file for file in files if file.endswith(".py")]
    config = json.loads((out / "config.json").read_text())
    assert "auto_map" not in config
    tokenizer_config = json.loads((out / "tokenizer_config.json").read_text())
    assert tokenizer_config["tokenizer_class"] == "PreTrainedTokenizerFast" and "auto_map" not in tokenizer_config
    source = json.loads((exported["sources"][name] / "config.json").read_text())
    assert tokenizer_config["model_max_length"] == source["max_position_embeddings"]
    if config["model_type"] == "gpt2":
        assert config["n_ctx"] == config["n_positions"] == source["max_position_embeddings"]
    if config["model_type"] == "gpt_neox":
        assert (config["rotary_pct"], config["rotary_emb_base"]) == (1.0, source["rope_theta"])
    card = (out / "README.md").read_text()
    for words in ("trust_remote_code", "Where it came from", str(exported["sources"][name])):
        assert words in card


def test_card_snippets_load_the_model_id_whatever_its_characters(exported, tmp_path):
    """The card's Python snippets are Python whose string is the model id; its shell lines pass it as one word."""
    model_id = 'my "quoted" model,\nit\'s `code` <b>'
    out = export_native(exported["sources"]["char_gpt"], tmp_path / "out", model_id=model_id)
    text = (out / "README.md").read_text()
    python_blocks = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    loaded = [
        node.args[0].value
        for block in python_blocks
        for node in ast.walk(ast.parse(block))
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "from_pretrained"
    ]
    assert loaded and set(loaded) == {model_id}
    serving = next(block for block in re.findall(r"```bash\n(.*?)```", text, re.DOTALL) if "vllm serve" in block)
    words = shlex.split(serving, comments=True)
    assert words[words.index("vllm") : words.index("vllm") + 3] == ["vllm", "serve", model_id]


def test_legacy_rotary_fields_alone_give_the_same_model(exported, tmp_path):
    """What a transformers 4.x reader sees of a GPT-NeoX config (rotary_pct, rotary_emb_base; no rope_parameters)
    builds the same rotary embedding."""
    out = exported["root"] / "out" / "bpe_rope_untied"
    config = json.loads((out / "config.json").read_text())
    legacy = {key: value for key, value in config.items() if key not in ("rope_parameters", "rope_scaling")}
    parsed = GPTNeoXConfig(**{key: value for key, value in legacy.items() if key != "model_type"})
    assert parsed.rope_parameters["partial_rotary_factor"] == 1.0
    assert parsed.rope_parameters["rope_theta"] == 500.0


# Models without an exact native form (`refused_sources`), and what the refusal of each names.
REFUSALS = {
    "seq2seq": "norm_type='scalar_std_plus_eps'",
    "crop": "context_overflow='crop'",
    "no_pad": "pad_token_id=null",
}


@pytest.fixture(scope="module")
def refused_sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("refused")
    sources = make_gpt_sources(root / "gpt")
    crop = copy_with_config(sources["char_gpt"], root / "crop", context_overflow="crop")
    encoder = make_encoder_sources(root / "encoder")["learned_encoder"]
    no_pad = copy_with_config(encoder, root / "no_pad", pad_token_id=None)
    later_norm = make_seq2seq_source(root / "seq2seq")  # hkproj's later norms: std + eps
    update_json(later_norm / "config.json", norm_type="scalar_std_plus_eps")
    return {"seq2seq": later_norm, "crop": crop, "no_pad": no_pad}


@pytest.mark.parametrize("name", REFUSALS)
def test_models_without_an_exact_native_form_are_refused(refused_sources, tmp_path, name):
    assert_refused_writing_nothing(export_native, refused_sources[name], tmp_path / "out", REFUSALS[name])


def test_an_encoders_native_export_carries_no_gguf_files_and_says_where_to_write_one(refused_sources, tmp_path):
    encoder = refused_sources["no_pad"].parent / "encoder" / "learned_encoder"  # what no_pad was copied from
    with pytest.raises(ExportRefused, match="encoder model's native export.*`minitf export gguf`"):
        export_native(encoder, tmp_path / "out", gguf_dtypes=("f16",))
    assert not (tmp_path / "out").exists()


def test_command_line_exports_and_refuses_in_one_line(refused_sources, exported, tmp_path, capsys):
    source = str(exported["sources"]["frawdllm_rope"])
    assert minitf_main(["export", "native", source, str(tmp_path / "ok"), "--no-verify"]) == 0
    assert (tmp_path / "ok" / "model.safetensors").is_file() and "Exported" in capsys.readouterr().out
    refused = run_cli(["export", "native", refused_sources["seq2seq"], tmp_path / "no"], capsys)
    assert_one_line_error(*refused[::2], "minitf export native: error: ", "norm_type=")
    absent = run_cli(["export", "native", tmp_path / "absent", tmp_path / "no"], capsys)
    assert_one_line_error(*absent[::2], "neither a model folder nor a Hub repo id")
    assert not (tmp_path / "no").exists()


def test_export_help_and_wrong_arguments_need_no_torch():
    """`minitf export [FORMAT] --help` and wrong arguments are answered without importing torch or hf_minitf."""
    argvs = [
        ["export", "--help"],
        ["export", "native", "--help"],
        ["export", "gguf", "--help"],
        ["export", "gguf", "src", "out.gguf", "--dtype", "q3_k_s"],
        ["export", "native", "src"],
    ]
    results, heavy = run_cli_in_a_fresh_process(argvs)
    assert heavy == []
    (top, _, _), (native, native_help, _), (gguf_status, gguf_help, _), wrong_dtype, missing_out = results
    assert top == native == gguf_status == 0
    assert "XLMRobertaXLModel" in native_help and "--overwrite" in native_help and "--revision" in native_help
    assert "q8_0" in gguf_help and "gptneox" in gguf_help
    assert wrong_dtype[0] == 2 and "--dtype" in wrong_dtype[2] and wrong_dtype[2].count("\n") == 1
    assert missing_out[0] == 2 and "OUT" in missing_out[2]
