"""`minitf serve EXPORT`: ONNX and CTranslate2 export folders served behind the same front as the MiniTF folders
they were exported from, answering the same greedy text (completions streamed or not, with stop strings),
translations and embeddings; what their engines cannot do per request is a 400 naming the field."""

import json
import subprocess
import sys

import httpx
import numpy as np
import pytest
from factories import ENGINE_TEXT, PAIRS, make_encoder, make_gpt, make_seq2seq

from hf_minitf.serving.process import server_process

EXPORTS = {
    "gpt onnx": ("gpt", "onnx"),
    "gpt ctranslate2": ("gpt", "ctranslate2"),
    "seq2seq onnx": ("seq2seq", "onnx"),
    "seq2seq ctranslate2": ("seq2seq", "ctranslate2"),
    "encoder onnx": ("encoder", "onnx"),
    "encoder ctranslate2": ("encoder", "ctranslate2"),
}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """The MiniTF folders and their exports, made by `minitf export` in one other process (the engines' threads
    stay there), unverified: the tests compare what the server answers with the MiniTF models themselves."""
    root = tmp_path_factory.mktemp("served_exports")
    folders = {
        "gpt": make_gpt(root / "gpt", max_position_embeddings=48),
        "seq2seq": make_seq2seq(root / "seq2seq", seed=4),
        "encoder": make_encoder(root / "encoder"),
    }
    commands = []
    for name, (source, engine) in EXPORTS.items():
        folders[name] = root / name.replace(" ", "-")
        commands.append(["export", engine, str(folders[source]), str(folders[name]), "--no-verify"])
    script = f"from hf_minitf.cli import main\nfor command in {commands!r}:\n    assert main(command) == 0, command"
    subprocess.run([sys.executable, "-c", script], check=True, capture_output=True)
    return {name: str(folder) for name, folder in folders.items()}


@pytest.fixture(scope="module")
def server(folders, tmp_path_factory):
    log = tmp_path_factory.mktemp("exports_log") / "server.log"
    with server_process(folders.values(), "--log-level", "warning", "--engine", "torch", log=log) as running:
        yield running


def post(server, route: str, body: dict) -> dict:
    answer = httpx.post(server.url + route, json=body, timeout=120)
    assert answer.status_code == 200, answer.text
    return answer.json()


def streamed_chunks(server, body: dict) -> list[str]:
    with httpx.stream("POST", server.url + "/v1/completions", json={**body, "stream": True}, timeout=120) as stream:
        lines = [line[len("data: ") :] for line in stream.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    return [json.loads(line)["choices"][0]["text"] for line in lines[:-1]]


@pytest.mark.parametrize("name", ["gpt onnx", "gpt ctranslate2"])
def test_a_gpt_export_answers_the_folders_greedy_text(server, folders, name):
    prompts = [ENGINE_TEXT[:5], ENGINE_TEXT[7:9], ENGINE_TEXT[3:4]]
    for prompt in prompts:
        body = {"prompt": prompt, "max_tokens": 12, "temperature": 0}
        answered = post(server, "/v1/completions", {**body, "model": folders["gpt"]})
        source = answered["choices"][0]
        exported = post(server, "/v1/completions", {**body, "model": folders[name]})
        assert exported["choices"][0]["text"] == source["text"] and source["text"]
        assert exported["choices"][0]["finish_reason"] == source["finish_reason"]
        assert exported["usage"] == answered["usage"]
        chunks = [chunk for chunk in streamed_chunks(server, {**body, "model": folders[name]}) if chunk]
        assert "".join(chunks) == source["text"]
        if name == "gpt onnx":  # ONNX Runtime decodes one token per call: each is streamed as it comes
            assert len(chunks) > 1, chunks
        stop = source["text"][4:6]
        stopped = post(server, "/v1/completions", {**body, "model": folders[name], "stop": stop})["choices"][0]
        assert stopped["text"] == source["text"][: source["text"].index(stop)]
        assert stopped["finish_reason"] == "stop"


@pytest.mark.parametrize("name", ["seq2seq onnx", "seq2seq ctranslate2"])
def test_a_translator_export_answers_the_folders_translation(server, folders, name):
    for source_text, _ in PAIRS[:3]:
        body = {"prompt": source_text, "temperature": 0}
        expected = post(server, "/v1/completions", {**body, "model": folders["seq2seq"]})["choices"][0]["text"]
        assert post(server, "/v1/completions", {**body, "model": folders[name]})["choices"][0]["text"] == expected


@pytest.mark.parametrize("name", ["encoder onnx", "encoder ctranslate2"])
def test_an_encoder_export_answers_the_folders_embeddings(server, folders, name):
    texts = [ENGINE_TEXT[:20], "the cat"]
    expected = np.array(
        [
            row["embedding"]
            for row in post(server, "/v1/embeddings", {"model": folders["encoder"], "input": texts})["data"]
        ]
    )
    got = np.array(
        [row["embedding"] for row in post(server, "/v1/embeddings", {"model": folders[name], "input": texts})["data"]]
    )
    assert np.abs(got - expected).max() <= 1e-4


def test_what_an_engine_cannot_do_is_a_400_naming_the_field(server, folders):
    for field, value in (("frequency_penalty", 1.0), ("logit_bias", {"3": 5}), ("top_p", 0.5)):
        body = {"model": folders["gpt onnx"], "prompt": "ab", "max_tokens": 2, field: value}
        answer = httpx.post(server.url + "/v1/completions", json=body, timeout=60)
        assert answer.status_code == 400 and answer.json()["error"]["param"] == field, answer.text
        assert "onnxruntime engine" in answer.json()["error"]["message"]
