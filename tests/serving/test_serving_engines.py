"""The engine a MiniTF folder runs on (`hf_minitf.serving.engine_cache`): `minitf serve`'s default (auto) answers
greedy requests on an ONNX export made at start-up beside the folder and verified against it, with generate()'s
text, streamed and concurrent; the export is reused while the weights are unchanged and made again when they
change; a failed check falls back to torch saying why; an engine whose extra is missing is a clear error (auto skips
it); `minitf generate / translate / embed --engine` run the same exports."""

import importlib.util
import json
import re
import shutil
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest
import torch
from factories import ENGINE_TEXT, PAIRS, SENTENCES, make_encoder, make_gpt, make_seq2seq, minitf_greedy, prompt_ids
from sentence_transformers import SentenceTransformer
from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

from hf_minitf.catalog.engines import ENGINE_CACHE_FILE, ENGINE_CACHE_FOLDER
from hf_minitf.cli import main
from hf_minitf.serving.engine_cache import cache_folder, choose_engine
from hf_minitf.serving.process import server_process

PROMPTS = [ENGINE_TEXT[:5], ENGINE_TEXT[7:9], ENGINE_TEXT[3:4], ENGINE_TEXT[10:18]]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("engine_folders")
    return {
        "gpt": make_gpt(root / "gpt", max_position_embeddings=48),
        "seq2seq": make_seq2seq(root / "seq2seq", seed=4),
        "encoder": make_encoder(root / "encoder"),
    }


@pytest.fixture(scope="module")
def server(folders, tmp_path_factory):
    """`minitf serve` on the three folders with its default engine: each exported and verified at start-up."""
    log = tmp_path_factory.mktemp("engines_log") / "server.log"
    with server_process(list(folders.values()), "--log-level", "warning", log=log, timeout=600) as running:
        yield running, log


def greedy_text(folder, prompt: str, max_new_tokens: int) -> str:
    model, tokenizer = AutoModelForCausalLM.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)
    inputs = tokenizer(prompt, return_tensors="pt")
    with torch.no_grad():
        output = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False)
    return tokenizer.decode(output[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)


def complete(url: str, body: dict) -> dict:
    answer = httpx.post(url + "/v1/completions", json=body, timeout=120)
    assert answer.status_code == 200, answer.text
    return answer.json()["choices"][0]


def streamed(url: str, body: dict) -> list[str]:
    with httpx.stream("POST", url + "/v1/completions", json={**body, "stream": True}, timeout=120) as stream:
        lines = [line[len("data: ") :] for line in stream.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    return [json.loads(line)["choices"][0]["text"] for line in lines[:-1]]


def test_serve_by_default_answers_greedy_requests_on_the_verified_onnx_export(server, folders):
    running, log = server
    startup = next(line for line in log.read_text().splitlines() if line.startswith("minitf serve: http"))
    for name in ("gpt", "seq2seq", "encoder"):
        assert re.search(rf"{re.escape(str(folders[name]))} \([a-z0-9]+, onnxruntime \(made in ", startup), startup
        assert (cache_folder(folders[name], "onnx") / ENGINE_CACHE_FILE).is_file()
    assert "verified: greedy tokens equal" in startup and "torch for stops, penalties, sampling" in startup
    url, gpt = running.url, str(folders["gpt"])
    for prompt, max_tokens in zip(PROMPTS, (12, 5, 1, 9)):
        body = {"model": gpt, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0}
        expected = greedy_text(gpt, prompt, max_tokens)
        assert complete(url, body)["text"] == expected
        chunks = streamed(url, body)
        assert "".join(chunks) == expected
        assert len([chunk for chunk in chunks if chunk]) > 1 or max_tokens == 1  # token by token, not all at once
    # A stop string runs on torch, beside the engine.
    text = greedy_text(gpt, PROMPTS[0], 12)
    stopped = complete(url, {"model": gpt, "prompt": PROMPTS[0], "max_tokens": 12, "temperature": 0, "stop": text[4:6]})
    assert stopped["text"] == text[: text.index(text[4:6])] and stopped["finish_reason"] == "stop"


def test_sixteen_concurrent_greedy_requests_each_get_their_own_text(server, folders):
    running, _ = server
    jobs = [(PROMPTS[n % 4] + ENGINE_TEXT[20 : 20 + n % 3], 3 + n % 7) for n in range(16)]
    expected = [greedy_text(folders["gpt"], prompt, max_tokens) for prompt, max_tokens in jobs]

    def ask(job):
        prompt, max_tokens = job
        return complete(
            running.url, {"model": str(folders["gpt"]), "prompt": prompt, "max_tokens": max_tokens, "temperature": 0}
        )["text"]

    with ThreadPoolExecutor(16) as pool:
        assert list(pool.map(ask, jobs)) == expected


def test_the_translator_and_the_encoder_answer_as_in_torch(server, folders):
    running, _ = server
    seq2seq = str(folders["seq2seq"])
    model, tokenizer = AutoModelForSeq2SeqLM.from_pretrained(seq2seq).eval(), AutoTokenizer.from_pretrained(seq2seq)
    for source, _ in PAIRS[:3]:
        with torch.no_grad():
            output = model.generate(**tokenizer(source, return_tensors="pt"), max_new_tokens=8)
        expected = tokenizer.decode(output[0], skip_special_tokens=True)
        assert complete(running.url, {"model": seq2seq, "prompt": source, "max_tokens": 8})["text"] == expected
    answer = httpx.post(
        running.url + "/v1/embeddings", json={"model": str(folders["encoder"]), "input": SENTENCES}, timeout=120
    )
    vectors = np.array([row["embedding"] for row in answer.json()["data"]])
    expected_vectors = SentenceTransformer(str(folders["encoder"])).encode(SENTENCES)
    assert np.abs(vectors - expected_vectors).max() <= 1e-5 * np.abs(expected_vectors).max()


def test_the_export_is_reused_while_the_weights_are_unchanged_and_made_again_when_they_change(
    server, folders, tmp_path
):
    folder = folders["gpt"]
    graph = cache_folder(folder, "onnx") / "onnx" / "model.onnx"
    made = graph.stat().st_mtime_ns
    reused = choose_engine(folder, "onnx")
    assert reused.engine == "onnx" and "reused" in reused.reason and graph.stat().st_mtime_ns == made
    prompt = prompt_ids(folder)
    before = reused.runner.generate([prompt], 12)[0]
    assert before == minitf_greedy(folder, prompt, 12)[: len(before)]
    other = make_gpt(tmp_path / "other", max_position_embeddings=48, seed=9)
    shutil.copyfile(other / "model.safetensors", folder / "model.safetensors")
    remade = choose_engine(folder, "onnx")
    assert remade.engine == "onnx" and "weights changed: made again" in remade.reason
    after = remade.runner.generate([prompt], 12)[0]
    assert after == minitf_greedy(folder, prompt, 12)[: len(after)] and after != before
    assert sorted(path.name for path in (folder / ENGINE_CACHE_FOLDER).iterdir()) == ["onnx"]  # nothing left over


def test_a_failed_check_falls_back_to_torch_in_one_line(tmp_path, monkeypatch, capsys):
    """An export that does not give the folder's tokens (here: another model's, written in its place) is not kept:
    the command runs torch and says why in one line."""
    import hf_minitf.export
    from hf_minitf.export.onnx import export_onnx

    folder, other = make_gpt(tmp_path / "gpt"), make_gpt(tmp_path / "other", seed=9)
    monkeypatch.setattr(hf_minitf.export, "export_onnx", lambda source, out: export_onnx(other, out), raising=False)
    assert main(["generate", str(folder), PROMPTS[0], "--max-new-tokens", "8"]) == 0
    on_torch = capsys.readouterr().out
    assert main(["generate", str(folder), PROMPTS[0], "--max-new-tokens", "8", "--engine", "onnx"]) == 0
    captured = capsys.readouterr()
    assert captured.out == on_torch
    notes = captured.err.strip().splitlines()
    assert len(notes) == 1, notes
    assert notes[0].startswith("minitf generate: note: --engine onnx: running in torch (onnxruntime's export does not")
    assert "first differs at new token" in notes[0]
    assert not cache_folder(folder, "onnx").exists() and list((folder / ENGINE_CACHE_FOLDER).iterdir()) == []


def test_an_engine_without_its_extra_is_an_error_naming_it_and_auto_skips_it(tmp_path, monkeypatch, capsys):
    folder = make_gpt(tmp_path / "gpt")
    capsys.readouterr()  # the save's progress bar
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *rest: None if name == "onnxruntime" else find_spec(name, *rest)
    )
    assert main(["generate", str(folder), "the", "--engine", "onnx"]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1, error
    assert "--engine onnx needs onnxruntime, which the engines extra brings" in error and "hf-minitf[engines]" in error
    auto = choose_engine(folder, "auto")
    assert auto.engine == "torch" and auto.runner is None and "onnx not installed" in auto.reason
    assert not (folder / ENGINE_CACHE_FOLDER).exists()


def test_generate_translate_and_embed_take_the_engine(server, folders, tmp_path, capsys):
    """The commands run torch by default (nothing exported) and the verified export with --engine onnx, printing
    the same text and vectors; an export folder refuses another engine."""
    fresh = make_gpt(tmp_path / "fresh")
    assert main(["generate", str(fresh), PROMPTS[0], "--max-new-tokens", "6"]) == 0
    assert not (fresh / ENGINE_CACHE_FOLDER).exists()
    capsys.readouterr()
    commands = {
        "gpt": ["generate", str(folders["gpt"]), *PROMPTS[:2], "--max-new-tokens", "10"],
        "seq2seq": ["translate", str(folders["seq2seq"]), PAIRS[0][0], PAIRS[1][0]],
        "encoder": ["embed", str(folders["encoder"]), *SENTENCES],
    }
    for name, command in commands.items():
        assert main(command) == 0
        on_torch = capsys.readouterr()
        assert main([*command, "--engine", "onnx"]) == 0
        on_onnx = capsys.readouterr()
        assert on_onnx.err == "", on_onnx.err
        if name == "encoder":
            torch_vectors = np.array([json.loads(line) for line in on_torch.out.splitlines()])
            onnx_vectors = np.array([json.loads(line) for line in on_onnx.out.splitlines()])
            assert np.abs(torch_vectors - onnx_vectors).max() <= 2e-6
        else:
            assert on_onnx.out == on_torch.out and on_torch.out.strip()
    export = cache_folder(folders["gpt"], "onnx")
    assert main(["generate", str(export), PROMPTS[0], "--engine", "ctranslate2"]) == 2
    assert "onnxruntime export and runs in it; --engine ctranslate2 needs the MiniTF folder" in capsys.readouterr().err


def test_a_generation_config_the_engines_do_not_apply_keeps_the_folder_on_torch(tmp_path):
    """generate() applies a folder's repetition penalty to every request; the engines would not: no export."""
    from transformers import GenerationConfig

    folder = make_gpt(tmp_path / "gpt")
    config = GenerationConfig.from_pretrained(folder)
    config.repetition_penalty = 1.3
    config.save_pretrained(folder)
    choice = choose_engine(folder, "auto")
    assert choice.engine == "torch" and choice.runner is None
    assert "generation_config.json sets repetition_penalty, which onnxruntime does not apply" in choice.reason
    assert not (folder / ENGINE_CACHE_FOLDER).exists()


class _CountingRunner:
    """An engine runner that decodes one token at a time (as ONNX Runtime's does): ids 1, 2, 3, ..."""

    def tokens(self, prompt_ids, max_new_tokens, **options):
        yield from range(1, max_new_tokens + 1)


@pytest.mark.parametrize("stream", [False, True])
def test_an_answer_given_whole_gets_its_tokens_at_once_and_a_stream_each_as_it_comes(stream):
    """Waking the event loop for each token cost a lone request on the export more than its decoding: an answer
    given whole is handed its tokens in one piece, a stream each token as the engine decodes it."""
    import asyncio
    from types import SimpleNamespace

    from hf_minitf.serving.generation import ModelWorker
    from hf_minitf.serving.requests import GenerationRequest

    served = SimpleNamespace(name="m", family="gpt", engine="onnxruntime", model=_CountingRunner())

    async def pieces() -> list[list[int]]:
        worker = ModelWorker(served)
        try:
            request = GenerationRequest(served, "completions", [5, 6], 4, stream=stream)
            return [piece async for piece in worker.submit(request).tokens()]
        finally:
            worker.close()

    received = asyncio.run(pieces())
    assert received == ([[1], [2], [3], [4]] if stream else [[1, 2, 3, 4]])
