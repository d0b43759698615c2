#!/usr/bin/env bash
# `make test-wheel`: hf-minitf as users get it. Builds the sdist and, from it, the wheel; installs the wheel (not
# editable, no extra) into a fresh venv, the pinned torch first; then, from a folder outside the checkout, runs
# what a new user runs: `minitf --help`, `python -m hf_minitf --help`, the quickstart (every held-out figure at
# 100%), a fresh process loading its folders with no import, every base command, and the commands that need an extra
# (one line naming it). Then, with pytest and TRL added, the README's examples (tests/test_docs.py) and the
# fresh-process registration tests (tests/test_registration.py) against the installed wheel.
#
# PYTHON picks the interpreter (another Python: PYTHON=~/.pyenv/versions/3.12.1/bin/python3); KEEP=1 keeps the
# folder it works in. Any missing dependency fails it.
set -euo pipefail

REPO="$(cd "$(dirname "$0")/../.." && pwd)"
PYTHON="${PYTHON:-python3}"
TORCH_VERSION="${TORCH_VERSION:-2.13.0}"
BUILD_PYTHON="${BUILD_PYTHON:-$REPO/.venv/bin/python}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/hf_minitf_wheel.XXXXXX")"
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$WORK"' EXIT

step() { printf '\n== %s\n' "$*"; }
fail() { printf 'test-wheel: FAILED: %s\n' "$*" >&2; exit 1; }
# expect_error STATUS WORDS COMMAND...: the command exits with STATUS, its stderr one line holding WORDS.
expect_error() {
    local status="$1" words="$2"; shift 2
    set +e; "$@" >"$WORK/out.txt" 2>"$WORK/err.txt"; local got=$?; set -e
    [ "$got" = "$status" ] || fail "\`$*\` exited $got, not $status: $(cat "$WORK/err.txt")"
    [ "$(wc -l <"$WORK/err.txt")" = 1 ] || fail "\`$*\` said more than one line: $(cat "$WORK/err.txt")"
    grep -qF -- "$words" "$WORK/err.txt" || fail "\`$*\` did not say '$words': $(cat "$WORK/err.txt")"
    cat "$WORK/err.txt"
}

step "build the sdist, then the wheel from it ($("$BUILD_PYTHON" -m build --version))"
"$BUILD_PYTHON" -m build --outdir "$WORK/dist" "$REPO" >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; fail "build"; }
# setuptools' own warnings (a package left out of `packages`, a deprecated setting), not distutils' notes
! grep -E "[A-Za-z]Warning|absent from" "$WORK/build.log" || fail "setuptools warned (see above)"
WHEEL="$(ls "$WORK"/dist/*.whl)"
ls -l "$WORK/dist"

step "a fresh venv ($("$PYTHON" --version)): torch $TORCH_VERSION, then the wheel alone"
"$PYTHON" -m venv "$WORK/venv"
BIN="$WORK/venv/bin"
"$BIN/python" -m pip install --quiet --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
"$BIN/python" -m pip install --quiet "torch==$TORCH_VERSION" 2>&1 | grep -v "^WARNING: Location" || true
"$BIN/python" -m pip install --quiet "$WHEEL" 2>&1 | grep -v "^WARNING: Location" || true
"$BIN/python" -m pip check

mkdir "$WORK/user" && cd "$WORK/user"
export HF_HOME="$WORK/hf_home" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1
unset HF_MINITF_NO_AUTOREGISTER PYTHONPATH

step "the installed package, its metadata and its start-up files"
"$BIN/python" - "$WORK/venv" <<'PY'
import importlib.metadata as metadata, pathlib, site, sys
import hf_minitf
assert hf_minitf.__file__.startswith(sys.argv[1]), f"hf_minitf imported from {hf_minitf.__file__}, not the venv"
meta = metadata.metadata("hf-minitf")
files = {str(path) for path in metadata.files("hf-minitf")}
assert {"hf_minitf/py.typed", "hf_minitf.pth", "hf_minitf.start", "hf_minitf/__main__.py"} <= files, files
assert any(name.endswith("licenses/LICENSE") for name in files), "no LICENSE in the wheel"
assert meta["License-Expression"] == "MIT" and meta.get_all("Classifier"), "license or classifiers missing"
print("hf-minitf", meta["Version"], "from", pathlib.Path(hf_minitf.__file__).parent)
PY
"$BIN/minitf" --version
"$BIN/minitf" --help >/dev/null
"$BIN/python" -m hf_minitf --help | head -1

step "every module of the package but the extras' imports with the base dependencies alone"
"$BIN/python" - <<'PY'
import importlib, pkgutil
import hf_minitf
from hf_minitf.catalog.packaging import missing_extra
extras = {}
for module in pkgutil.walk_packages(hf_minitf.__path__, "hf_minitf."):
    if module.name.endswith(".__main__"):  # `python -m` entry points: they run a command
        continue
    try:
        importlib.import_module(module.name)
    except ImportError as error:
        if missing_extra(error) is None:
            raise
        extras[module.name] = error.name
print(f"imported every module; needing an extra: {extras}")
# Only the server's modules need an extra (serve: fastapi), and the server's own do: it reaches no other module.
assert extras and all(name.startswith("hf_minitf.serving.") and extra == "fastapi" for name, extra in extras.items()), extras
PY

step "minitf quickstart (the main job)"
"$BIN/minitf" quickstart --out q --no-progress | tee quickstart.txt
[ "$(grep -c "held-out.*: 100%" quickstart.txt)" = 3 ] || fail "a held-out figure of the quickstart is below 100%"
grep -qF 'pip install "hf-minitf[plot]" adds loss_curve.png' quickstart.txt || fail "the report promises a loss curve"
! ls q/*/loss_curve.png 2>/dev/null || fail "a loss curve without matplotlib?"

step "a fresh process loads the folders with no import and no flag"
"$BIN/python" - <<'PY'
from sentence_transformers import SentenceTransformer
from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer, pipeline
gpt = AutoModelForCausalLM.from_pretrained("q/gpt")
print(pipeline("text-generation", model="q/gpt")("417:", max_new_tokens=30, do_sample=False)[0]["generated_text"])
print(SentenceTransformer("q/encoder").encode(["a cat sits on the mat"]).shape)
print(pipeline("minitf-translation", model="q/seq2seq")("the cat sleeps")[0]["translation_text"])
modules = {type(gpt).__module__, type(AutoModelForSeq2SeqLM.from_pretrained("q/seq2seq")).__module__,
           type(AutoTokenizer.from_pretrained("q/seq2seq")).__module__}
assert all(name.startswith("hf_minitf.modeling.") for name in modules), modules
PY

step "the base commands: train (every family), generate, embed, translate, eval, info, convert"
printf 'abcdefghijklmnopqrstuvwxyz\n%.0s' {1..40} >letters.txt
printf 'a cat sits\ta cat is sitting\na dog runs\ta dog is running\nthe sun shines\tthe sun is shining\n%.0s' {1..8} >pairs.tsv
printf '{"source": "one two", "target": "uno due"}\n{"source": "two three", "target": "due tre"}\n%.0s' {1..8} >pairs.jsonl
"$BIN/minitf" train gpt --data letters.txt --out my_gpt --max-steps 2 --no-progress
"$BIN/minitf" train encoder --data pairs.tsv --out my_encoder --max-steps 2 --no-progress
"$BIN/minitf" train seq2seq --data pairs.jsonl --out my_translator --max-steps 2 --no-progress
"$BIN/minitf" generate q/gpt "342:" --max-new-tokens 30
"$BIN/minitf" embed q/encoder "a cat sits" "a dog runs" --similarity
"$BIN/minitf" translate q/seq2seq "the cat sleeps"
"$BIN/minitf" eval my_gpt --data letters.txt --no-progress
"$BIN/minitf" eval my_encoder --data pairs.tsv --no-progress
"$BIN/minitf" info q/gpt
"$BIN/minitf" convert char-gpt "$REPO/tests/data/char_gpt/checkpoint.pt" --vocab "$REPO/tests/data/char_gpt/vocab.json" \
    --num-heads 4 --out char_gpt_hf
"$BIN/minitf" export native q/gpt gpt_native
"$BIN/minitf" export gguf q/gpt gpt.gguf

step "the commands of an extra say which to install, in one line"
expect_error 2 'pip install "hf-minitf[serve]"' "$BIN/minitf" serve q/gpt --port 1
expect_error 2 'pip install "hf-minitf[engines]"' "$BIN/minitf" export onnx q/gpt gpt_onnx
expect_error 2 'pip install "hf-minitf[engines]"' "$BIN/minitf" export ctranslate2 q/gpt gpt_ct2
expect_error 2 'pip install "hf-minitf[eval]"' "$BIN/minitf" eval my_translator --data pairs.jsonl --no-progress

step "the README's examples and the fresh-process tests, from the wheel (pytest and TRL added)"
"$BIN/python" -m pip install --quiet pytest trl 2>&1 | grep -v "^WARNING: Location" || true
"$BIN/python" -m pytest -q -p no:cacheprovider --rootdir "$REPO" "$REPO/tests/test_docs.py" -k "README"
"$BIN/python" -m pytest -q -p no:cacheprovider --rootdir "$REPO" "$REPO/tests/test_registration.py" \
    -k "not wheel_carries"

step "test-wheel passed ($("$BIN/python" --version), torch $TORCH_VERSION)"
