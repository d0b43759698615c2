"""The translator's native export (`minitf export native`): transformers' own PegasusForConditionalGeneration with
one joint tokenizer, loaded without remote code. Greedy and beam-search translations equal MiniTF's `generate()`
token for token (target ids shifted by the source vocabulary size) and decode to the same text, on hkproj's
conversion fixture (its first norm, eps times std) and a quickstart-like translator (LayerNorm eps 1e-6, and 0.1); the
log-probabilities agree within float32 rounding; the export verifies itself; what Pegasus cannot compute is
refused with nothing written."""

import json
import shutil

import pytest
import torch
from factories import SAVED_MODEL_FILES, hkproj_source, quickstart_like_source
from helpers import run_cli
from tokenizers import models, pre_tokenizers
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

from hf_minitf import MiniTFSeq2SeqForConditionalGeneration
from hf_minitf.export import ExportRefused, export_native
from hf_minitf.export.native_seq2seq import JOINT_MARK, joint_tokenizer_json
from hf_minitf.training.tasks import english_italian_pairs


def large_eps_source(tmp_path_factory) -> object:
    """The quickstart-like translator with LayerNorm eps 0.1: far from Pegasus's 1e-5, so that only the residual
    scaling makes the export exact."""
    folder = tmp_path_factory.mktemp("large_eps") / "translator"
    shutil.copytree(quickstart_like_source(), folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "layer_norm_eps": 0.1}))
    return folder


SOURCES = {
    "hkproj": lambda _: hkproj_source(),
    "quickstart_like": lambda _: quickstart_like_source(),
    "large_eps": large_eps_source,
}
# (num_beams, length_penalty, early_stopping): greedy, and beam search under each stopping rule
SEARCHES = [(1, 1.0, False), (3, 1.0, False), (4, 0.5, True), (3, 2.0, "never")]


def texts(name: str) -> list[str]:
    if name == "hkproj":
        return ["s4 s5 s6", "s10 s11 s12 s13 s14 s15", "s7", "s20 s8 s33 s9"]
    return [source for source, _ in english_italian_pairs(train=300, held_out=10).held_out[:4]] + ["the cat"]


@pytest.fixture(scope="module", params=sorted(SOURCES))
def exported(request, tmp_path_factory):
    source = SOURCES[request.param](tmp_path_factory)
    out = export_native(source, tmp_path_factory.mktemp("native") / "translator")
    minitf = MiniTFSeq2SeqForConditionalGeneration.from_pretrained(source).eval()
    native = AutoModelForSeq2SeqLM.from_pretrained(out, trust_remote_code=False).eval()
    return {
        "name": request.param,
        "source": source,
        "out": out,
        "minitf": minitf,
        "minitf_tokenizer": AutoTokenizer.from_pretrained(source),
        "native": native,
        "native_tokenizer": AutoTokenizer.from_pretrained(out, trust_remote_code=False),
    }


def test_the_folder_is_pegasus_without_code(exported):
    out = exported["out"]
    assert type(exported["native"]).__name__ == "PegasusForConditionalGeneration"
    assert not list(out.glob("*.py")) and "auto_map" not in json.loads((out / "config.json").read_text())
    assert sorted(path.name for path in out.iterdir()) == sorted(SAVED_MODEL_FILES)


@pytest.mark.parametrize("num_beams,length_penalty,early_stopping", SEARCHES)
def test_translations_equal_minitf_token_for_token(exported, num_beams, length_penalty, early_stopping):
    shift = exported["minitf"].config.src_vocab_size
    options = dict(num_beams=num_beams, length_penalty=length_penalty, early_stopping=early_stopping)
    for text in texts(exported["name"]):
        source_ids = exported["minitf_tokenizer"](text, return_tensors="pt")
        native_ids = exported["native_tokenizer"](text, return_tensors="pt")
        assert native_ids.input_ids.tolist() == source_ids.input_ids.tolist()  # source ids keep their numbers
        with torch.no_grad():
            expected = exported["minitf"].generate(**source_ids, **options)[0]
            produced = exported["native"].generate(**native_ids, **options)[0]
        assert (produced - shift).tolist() == expected.tolist(), text
        assert exported["native_tokenizer"].decode(produced, skip_special_tokens=True) == exported[
            "minitf_tokenizer"
        ].decode(expected, skip_special_tokens=True)


def test_log_probabilities_agree_and_no_source_token_is_scored(exported):
    minitf, native = exported["minitf"], exported["native"]
    shift = minitf.config.src_vocab_size
    source = exported["minitf_tokenizer"](texts(exported["name"])[1], return_tensors="pt")
    start = minitf.generation_config.decoder_start_token_id
    decoder_ids = torch.tensor([[start, 5, 7, 9]])
    with torch.no_grad():
        expected = minitf(**source, decoder_input_ids=decoder_ids).logits.float().log_softmax(-1)
        logits = native(**source, decoder_input_ids=decoder_ids + shift).logits
    assert torch.isneginf(logits[..., :shift]).all()
    produced = logits[..., shift:].log_softmax(-1)
    assert (produced - expected).abs().max() <= 1e-5 * expected.abs().max()


def test_the_export_verifies_its_translations(exported, tmp_path, capsys):
    status, printed, err = run_cli(["verify", exported["out"], "--prompts", "4", "--json"], capsys)
    assert status == 0, err
    (run,) = json.loads(printed)["runs"]
    assert (run["runtime"], run["claims_exact"], run["agrees"]) == ("transformers", True, True), run


def test_refused_translators_write_nothing(tmp_path):
    later_norm = tmp_path / "later_norm"
    shutil.copytree(hkproj_source(), later_norm)
    config = json.loads((later_norm / "config.json").read_text())
    (later_norm / "config.json").write_text(json.dumps({**config, "norm_type": "scalar_std_plus_eps"}))
    with pytest.raises(ExportRefused, match="norm_type='scalar_std_plus_eps'"):
        export_native(later_norm, tmp_path / "out")
    uncached = tmp_path / "uncached"
    shutil.copytree(hkproj_source(), uncached)
    generation = json.loads((uncached / "generation_config.json").read_text())
    (uncached / "generation_config.json").write_text(json.dumps({**generation, "use_cache": False}))
    with pytest.raises(ExportRefused, match="generation_config.use_cache=False"):
        export_native(uncached, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_the_joint_vocabulary_refuses_what_it_cannot_hold():
    def word_level(vocab: dict[str, int]) -> dict:
        return {"model": {"type": "WordLevel", "vocab": vocab}, "added_tokens": [], "decoder": None}

    joint = joint_tokenizer_json(word_level({"a": 0, "b": 1}), word_level({"a": 0, "c": 1}), 2)
    assert joint["model"]["vocab"] == {"a": 0, "b": 1, f"{JOINT_MARK}a": 2, f"{JOINT_MARK}c": 3}
    with pytest.raises(ExportRefused, match="WordLevel"):
        joint_tokenizer_json({"model": {"type": "BPE", "vocab": {}}}, word_level({"a": 0}), 1)
    with pytest.raises(ExportRefused, match="holds"):
        joint_tokenizer_json(word_level({f"{JOINT_MARK}x": 0}), word_level({"a": 0}), 1)
    with pytest.raises(ExportRefused, match="decoder"):
        joint_tokenizer_json(word_level({"a": 0}), {**word_level({"a": 0}), "decoder": {"type": "BPEDecoder"}}, 1)


def test_a_mark_typed_in_a_source_text_never_reaches_a_target_id():
    from tokenizers import Tokenizer

    def word_level(vocab: dict[str, int]) -> dict:
        tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
        tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
        return json.loads(tokenizer.to_str())

    source, target = word_level({"[UNK]": 0, "a": 1}), word_level({"[UNK]": 0, ",": 1})
    joint = Tokenizer.from_str(json.dumps(joint_tokenizer_json(source, target, 2)))
    alone = Tokenizer.from_str(json.dumps(source))
    for text in ("a , a", f"a {JOINT_MARK}, a", f"a{JOINT_MARK},"):
        assert joint.encode(text).ids == alone.encode(text).ids, text
    assert joint.decode([3, 3]) == ", ,"  # target ids decode to the target's text
