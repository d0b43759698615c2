"""`minitf serve --engine vllm` and vLLM on MiniTF GPTs.

The tests marked `vllm` need vLLM (`make vllm-env`; about 12 minutes to install) and run in its environment:
`make test-vllm`, or `.venv-vllm/bin/python -m pytest -m vllm tests/test_vllm.py`. They check, for learned and
rotary GPTs, character and byte-level BPE tokenizers and the FrawdLLM conversion fixture, that vLLM's greedy
token ids are `generate()`'s, to EOS and with EOS ignored, offline (`LLM(...)`) and through `minitf serve --engine
vllm` with the `openai` client (streaming, chat through the chat template, the package's 4xx checks).

The others (no vLLM needed) check the arguments, the install hint, the command line and environment vLLM gets,
and the front's own 4xx answers.
"""

import importlib.util
import json
import os
import sys
import time
from pathlib import Path

import pytest
import torch
from field_examples import BASE_FIELDS, example
from helpers import write_frawdllm_tokenizer
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from hf_minitf import MiniTFGPTConfig, MiniTFGPTForCausalLM, char_tokenizer, train_bpe_tokenizer
from hf_minitf.cli import main as minitf_main
from hf_minitf.conversion.frawdllm import convert_frawdllm
from hf_minitf.serving import vllm as vllm_engine
from hf_minitf.serving.errors import RequestError
from hf_minitf.serving.fields import CHAT, COMPLETIONS, FIELDS, REFUSED, RESPONSES, check_fields

DATA = Path(__file__).parent.parent / "data"
API_KEY = "test-key-vllm"
PROMPTS = ["hello there", "The cat", "a", "Once upon", "to be or"]
TEXTS = ["the cat sat on the mat and the dog ran in the park", "once upon a time there was a small model"] * 20
CHARS = "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ.,!?'\n"
IGNORED_EOS_TOKENS = 64
# vLLM's CPU attention runs heads of 32, 64, 80, ... values (CPUAttentionBackend.get_supported_head_sizes): the
# test GPTs have 64 / 2; the FrawdLLM fixture's 32 / 4 = 8 is refused there, so its converted config (tokenizer,
# chat template, rotary layout) gets one head of 32 and random weights.
HEADS = 2


def _gpt(folder: Path, tokenizer, eos_boost: float = 3.0, **fields) -> str:
    """A random MiniTF GPT whose EOS row is scaled up, so that greedy decoding ends at EOS for some prompts."""
    torch.manual_seed(0)
    config = MiniTFGPTConfig(
        vocab_size=len(tokenizer), hidden_size=64, num_hidden_layers=2, num_attention_heads=HEADS,
        max_position_embeddings=128, pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id, initializer_range=0.5, **fields,
    )  # fmt: skip
    model = MiniTFGPTForCausalLM(config).eval()
    with torch.no_grad():
        model.get_input_embeddings().weight[tokenizer.eos_token_id] *= eos_boost
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def _frawdllm(root: Path, kind: str) -> str:
    """The FrawdLLM fixture converted with a chat tokenizer (so it has FrawdLLM's chat template), with one
    attention head of 32 values and random weights (see HEADS)."""
    folder = root / f"frawdllm_{kind}"
    convert_frawdllm(
        DATA / f"frawdllm_{kind}/checkpoint.pt", folder,
        tokenizer=write_frawdllm_tokenizer(root / f"frawdllm_{kind}.json", chat=True),
    )  # fmt: skip
    config = AutoConfig.from_pretrained(folder)
    config.num_attention_heads, config.initializer_range = 1, 0.5
    torch.manual_seed(0)
    MiniTFGPTForCausalLM(config).eval().save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """Learned and rotary GPTs with character and BPE tokenizers, and both FrawdLLM fixtures converted."""
    root = tmp_path_factory.mktemp("vllm_models")
    chars = char_tokenizer(CHARS)
    bpe = train_bpe_tokenizer(TEXTS, vocab_size=300, min_frequency=1)
    return {
        "char_learned": _gpt(root / "char_learned", chars),
        "char_rope": _gpt(root / "char_rope", chars, position_embedding_type="rope"),
        "bpe_learned": _gpt(root / "bpe_learned", bpe),
        "bpe_rope": _gpt(root / "bpe_rope", bpe, position_embedding_type="rope"),
        "frawdllm_learned": _frawdllm(root, "learned"),
        "frawdllm_rope": _frawdllm(root, "rope"),
    }


def greedy(folder: str, prompt_ids: list[int], new_tokens: int, ignore_eos: bool = False) -> list[int]:
    """`generate()`'s greedy new token ids (with `ignore_eos`, generation goes on past EOS, as vLLM's)."""
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    if ignore_eos:
        model.generation_config.eos_token_id = None
    with torch.no_grad():
        output = model.generate(torch.tensor([prompt_ids]), max_new_tokens=new_tokens, do_sample=False)
    return output[0, len(prompt_ids) :].tolist()


def cases(folder: str) -> list[tuple[list[int], int]]:
    """Each prompt's ids and the new tokens that fit the context (at most IGNORED_EOS_TOKENS)."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    limit = AutoConfig.from_pretrained(folder).max_position_embeddings
    rows = [(tokenizer(prompt)["input_ids"], 0) for prompt in PROMPTS]
    rows = [(ids, min(IGNORED_EOS_TOKENS, limit - len(ids))) for ids, _ in rows]
    return [(ids, room) for ids, room in rows if room >= 4]


# ------------------------------------------------------------------------------------------------ no vLLM needed
def test_without_vllm_the_error_says_how_to_install_it(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv(vllm_engine.VLLM_PYTHON_VARIABLE, raising=False)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert minitf_main(["serve", str(tmp_path), "--engine", "vllm"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and error.startswith("minitf serve: error: --engine vllm needs vLLM")
    assert "make vllm-env" in error and "--vllm-python" in error and vllm_engine.VLLM_PYTHON_VARIABLE in error


@pytest.mark.parametrize("how", ["option", "variable"])
def test_a_python_without_vllm_is_named(tmp_path, capsys, monkeypatch, how):
    arguments = ["serve", str(tmp_path), "--engine", "vllm"]
    if how == "option":
        arguments += ["--vllm-python", sys.executable]  # this test environment has no vLLM
    else:
        monkeypatch.setenv(vllm_engine.VLLM_PYTHON_VARIABLE, str(tmp_path / "missing" / "python"))
    assert minitf_main(arguments) == 2
    error = capsys.readouterr().err.strip()
    where = "--vllm-python" if how == "option" else vllm_engine.VLLM_PYTHON_VARIABLE
    assert f"{where}=" in error and "is not a Python that can import vllm" in error and "make vllm-env" in error


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        (["--engine", "vllm", "--continuous-batching"], "--continuous-batching"),
        (["--engine", "vllm", "--max-batch-size", "8"], "--max-batch-size"),
        (["--engine", "vllm", "--device", "cpu"], "--device"),
        (["--tensor-parallel-size", "2"], "--tensor-parallel-size"),
        (["--vllm-python", "python"], "--vllm-python"),
    ],
)
def test_options_of_the_other_engine_are_refused(tmp_path, capsys, arguments, named):
    assert minitf_main(["serve", str(tmp_path), *arguments]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith(f"minitf serve: error: {named} is an option of")


def test_one_gpt_per_vllm_server(folders):
    with pytest.raises(ValueError, match="one GPT per server"):
        vllm_engine.split_sources([folders["char_learned"], folders["bpe_rope"]])
    assert vllm_engine.split_sources([folders["char_learned"]]) == (folders["char_learned"], [])


@pytest.mark.parametrize("name", ["char_learned", "bpe_rope"])
def test_a_minitf_gpt_goes_to_vllm_as_its_native_export(folders, tmp_path, name):
    model = vllm_engine.prepare_model(folders[name], tmp_path)
    command = vllm_engine.vllm_command(model, "/env/bin/python", 8123, tensor_parallel_size=2)
    config = json.loads((Path(model.folder) / "config.json").read_text())
    assert config["architectures"] == [{"char_learned": "GPT2LMHeadModel", "bpe_rope": "GPTNeoXForCausalLM"}[name]]
    assert command[:3] == ["/env/bin/python", "-m", "vllm.entrypoints.openai.api_server"]
    options = dict(zip(command[3::2], command[4::2]))
    assert options["--model"] == model.folder and options["--served-model-name"] == folders[name]
    assert options["--host"] == "127.0.0.1" and options["--port"] == "8123"
    assert options["--dtype"] == "float32"  # vLLM's "auto" would run float32 weights in half precision
    assert options["--max-model-len"] == "128" and options["--tensor-parallel-size"] == "2"
    assert "--trust-remote-code" not in command and "--model-impl" not in command


def test_a_gpt_without_native_form_needs_trust_remote_code(tmp_path):
    chars = char_tokenizer(CHARS)
    folder = _gpt(tmp_path / "crop", chars, context_overflow="crop")
    with pytest.raises(ValueError, match="pass --trust-remote-code"):
        vllm_engine.prepare_model(folder, tmp_path / "work")
    model = vllm_engine.prepare_model(folder, tmp_path / "work", trust_remote_code=True)
    command = vllm_engine.vllm_command(model, "python", 8000)
    assert model.folder == folder and command[-3:] == ["--model-impl", "transformers", "--trust-remote-code"]


def test_vllm_gets_a_cpu_kv_cache_from_the_memory_available():
    gib = 1 << 30
    assert vllm_engine.cpu_kv_cache_gib(16 * gib) == 4
    assert vllm_engine.cpu_kv_cache_gib(gib) == 1 and vllm_engine.cpu_kv_cache_gib(1000 * gib) == 8
    environment = vllm_engine.vllm_environment("secret", {"PATH": "/bin"})
    assert environment["VLLM_API_KEY"] == "secret" and 1 <= int(environment["VLLM_CPU_KVCACHE_SPACE"]) <= 8
    assert vllm_engine.vllm_environment("k", {"VLLM_CPU_KVCACHE_SPACE": "2"})["VLLM_CPU_KVCACHE_SPACE"] == "2"


@pytest.fixture(scope="module")
def front(folders, tmp_path_factory):
    """The front alone (its upstream is never reached: each request here is refused before it is forwarded)."""
    from fastapi.testclient import TestClient

    work = tmp_path_factory.mktemp("front")
    model = vllm_engine.prepare_model(folders["frawdllm_learned"], work)
    plain = vllm_engine.prepare_model(folders["char_learned"], work / "plain")
    upstream = vllm_engine.Backend("http://127.0.0.1:9", "upstream-key")
    apps = {
        "chat": vllm_engine.build_front_app(model, upstream, api_key=API_KEY),
        "plain": vllm_engine.build_front_app(plain, upstream, api_key=API_KEY),
    }
    return {name: TestClient(app, headers={"Authorization": f"Bearer {API_KEY}"}) for name, app in apps.items()}


FRONT_REFUSALS = {
    "a model not served": ("/v1/completions", {"model": "other", "prompt": "hi"}, 404, "model_not_found"),
    "empty prompt": ("/v1/completions", {"prompt": ""}, 400, None),
    "prompt as token ids": ("/v1/completions", {"prompt": [1, 2]}, 400, None),
    "max_tokens 0": ("/v1/completions", {"prompt": "hi", "max_tokens": 0}, 400, None),
    "max_tokens past the context": (
        "/v1/completions",
        {"prompt": "hi", "max_tokens": 16},
        400,
        "context_length_exceeded",
    ),
    "prompt past the context": ("/v1/completions", {"prompt": "hello " * 10}, 400, "context_length_exceeded"),
    "chat past the context": (
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 15},
        400,
        "context_length_exceeded",
    ),
    "empty messages": ("/v1/chat/completions", {"messages": []}, 400, None),
    "embeddings of a GPT": ("/v1/embeddings", {"input": "hi"}, 400, None),
    "not JSON": ("/v1/completions", "{not json", 400, "invalid_json"),
    "lone surrogate in a prompt": ("/v1/completions", '{"prompt": "a\\ud800"}', 400, None),
    "lone surrogate in a message": (
        "/v1/chat/completions",
        '{"messages": [{"role": "user", "content": "\\udfff"}]}',
        400,
        None,
    ),
    "max_tokens as text": ("/v1/completions", {"prompt": "hi", "max_tokens": "4"}, 400, None),
    "five stop strings": ("/v1/completions", {"prompt": "hi", "stop": list("abcde")}, 400, None),
    "an empty stop string": ("/v1/completions", {"prompt": "hi", "stop": [""]}, 400, None),
    "a message without a role": ("/v1/chat/completions", {"messages": [{"content": "hi"}]}, 400, None),
    "a logit_bias key that is no token id": ("/v1/completions", {"prompt": "hi", "logit_bias": {"³": 1}}, 400, None),
    "an image part": (
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
        400,
        None,
    ),
    "a prompt too long to tokenize": (
        "/v1/completions",
        {"prompt": "x" * 1_000_000},
        400,
        "context_length_exceeded",
    ),
}


@pytest.mark.parametrize("case", FRONT_REFUSALS)
def test_the_front_refuses_what_the_default_engine_refuses_in_its_shape(front, case):
    path, body, status, code = FRONT_REFUSALS[case]
    answer = front["chat"].post(path, **({"content": body} if isinstance(body, str) else {"json": body}))
    assert answer.status_code == status
    error = answer.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["code"] == code
    assert error["type"] == "invalid_request_error" and error["message"]


HI = [{"role": "user", "content": "hi"}]
ASKED = {COMPLETIONS: {"prompt": "hi"}, CHAT: {"messages": HI}, RESPONSES: {"input": "hi"}}
FRONT_WALK = [
    (route, row.name)
    for row in FIELDS
    if row.answer == REFUSED and not row.vllm
    for route in row.routes
    if row.name not in BASE_FIELDS
]


@pytest.mark.parametrize(("route", "name"), FRONT_WALK)
def test_the_front_refuses_the_fields_vllm_would_ignore(front, route, name):
    """The rows of the request-field table that vLLM would ignore (it logs and drops a field it does not know) are
    refused by the front as the default engine refuses them, before anything reaches vLLM (the upstream here is
    never reached). Before, the front forwarded them."""
    answer = front["chat"].post(route, json={**ASKED[route], name: example(route, name)})
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["param"] == name and error["type"] == "invalid_request_error", error


def test_the_front_leaves_to_vllm_what_it_answers():
    """vLLM answers `n`, `response_format`, `tool_choice` and its own extra fields itself: the front's field check
    lets them through, and refuses a field vLLM would ignore."""
    check_fields({"n": 2, "response_format": {"type": "json_object"}, "ignore_eos": True}, COMPLETIONS, engine="vllm")
    check_fields({"tool_choice": "required", "top_k": 5}, CHAT, engine="vllm")
    with pytest.raises(RequestError, match="modalities"):
        check_fields({"modalities": ["audio"]}, CHAT, engine="vllm")


def test_the_front_bounds_bodies_and_chat_templates(folders, tmp_path):
    from fastapi.testclient import TestClient

    plain = vllm_engine.prepare_model(folders["char_learned"], tmp_path)
    plain.tokenizer.chat_template = "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}"
    app = vllm_engine.build_front_app(plain, vllm_engine.Backend("http://127.0.0.1:9", "key"), max_request_bytes=4096)
    client = TestClient(app)
    answer = client.post("/v1/completions", json={"prompt": "x" * 5000})
    assert answer.status_code == 413 and answer.json()["error"]["type"] == "invalid_request_error"
    started = time.monotonic()
    answer = client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]})
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "chat_template_limit"
    assert time.monotonic() - started < 30


def test_the_front_requires_the_api_key_and_refuses_chat_without_a_template(front, folders):
    answer = front["chat"].post("/v1/completions", json={"prompt": "hi"}, headers={"Authorization": "Bearer wrong"})
    assert answer.status_code == 401 and answer.json()["error"]["code"] == "invalid_api_key"
    answer = front["plain"].post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]})
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "no_chat_template"
    models = front["plain"].get("/v1/models").json()["data"]
    assert [entry["id"] for entry in models] == [folders["char_learned"]]


# ------------------------------------------------------------------------------------------------ with vLLM
@pytest.fixture(scope="module")
def vllm_python():
    return vllm_engine.find_vllm_python()


@pytest.fixture(scope="module")
def offline_llm():
    """vLLM's offline engine on a folder, one at a time (each holds its KV cache until it is dropped)."""
    os.environ.setdefault(vllm_engine.KV_CACHE_VARIABLE, "1")
    from vllm import LLM

    def load(folder: str, transformers_backend: bool = False):
        return LLM(
            model=folder, dtype="float32", seed=0, trust_remote_code=transformers_backend,
            model_impl="transformers" if transformers_backend else "auto",
        )  # fmt: skip

    return load


def _vllm_ids(llm, rows, ignore_eos: bool) -> list[list[int]]:
    from vllm import SamplingParams

    prompts = [{"prompt_token_ids": ids} for ids, _ in rows]
    params = [SamplingParams(temperature=0, max_tokens=room, ignore_eos=ignore_eos) for _, room in rows]
    return [list(output.outputs[0].token_ids) for output in llm.generate(prompts, params, use_tqdm=False)]


@pytest.mark.vllm
@pytest.mark.parametrize(
    ("name", "transformers_backend"),
    # Each case starts a vLLM engine (minutes on a busy 2-core machine): learned and rotary, char and BPE and the
    # FrawdLLM conversion between these and the server's (FrawdLLM rotary, BPE) below.
    [("char_learned", False), ("bpe_rope", False), ("frawdllm_learned", False), ("char_rope", True)],
)
def test_offline_vllm_gives_generate_token_ids(folders, offline_llm, tmp_path, name, transformers_backend):
    """Greedy ids equal `generate()`'s to EOS and, EOS ignored, for up to 64 tokens: the native export through
    vLLM's own kernels, and the MiniTF folder itself through vLLM's transformers backend."""
    from hf_minitf.export.native import export_native

    folder = folders[name] if transformers_backend else str(export_native(folders[name], tmp_path / "native"))
    rows = cases(folders[name])
    llm = offline_llm(folder, transformers_backend)
    to_eos, ignoring = _vllm_ids(llm, rows, ignore_eos=False), _vllm_ids(llm, rows, ignore_eos=True)
    del llm
    assert to_eos == [greedy(folders[name], ids, room) for ids, room in rows]
    assert ignoring == [greedy(folders[name], ids, room, ignore_eos=True) for ids, room in rows]
    assert all(len(ids) == room for ids, (_, room) in zip(ignoring, rows))


def test_some_generations_end_at_eos(folders):
    """The to-EOS comparisons above include generations that stop early (so stopping is compared too)."""
    eos = AutoConfig.from_pretrained(folders["char_rope"]).eos_token_id
    ends = [
        greedy(folders[name], ids, room) for name in ("char_learned", "char_rope") for ids, room in cases(folders[name])
    ]
    assert any(ids and ids[-1] == eos and len(ids) < IGNORED_EOS_TOKENS for ids in ends)


# ------------------------------------------------------------------------------------------------ the server
def _can_run_the_default_engine() -> bool:
    try:
        import hf_minitf.serving.server  # noqa: F401  (the serve extra's packages: fastapi, uvicorn, openai)
    except ImportError:
        return False
    return True


@pytest.fixture(scope="module")
def servers(folders, vllm_python, tmp_path_factory):
    """`minitf serve --engine vllm` on the FrawdLLM rotary chat model, and on the char GPT (with an encoder beside
    it, on the default engine, where this environment can run that engine)."""
    import contextlib

    from hf_minitf import MiniTFEncoderConfig, MiniTFEncoderModel, save_sentence_transformer, train_wordlevel_tokenizer
    from hf_minitf.serving.process import server_process

    work = tmp_path_factory.mktemp("vllm_servers")
    words = train_wordlevel_tokenizer(TEXTS, vocab_size=64, min_frequency=1, max_length=32)
    encoder = MiniTFEncoderModel(MiniTFEncoderConfig(
        vocab_size=len(words), hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
        max_position_embeddings=32))  # fmt: skip
    folders["encoder"] = save_sentence_transformer(encoder, words, work / "encoder")
    options = ("--engine", "vllm", "--vllm-python", vllm_python, "--log-level", "warning")
    sources = {"chat": [folders["frawdllm_rope"]]}
    if _can_run_the_default_engine():  # the package's environment, vLLM in its own: GPT and encoder on one port
        sources["plain"] = [folders["char_learned"], folders["encoder"]]
    with contextlib.ExitStack() as stack:
        running = {
            name: stack.enter_context(
                server_process(given, *options, api_key=API_KEY, log=work / f"{name}.log", timeout=1800)
            )
            for name, given in sources.items()
        }
        yield {name: server.url for name, server in running.items()}


@pytest.fixture(scope="module")
def clients(servers):
    import openai

    made = {name: openai.OpenAI(base_url=f"{url}/v1", api_key=API_KEY, max_retries=0, timeout=300)
            for name, url in servers.items()}  # fmt: skip
    yield made
    for client in made.values():
        client.close()


def _needs(servers: dict, name: str) -> None:
    if name not in servers:
        pytest.skip("the GPT-beside-an-encoder server needs the default engine, which needs the serve extra here")


def _decoded(folder: str, ids: list[int]) -> str:
    return AutoTokenizer.from_pretrained(folder).decode(ids, skip_special_tokens=True)


@pytest.mark.vllm
@pytest.mark.parametrize(("server", "name"), [("chat", "frawdllm_rope"), ("plain", "char_learned")])
def test_served_completions_are_generate_token_ids(clients, folders, server, name):
    _needs(clients, server)
    client, folder = clients[server], folders[name]
    tokenizer = AutoTokenizer.from_pretrained(folder)
    for (ids, room), prompt in zip(cases(folder), PROMPTS):
        assert tokenizer(prompt)["input_ids"] == ids
        for ignore_eos in (False, True):
            completion = client.completions.create(
                model=folder,
                prompt=prompt,
                max_tokens=room,
                extra_body={"ignore_eos": ignore_eos, "return_token_ids": True},
            )  # fmt: skip  (no temperature: the folder's generation config decodes greedily, as generate())
            expected = greedy(folder, ids, room, ignore_eos=ignore_eos)
            choice = completion.choices[0]
            assert choice.model_extra["token_ids"] == expected
            assert choice.text == _decoded(folder, expected) and completion.model == folder
            assert choice.finish_reason == ("length" if len(expected) == room else "stop")


@pytest.mark.vllm
def test_served_stream_joins_to_the_completion(clients, folders):
    folder = folders["frawdllm_rope"]
    ids, room = cases(folder)[0]
    chunks = list(clients["chat"].completions.create(model=folder, prompt=PROMPTS[0], max_tokens=room, stream=True))
    assert len(chunks) > 2
    assert "".join(chunk.choices[0].text for chunk in chunks) == _decoded(folder, greedy(folder, ids, room))


@pytest.mark.vllm
def test_served_chat_goes_through_the_chat_template(clients, folders):
    folder = folders["frawdllm_rope"]
    tokenizer = AutoTokenizer.from_pretrained(folder)
    for content in ("hi", "Tell me a story."):
        messages = [{"role": "user", "content": content}]
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=True)
        ids = ids["input_ids"]
        reply = clients["chat"].chat.completions.create(model=folder, messages=messages, max_tokens=24)
        assert reply.choices[0].message.content == _decoded(folder, greedy(folder, ids, 24))


SERVER_REFUSALS = {
    "a model not served": ("chat", "/v1/completions", {"model": "nope", "prompt": "hi"}, 404, "model_not_found"),
    "empty prompt": ("chat", "/v1/completions", {"prompt": ""}, 400, None),
    "max_tokens past the context": (
        "chat", "/v1/completions", {"prompt": "hi", "max_tokens": 64}, 400, "context_length_exceeded"),
    "chat without a template": (
        "plain", "/v1/chat/completions", {"model": "{char_learned}", "messages": [{"role": "user", "content": "hi"}]},
        400, "no_chat_template"),
}  # fmt: skip


@pytest.mark.vllm
@pytest.mark.parametrize("case", SERVER_REFUSALS)
def test_served_refusals_are_the_default_engines(servers, folders, case):
    import urllib.error
    import urllib.request

    server, path, body, status, code = SERVER_REFUSALS[case]
    _needs(servers, server)
    body = json.loads(json.dumps(body).replace("{char_learned}", folders["char_learned"]))
    request = urllib.request.Request(
        servers[server] + path, data=json.dumps(body).encode(), method="POST",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {API_KEY}"},
    )  # fmt: skip
    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(request, timeout=60)
    assert raised.value.code == status
    error = json.loads(raised.value.read())["error"]
    assert error["code"] == code and error["type"] == "invalid_request_error"


@pytest.mark.vllm
def test_one_server_answers_the_gpt_on_vllm_and_the_encoder_on_the_default_engine(clients, folders):
    _needs(clients, "plain")
    from sentence_transformers import SentenceTransformer

    names = [entry.id for entry in clients["plain"].models.list().data]
    assert names == [folders["char_learned"], folders["encoder"]]
    response = clients["plain"].embeddings.create(model=folders["encoder"], input=TEXTS[:2])
    expected = SentenceTransformer(folders["encoder"]).encode(TEXTS[:2])
    assert torch.allclose(torch.tensor([item.embedding for item in response.data]), torch.tensor(expected), atol=1e-5)
