"""CTranslate2 exports: every GPT position type and the seq2seq family (hkproj's first norm included) give
MiniTF's greedy tokens in float32, on tiny models and on the conversion fixtures (the originals' own greedy
outputs); configs CTranslate2 cannot hold exactly are refused with the field named and nothing written.
CTranslate2 runs in a subprocess of its own (its idle threads slow torch in the same process)."""

import json
import re

import pytest
import torch
from factories import (
    GPT_KINDS,
    GPT_PROMPTS,
    PAIRS,
    SEQ2SEQ_KINDS,
    ctranslate2_export,
    make_seq2seq,
    model_folder,
    write_frawdllm_fixture_tokenizer,
    write_hkproj_tokenizers,
)
from helpers import run_python
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

from hf_minitf import MiniTFGPTForCausalLM, MiniTFSeq2SeqForConditionalGeneration
from hf_minitf.conversion.char_gpt import convert_char_gpt
from hf_minitf.conversion.frawdllm import convert_frawdllm
from hf_minitf.conversion.hkproj import convert_hkproj
from hf_minitf.export.ctranslate2 import export_ctranslate2

NEW_TOKENS = 20


def engine_generate(folder, prompts: list[list[int]], max_new_tokens: int) -> list[list[int]]:
    """Greedy new ids per prompt (end token included) from the export's ctranslate2.Generator, all prompts in one
    batch, in a subprocess that imports ctranslate2 alone."""
    return run_python(f"""
        import json, ctranslate2
        folder = {str(folder)!r}
        vocabulary = json.load(open(folder + "/vocabulary.json"))
        eos = json.load(open(folder + "/generation_config.json")).get("eos_token_id")
        generator = ctranslate2.Generator(folder, device="cpu")
        results = generator.generate_batch([[vocabulary[i] for i in ids] for ids in {prompts!r}],
                                           max_length={max_new_tokens}, sampling_topk=1, include_prompt_in_result=False,
                                           end_token=[] if eos is None else [vocabulary[eos]], return_end_token=True)
        print(json.dumps([result.sequences_ids[0] for result in results]))
    """)


def engine_translate_ids(folder, sources: list[list[int]], max_length: int) -> list[list[int]]:
    """Greedy target ids (start token first) for source ids, through the exported vocabularies (subprocess)."""
    return run_python(f"""
        import json, ctranslate2
        folder = {str(folder)!r}
        source = json.load(open(folder + "/source_vocabulary.json"))
        target = {{token: index for index, token in enumerate(json.load(open(folder + "/target_vocabulary.json")))}}
        config = json.load(open(folder + "/config.json"))
        translator = ctranslate2.Translator(folder, device="cpu")
        results = translator.translate_batch([[source[i] for i in ids] for ids in {sources!r}], beam_size=1,
                                             max_decoding_length={max_length - 1}, return_end_token=True)
        start = target[config["decoder_start_token"]]
        print(json.dumps([[start] + [target[t] for t in result.hypotheses[0]] for result in results]))
    """)


def minitf_greedy(folder, prompts: list[list[int]], max_new_tokens: int) -> list[list[int]]:
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    with torch.no_grad():
        return [
            model.generate(torch.tensor([prompt]), max_new_tokens=max_new_tokens, do_sample=False)[
                0, len(prompt) :
            ].tolist()
            for prompt in prompts
        ]


@pytest.mark.parametrize("kind", list(GPT_KINDS))
def test_gpt_greedy_tokens_equal_minitf(kind):
    folder = model_folder("gpt", kind)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    prompts = [tokenizer(prompt, add_special_tokens=False).input_ids for prompt in GPT_PROMPTS]
    expected = minitf_greedy(folder, prompts, NEW_TOKENS)
    exported = ctranslate2_export("gpt", kind)
    assert engine_generate(exported, prompts, NEW_TOKENS) == expected
    assert {"model.bin", "vocabulary.json", "config.json", "tokenizer.json", "README.md"} <= {
        path.name for path in exported.iterdir()
    }
    config = json.loads((exported / "config.json").read_text())
    assert config["layer_norm_epsilon"] == 1e-5


@pytest.mark.parametrize("kind", list(SEQ2SEQ_KINDS))
def test_translations_equal_minitf(kind):
    folder = model_folder("seq2seq", kind)
    model = AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    sources = [tokenizer(source).input_ids for source, _ in PAIRS]
    limit = model.config.max_position_embeddings
    with torch.no_grad():
        expected = [
            model.generate(torch.tensor([ids]), max_length=limit, do_sample=False)[0].tolist() for ids in sources
        ]
    assert engine_translate_ids(ctranslate2_export("seq2seq", kind), sources, limit) == expected


def test_translator_readme_code_translates_as_minitf():
    """The README's Python code (tokenizers + ctranslate2 only) gives the pipeline's translations."""
    folder = model_folder("seq2seq", "layer_norm")
    exported = ctranslate2_export("seq2seq", "layer_norm")
    readme = (exported / "README.md").read_text()
    code = re.search(r"```python\n(.*?)```", readme, re.S).group(1)
    limit = json.loads((folder / "config.json").read_text())["max_position_embeddings"]
    assert f"max_decoding_length={limit - 1})" in code  # within the decoder's positions, as minitf translate
    code = code.replace("path/to/this/folder", str(exported))
    code = re.sub(r"for text in \[.*\]\]", f"for text in {[source for source, _ in PAIRS]!r}]", code)
    printed = run_python(
        code.replace("    print(", "    lines.append(").replace(
            "for result in results:", "lines = []\nfor result in results:"
        )
        + "\nimport json\nprint(json.dumps(lines))"
    )
    model = AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    with torch.no_grad():
        expected = [
            tokenizer.decode(
                model.generate(**tokenizer(source, return_tensors="pt"), max_length=limit, do_sample=False)[0],
                skip_special_tokens=True,
            )
            for source, _ in PAIRS
        ]
    assert printed == expected


@pytest.mark.parametrize("family,kind", [("gpt", "learned"), ("seq2seq", "layer_norm")])
def test_int8_export_stores_int8_weights_and_runs(family, kind):
    exported = ctranslate2_export(family, kind, "int8")
    full = ctranslate2_export(family, kind)
    assert json.loads((exported / "minitf_export.json").read_text())["quantization"] == "int8"
    assert (exported / "model.bin").stat().st_size < 0.6 * (full / "model.bin").stat().st_size
    if family == "gpt":
        new = engine_generate(exported, [[5, 6, 7]], 5)
        assert len(new[0]) == 5
    else:
        assert len(engine_translate_ids(exported, [[2, 5, 6, 3]], 6)[0]) >= 2


# --------------------------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("norm_type", "per_feature_std_plus_eps", "norm_type='per_feature_std_plus_eps'"),
        ("hidden_act", "quick_gelu", "hidden_act='quick_gelu'"),
    ],
)
def test_configs_without_an_exact_form_are_refused(tmp_path, field, value, message):
    folder = make_seq2seq(tmp_path / "model", **{field: value})
    with pytest.raises(ValueError, match=re.escape(message)):
        export_ctranslate2(folder, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert [path.name for path in tmp_path.iterdir()] == ["model"]


def test_bad_quantization_is_refused(tmp_path):
    with pytest.raises(ValueError, match="quantization must be one of"):
        export_ctranslate2(model_folder("gpt", "learned"), tmp_path / "out", quantization="int4")
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------------ conversion fixtures


def test_char_gpt_fixture(data_dir, tmp_path):
    """The converted char GPT slides its window past block_size (context_overflow='crop'): refused. Within the
    context it is the same function, so with context_overflow='error' it exports and gives the original's greedy
    tokens up to block_size."""
    fixture = data_dir / "char_gpt"
    convert_char_gpt(fixture / "checkpoint.pt", tmp_path / "converted", vocab=fixture / "vocab.json", num_heads=4)
    with pytest.raises(ValueError, match="context_overflow='crop'"):
        export_ctranslate2(tmp_path / "converted", tmp_path / "out")
    assert not (tmp_path / "out").exists()
    model = MiniTFGPTForCausalLM.from_pretrained(tmp_path / "converted")
    model.config.context_overflow = "error"
    model.generation_config.use_cache = True
    model.save_pretrained(tmp_path / "bounded")
    AutoTokenizer.from_pretrained(tmp_path / "converted").save_pretrained(tmp_path / "bounded")
    export_ctranslate2(tmp_path / "bounded", tmp_path / "out")
    greedy = load_file(fixture / "io.safetensors")["greedy_from_4"][0].tolist()
    block_size = model.config.max_position_embeddings
    assert engine_generate(tmp_path / "out", [greedy[:4]], block_size - 4) == [greedy[4:block_size]]


@pytest.mark.parametrize("name", ["frawdllm_learned", "frawdllm_rope"])
def test_frawdllm_fixtures_give_the_originals_greedy_tokens(data_dir, tmp_path, name):
    tokenizer = write_frawdllm_fixture_tokenizer(tmp_path / "tokenizer.json")
    convert_frawdllm(data_dir / name / "checkpoint.pt", tmp_path / "converted", tokenizer=tokenizer)
    export_ctranslate2(tmp_path / "converted", tmp_path / "out")
    greedy = load_file(data_dir / name / "io.safetensors")["greedy_from_4"][0].tolist()
    assert engine_generate(tmp_path / "out", [greedy[:4]], len(greedy) - 4) == [greedy[4:]]


def test_hkproj_fixtures(data_dir, tmp_path):
    """The trained-like hkproj model (its first norm) gives the original's greedy translation; the untrained one,
    whose -1e9 mask overflows so that only recomputing the prefix reproduces it, is refused."""
    write_hkproj_tokenizers(tmp_path)
    options = dict(
        source_tokenizer=tmp_path / "tokenizer_en.json", target_tokenizer=tmp_path / "tokenizer_it.json", num_heads=4
    )
    convert_hkproj(
        data_dir / "seq2seq_transformer/checkpoint.pt",
        tmp_path / "untrained",
        norm_type="scalar_std_times_eps",
        **options,
    )
    with pytest.raises(ValueError, match="generation_config.use_cache=False"):
        export_ctranslate2(tmp_path / "untrained", tmp_path / "out")
    assert not (tmp_path / "out").exists()

    fixture = data_dir / "seq2seq_transformer_trained_like"
    convert_hkproj(fixture / "checkpoint.pt", tmp_path / "trained", **options)
    assert (
        MiniTFSeq2SeqForConditionalGeneration.from_pretrained(tmp_path / "trained").config.norm_type
        == "scalar_std_times_eps"
    )
    export_ctranslate2(tmp_path / "trained", tmp_path / "out")
    io = load_file(fixture / "io.safetensors")
    source = io["src"][0][io["src_mask"][0, 0, 0].bool()].tolist()
    greedy = io["greedy_src0"][0].tolist()
    assert engine_translate_ids(tmp_path / "out", [source], len(greedy)) == [greedy]


def test_the_old_src_keyword_still_works_with_a_deprecation_warning(tmp_path):
    """export_ctranslate2, export_onnx and export_web named their first argument `src` until 0.1 (now `source`)."""
    with pytest.warns(DeprecationWarning, match=r"export_ctranslate2\(src=...\) is now export_ctranslate2\(source="):
        out = export_ctranslate2(src=model_folder("gpt", "learned"), out=tmp_path / "old")
    assert (out / "model.bin").is_file()
    with pytest.raises(TypeError, match="got the source twice"):
        export_ctranslate2(model_folder("gpt", "learned"), tmp_path / "both", src="x")
