"""CTranslate2 exports of the encoder: float32 embeddings within 1e-5 of SentenceTransformer.encode (the MiniEmbed
fixture, a learned-position encoder without attention biases, a quickstart-size one), int8 close to them, the same
`minitf embed` output as the MiniTF folder, and encoders CTranslate2 cannot pool as the folder does refused.
CTranslate2 runs in a subprocess of its own (its idle threads slow torch in the same process)."""

import json
import re
import shutil

import numpy as np
import pytest
from factories import ENCODER_KINDS, ctranslate2_export, engine_encoder, workspace
from helpers import ENCODER_TEXTS, run_minitf, run_python, update_json
from sentence_transformers import SentenceTransformer

from hf_minitf.cli import main as minitf_main
from hf_minitf.export.ctranslate2 import export_ctranslate2

# The shared encoder texts and one past the position table (cut as SentenceTransformer cuts it).
TEXTS = [*ENCODER_TEXTS, "the dog runs in the park " * 8]
# The least cosine of the int8 export's embeddings to SentenceTransformer's, measured on the MiniEmbed fixture:
# 0.99997 (its 32 features round coarsely); the bound leaves room for another CPU's int8 kernels.
INT8_COSINE = 0.9999


def export_of(kind: str, quantization: str = "float32"):
    """The encoder `kind` (ENCODER_KINDS) exported to CTranslate2, once per test process."""
    if kind == "miniembed":
        return ctranslate2_export("encoder", "miniembed", quantization)
    out = workspace() / f"encoder_{kind}_ct2_{quantization}"
    return out if out.is_dir() else export_ctranslate2(engine_encoder(kind), out, quantization=quantization)


def runner_embeddings(folder, texts: list[str]) -> np.ndarray:
    """`minitf embed`'s runner (hf_minitf.engines) on the export, in a subprocess."""
    return np.array(
        run_python(f"""
            import json
            from hf_minitf.engines import load_engine
            print(json.dumps(load_engine({str(folder)!r}, "embedder").encode({texts!r}).tolist()))
        """)
    )


def reference(kind: str, texts: list[str] = TEXTS) -> np.ndarray:
    return SentenceTransformer(str(engine_encoder(kind))).encode(texts)


@pytest.mark.parametrize("kind", ENCODER_KINDS)
def test_float32_embeddings_equal_sentence_transformers(kind):
    exported = export_of(kind)
    assert {"model.bin", "config.json", "vocabulary.json", "tokenizer.json", "minitf_export.json", "README.md"} <= {
        path.name for path in exported.iterdir()
    }
    info = json.loads((exported / "minitf_export.json").read_text())
    assert (info["engine"], info["kind"], info["family"]) == ("ctranslate2", "embedder", "minitf_encoder")
    expected = reference(kind)
    embeddings = runner_embeddings(exported, TEXTS)
    assert embeddings.shape == expected.shape
    assert np.abs(embeddings - expected).max() <= 1e-5  # unit vectors: 1e-5 of their magnitude


def test_int8_embeddings_keep_the_direction():
    exported, full = export_of("miniembed", "int8"), export_of("miniembed")
    assert json.loads((exported / "minitf_export.json").read_text())["quantization"] == "int8"
    assert (exported / "model.bin").stat().st_size < 0.6 * (full / "model.bin").stat().st_size
    expected = reference("miniembed")
    embeddings = runner_embeddings(exported, TEXTS)
    cosines = (embeddings * expected).sum(axis=1) / np.linalg.norm(embeddings, axis=1)
    assert cosines.min() >= INT8_COSINE, cosines
    assert np.abs(embeddings - expected).max() > 1e-6  # int8 weights, not the float32 ones under another name


def test_readme_code_embeds_as_sentence_transformers():
    """The README's Python code (tokenizers, ctranslate2 and numpy only) gives SentenceTransformer's embeddings."""
    exported = export_of("miniembed")
    code = re.search(r"```python\n(.*?)```", (exported / "README.md").read_text(), re.S).group(1)
    limit = json.loads((engine_encoder("miniembed") / "config.json").read_text())["max_position_embeddings"]
    assert f"enable_truncation({limit})" in code  # the position table, as minitf embed
    code = code.replace("path/to/this/folder", str(exported))
    code = re.sub(r"encode_batch\(\[.*\]\)", f"encode_batch({TEXTS!r})", code)
    code = code.replace("print(embeddings @ embeddings.T)", "import json; print(json.dumps(embeddings.tolist()))")
    assert np.abs(np.array(run_python(code)) - reference("miniembed")).max() <= 1e-5


def test_embed_command_prints_what_the_minitf_folder_prints(capsys):
    """`minitf embed` on the MiniTF folder prints SentenceTransformer.encode's vectors rounded to 6 decimals; on the
    export, the same."""
    source, out = engine_encoder("quickstart"), workspace() / "cli_encoder_ct2"
    assert minitf_main(["export", "ctranslate2", str(source), str(out)]) == 0
    assert str(out) in capsys.readouterr().out
    result = run_minitf("embed", str(out), *TEXTS[:3])
    assert result.returncode == 0, result.stderr
    printed = np.array([json.loads(line) for line in result.stdout.splitlines()])
    assert printed.shape == (3, 128)
    assert np.abs(printed - reference("quickstart", TEXTS[:3]).round(6)).max() <= 2e-6


@pytest.mark.parametrize(
    "file, changes, refusal",
    [
        (
            "1_Pooling/config.json",
            {"pooling_mode": "cls"},
            "pooling_mode='cls'; the export reproduces mean pooling only",
        ),
        ("config.json", {"hidden_act": "quick_gelu"}, "hidden_act='quick_gelu' has no CTranslate2 equivalent"),
    ],
    ids=["pooling-other-than-mean", "activation-ctranslate2-lacks"],
)
def test_what_ctranslate2_cannot_reproduce_is_refused(tmp_path, file, changes, refusal):
    source = shutil.copytree(engine_encoder("learned"), tmp_path / "changed")
    update_json(source / file, **changes)
    with pytest.raises(ValueError, match=refusal):
        export_ctranslate2(source, tmp_path / "out")
    assert not (tmp_path / "out").exists()
