"""ONNX exports of the seq2seq family (`minitf export onnx`): an encoder graph and two cached decoder graphs under
optimum's seq2seq names; ONNX Runtime's greedy and beam-search translations (numpy search) equal MiniTF's
`generate()` token for token, for several beam widths, length penalties and early-stopping settings, on hkproj's
conversion fixture and a tiny translator with the quickstart task's vocabularies; `minitf translate` prints the same text from either folder;
the quantized variants run, their agreement measured; what the graphs cannot reproduce is refused. ONNX Runtime
runs in subprocesses (its idle threads would slow torch here)."""

import functools
import json

import onnx
import pytest
import torch
from factories import hkproj_source, make_seq2seq, quickstart_like_source, workspace
from helpers import run_cli, run_minitf, run_python
from safetensors.torch import load_file
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

from hf_minitf.catalog.exports import ONNX_TRANSLATOR_GRAPHS, onnx_variant_file
from hf_minitf.export.onnx import export_onnx
from hf_minitf.export.onnx_seq2seq import DECODER_INPUTS, ENCODER_INPUTS, past_names, present_names
from hf_minitf.training.tasks import english_italian_pairs

# (num_beams, length_penalty, early_stopping): greedy, and beam search under each stopping rule transformers has.
SEARCHES = [(1, 1.0, False), (2, 1.0, False), (3, 1.0, False), (4, 0.5, True), (3, 2.0, "never"), (5, -1.0, False)]
VARIANTS = ("q8", "fp16", "q4")


@functools.cache
def exported(name: str):
    if name == "hkproj":
        return export_onnx(hkproj_source(), workspace() / "hkproj_onnx")
    return export_onnx(quickstart_like_source(), workspace() / "quickstart_like_onnx", quantize=VARIANTS)


SOURCES = {"hkproj": hkproj_source, "quickstart_like": quickstart_like_source}


def source_ids(name: str) -> list[list[int]]:
    """Source ids to translate: the fixture's own source, and texts in each folder's vocabulary."""
    tokenizer = AutoTokenizer.from_pretrained(SOURCES[name]())
    texts = (
        ["s5 s6 s7 s8", "s12 s30 s4", "s39 s38 s37 s36 s35 s34", "s9"]
        if name == "hkproj"
        else [pair[0] for pair in english_italian_pairs(train=300, held_out=10).held_out[:4]] + ["the cat"]
    )
    return [tokenizer(text).input_ids for text in texts]


def minitf_translations(name: str, sources: list[list[int]]) -> list[list[list[int]]]:
    """MiniTF's `generate()` ids per search of SEARCHES and source, up to the decoder's positions."""
    folder = SOURCES[name]()
    model = AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
    limit = model.config.max_position_embeddings
    with torch.no_grad():
        return [
            [
                model.generate(
                    torch.tensor([ids]),
                    max_length=limit,
                    do_sample=False,
                    num_beams=beams,
                    length_penalty=length_penalty,
                    early_stopping=early_stopping,
                )[0].tolist()
                for ids in sources
            ]
            for beams, length_penalty, early_stopping in SEARCHES
        ]


ORT_TRANSLATE = """
import json
from pathlib import Path
from hf_minitf.engines.dispatch import export_info
from hf_minitf.engines.onnx_translator import OnnxTranslator

folder = Path({folder!r})
results = {{}}
for dtype in {dtypes!r}:
    engine = OnnxTranslator(folder, export_info(folder), dtype)
    rows = []
    for beams, length_penalty, early_stopping in {searches!r}:
        engine.length_penalty, engine.early_stopping = length_penalty, early_stopping
        rows.append([engine.translate_ids(ids, beams, {max_length!r}) for ids in {sources!r}])
    results[dtype] = rows
print(json.dumps(results))
"""


def ort_translations(name: str, sources, dtypes=("fp32",), searches=SEARCHES, max_length=None) -> dict:
    """The export's target ids per variant (`dtypes`), search and source (subprocess)."""
    folder = str(exported(name))
    return run_python(
        ORT_TRANSLATE.format(
            folder=folder, dtypes=list(dtypes), searches=searches, sources=sources, max_length=max_length
        )
    )


@pytest.mark.parametrize("name", ["hkproj", "quickstart_like"])
def test_greedy_and_beam_translations_equal_generate(name):
    sources = source_ids(name)
    expected = minitf_translations(name, sources)
    assert ort_translations(name, sources)["fp32"] == expected
    if name == "quickstart_like":  # (hkproj's fixture runs to its 14 positions, whatever the search)
        lengths = {len(ids) for search in expected for ids in search}
        assert len(lengths) > 2  # translations that end at [EOS] at several lengths, not all at the position limit
        assert any(search != expected[0] for search in expected[1:])  # beam search chose other translations


def test_hkproj_fixture_gives_the_originals_greedy_translation(data_dir):
    """Against the original pytorch-transformer's own greedy decoding of its first source."""
    io = load_file(data_dir / "seq2seq_transformer_trained_like" / "io.safetensors")
    source = io["src"][0][io["src_mask"][0, 0, 0].bool()].tolist()
    greedy = io["greedy_src0"][0].tolist()
    assert ort_translations("hkproj", [source], searches=[(1, 1.0, False)], max_length=len(greedy))["fp32"] == [
        [greedy]
    ]


def test_graph_names_and_dynamic_axes():
    folder = exported("quickstart_like")
    config = json.loads((quickstart_like_source() / "config.json").read_text())
    layers, heads = config["num_hidden_layers"], config["num_attention_heads"]
    head_dim = config["hidden_size"] // heads

    def shapes(values) -> dict[str, list]:
        return {value.name: [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim] for value in values}

    graphs = {role: onnx.load(str(folder / file)).graph for role, file in ONNX_TRANSLATOR_GRAPHS.items()}
    encoder = graphs["encoder"]
    assert list(shapes(encoder.input)) == list(ENCODER_INPUTS)
    hidden = ["batch_size", "encoder_sequence_length", config["hidden_size"]]
    assert shapes(encoder.output) == {"last_hidden_state": hidden}
    first_in, first_out = shapes(graphs["decoder"].input), shapes(graphs["decoder"].output)
    assert list(first_in) == [*DECODER_INPUTS, "encoder_hidden_states"]
    assert list(first_out) == ["logits", *present_names(layers)]
    assert first_out["logits"] == ["batch_size", "decoder_sequence_length", config["vocab_size"]]
    assert first_out["present.0.encoder.key"] == ["batch_size", heads, "encoder_sequence_length", head_dim]
    next_in, next_out = shapes(graphs["decoder_with_past"].input), shapes(graphs["decoder_with_past"].output)
    assert list(next_in) == [*DECODER_INPUTS, *past_names(layers)]
    assert list(next_out) == ["logits", *present_names(layers, ("decoder",))]
    assert next_in["past_key_values.1.decoder.value"] == ["batch_size", heads, "past_decoder_sequence_length", head_dim]
    assert next_in["past_key_values.1.encoder.value"] == ["batch_size", heads, "encoder_sequence_length", head_dim]
    info = json.loads((folder / "minitf_export.json").read_text())
    assert (info["engine"], info["kind"], info["family"]) == ("onnxruntime", "translator", "minitf_seq2seq")
    assert info["files"] == [
        *ONNX_TRANSLATOR_GRAPHS.values(),
        *(onnx_variant_file(graph, name) for name in VARIANTS for graph in ONNX_TRANSLATOR_GRAPHS.values()),
    ]
    assert (folder / "tokenization_minitf_seq2seq.py").is_file() and (folder / "source_tokenizer.json").is_file()


def test_translate_cli_prints_what_the_minitf_folder_prints(capsys):
    """The MiniTF folder in this process (torch), the export in its own (ONNX Runtime)."""
    texts = [pair[0] for pair in english_italian_pairs(train=300, held_out=10).held_out[:3]] + ["the cat"]
    options = ["--num-beams", "3", "--max-new-tokens", "12"]
    expected = run_cli(["translate", quickstart_like_source(), *texts, *options], capsys)
    got = run_minitf("translate", str(exported("quickstart_like")), *texts, *options)
    assert (got.returncode, got.stdout) == expected[:2] and expected[0] == 0
    assert len(expected[1].splitlines()) == 4


def test_quantized_variants_run_and_their_agreement_is_measured(capsys):
    """q8, fp16 and q4 translate; their tokens are compared with float32's (reported, not required equal)."""
    sources = source_ids("quickstart_like")
    searches = [(1, 1.0, False), (3, 1.0, False)]
    results = ort_translations("quickstart_like", sources, ("fp32", *VARIANTS), searches)
    start = json.loads((exported("quickstart_like") / "generation_config.json").read_text())["decoder_start_token_id"]
    lines = []
    for dtype in VARIANTS:
        for search, (beams, _, _) in enumerate(searches):
            pairs = list(zip(results["fp32"][search], results[dtype][search]))
            assert all(ids and ids[0] == start for _, ids in pairs)
            equal = sum(reference == ids for reference, ids in pairs)
            first = [
                next((i for i, (a, b) in enumerate(zip(reference, ids)) if a != b), min(len(reference), len(ids)))
                for reference, ids in pairs
                if reference != ids
            ]
            lines.append(f"{dtype} beams={beams}: {equal}/{len(pairs)} equal to float32, first differences at {first}")
    with capsys.disabled():
        print("\n" + "\n".join(lines))


def test_refusals_write_nothing(tmp_path, data_dir):
    """The untrained hkproj model needs its prefix recomputed (generation_config.use_cache=False); a generation
    setting the runner does not reproduce is named."""
    from hf_minitf.conversion.hkproj import convert_hkproj

    tokenizers = hkproj_source().parent
    convert_hkproj(
        data_dir / "seq2seq_transformer/checkpoint.pt",
        tmp_path / "untrained",
        norm_type="scalar_std_times_eps",
        num_heads=4,
        source_tokenizer=tokenizers / "tokenizer_en.json",
        target_tokenizer=tokenizers / "tokenizer_it.json",
    )
    with pytest.raises(ValueError, match="generation_config.use_cache=False"):
        export_onnx(tmp_path / "untrained", tmp_path / "out")
    make_seq2seq(tmp_path / "ngram")
    generation = json.loads((tmp_path / "ngram" / "generation_config.json").read_text())
    (tmp_path / "ngram" / "generation_config.json").write_text(json.dumps({**generation, "no_repeat_ngram_size": 2}))
    with pytest.raises(ValueError, match="generation_config.no_repeat_ngram_size=2"):
        export_onnx(tmp_path / "ngram", tmp_path / "out")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["ngram", "untrained"]
