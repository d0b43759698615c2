"""`minitf serve` over real HTTP on loopback, called with the official `openai` client: completions and streaming
equal to local `generate()`, chat through a FrawdLLM chat template, embeddings equal to local
`SentenceTransformer.encode`, translation equal to the local pipeline, concurrent requests, every bad request
answered 4xx in OpenAI's error shape, and the API key. One server (a subprocess on a free port) serves every test
model; it is stopped at the end."""

import asyncio
import base64
import json
import os
import shutil
import signal
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import openai
import pytest
import torch
from factories import save_with_tokenizer, tiny_model_folder
from helpers import write_frawdllm_tokenizer
from sentence_transformers import SentenceTransformer
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GPT2Config, GPT2LMHeadModel, pipeline

from hf_minitf import (
    TRANSLATION_TASK,
    MiniTFGPTForCausalLM,
    char_tokenizer,
    train_translation_tokenizers,
    train_wordlevel_tokenizer,
)
from hf_minitf.cli import build_parser
from hf_minitf.conversion.frawdllm import convert_frawdllm
from hf_minitf.serving.process import server_process

DATA = Path(__file__).parents[1] / "data"
API_KEY = "test-key-123"
HUB_REPO = "minitf-tests/tiny-gpt"
PROMPTS = ["hello there", "The cat", "a", "Once upon a time, "]
SENTENCES = ["the cat sat on the mat", "a dog ran in the park", "birds fly over the sea", "the sun is a star"]
PAIRS = [("one two three", "uno due tre"), ("four five", "quattro cinque"), ("six two", "sei due")]


def _to_hub_cache(folder: Path, repo_id: str) -> None:
    """Put a folder into the offline Hub cache (HF_HOME, a temporary folder) as the main revision of `repo_id`."""
    repo = Path(os.environ["HF_HOME"]) / "hub" / f"models--{repo_id.replace('/', '--')}"
    commit = "0" * 40
    shutil.copytree(folder, repo / "snapshots" / commit)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """One tiny folder per kind of model the server takes: MiniTF GPT (learned positions, no chat template), a
    converted FrawdLLM chat model, native GPT-2, an embedding model, a translation model; and the Hub repo id."""
    root = tmp_path_factory.mktemp("served")
    chars = char_tokenizer("abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ.,!?'\n")
    gpt = tiny_model_folder("gpt", root / "gpt", chars, seed=0, max_position_embeddings=64, initializer_range=0.5)
    folders = {"gpt": str(gpt)}
    _to_hub_cache(gpt, HUB_REPO)
    folders["hub"] = HUB_REPO
    native = GPT2Config(
        vocab_size=len(chars),
        n_embd=16,
        n_layer=1,
        n_head=2,
        n_positions=32,
        bos_token_id=chars.bos_token_id,
        eos_token_id=chars.eos_token_id,
        initializer_range=0.5,
    )
    folders["gpt2"] = str(save_with_tokenizer(GPT2LMHeadModel(native), chars, root / "gpt2"))
    convert_frawdllm(
        DATA / "frawdllm_learned/checkpoint.pt",
        root / "chat",
        tokenizer=write_frawdllm_tokenizer(root / "chat_tokenizer.json", chat=True),
    )
    # The fixture's weights answer every prompt with <|assistant|> (an empty reply): larger random weights, same
    # converted config, tokenizer and chat template, give replies with text.
    chat_config = AutoConfig.from_pretrained(root / "chat")
    chat_config.initializer_range = 0.5
    MiniTFGPTForCausalLM(chat_config).save_pretrained(root / "chat")
    folders["chat"] = str(root / "chat")
    words = train_wordlevel_tokenizer(SENTENCES * 2, vocab_size=64, min_frequency=1, max_length=12)
    folders["encoder"] = str(tiny_model_folder("encoder", root / "encoder", words, max_position_embeddings=12))
    pair_tokenizer = train_translation_tokenizers(PAIRS, min_frequency=1)
    # seed 4: a random model whose translations are not empty
    seq2seq = tiny_model_folder("seq2seq", root / "seq2seq", pair_tokenizer, seed=4, max_position_embeddings=12)
    folders["seq2seq"] = str(seq2seq)
    return folders


def http(method: str, url: str, body: str | dict | None = None, headers: dict | None = None) -> tuple[int, dict]:
    """One HTTP request (stdlib): the status and the JSON answer."""
    data = json.dumps(body) if isinstance(body, dict) else body
    request = urllib.request.Request(
        url,
        data=None if data is None else data.encode(),
        method=method,
        headers={"Content-Type": "application/json", **(headers or {})},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def _snapshot(folders: dict) -> dict:
    """Every file of the served folders with its size and modification time."""
    return {
        path: (path.stat().st_size, path.stat().st_mtime_ns)
        for name, folder in folders.items()
        if name != "hub"
        for path in Path(folder).rglob("*")
    }


@pytest.fixture(scope="module")
def server(folders, tmp_path_factory):
    """`minitf serve` on every test folder, API key required, in an empty working folder."""
    work = tmp_path_factory.mktemp("server_cwd")
    with server_process(
        folders.values(),
        "--log-level",
        "warning",
        "--engine",
        "torch",  # the engine exports: test_serving_engines.py
        api_key=API_KEY,
        cwd=work,
        log=work.parent / "server.log",
    ) as running:
        yield {"url": running.url, "process": running.process, "work": work, "before": _snapshot(folders)}


@pytest.fixture(scope="module")
def client(server):
    with openai.OpenAI(base_url=f"{server['url']}/v1", api_key=API_KEY, max_retries=0, timeout=60) as client:
        yield client


@pytest.fixture(scope="module")
def local(folders):
    """The served models loaded here, for the reference outputs."""

    def causal(name):
        return AutoModelForCausalLM.from_pretrained(folders[name]).eval(), AutoTokenizer.from_pretrained(folders[name])

    return {
        "gpt": causal("gpt"),
        "gpt2": causal("gpt2"),
        "chat": causal("chat"),
        "encoder": SentenceTransformer(folders["encoder"]),
    }


def generate_locally(model, tokenizer, inputs: dict, max_new_tokens: int, count: bool = False) -> str | tuple:
    """Greedy `generate()`: the new text (and, with `count`, the number of new tokens)."""
    with torch.no_grad():
        output = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False)[
            0, inputs["input_ids"].shape[1] :
        ]
    text = tokenizer.decode(output, skip_special_tokens=True)
    return (text, len(output)) if count else text


# ------------------------------------------------------------------------------------------------ completions
@pytest.mark.parametrize("name", ["gpt", "gpt2", "hub"])
def test_completion_is_local_greedy_generate(client, folders, local, name):
    model, tokenizer = local["gpt" if name == "hub" else name]
    for prompt, max_tokens in zip(PROMPTS, (12, 5, 1, 9)):
        completion = client.completions.create(model=folders[name], prompt=prompt, max_tokens=max_tokens, temperature=0)
        inputs = tokenizer(prompt, return_tensors="pt")
        text, new_tokens = generate_locally(model, tokenizer, inputs, max_tokens, count=True)
        assert completion.choices[0].text == text
        assert completion.model in (folders[name], f"{folders[name]}@main")  # transformers names a Hub revision
        assert completion.usage.prompt_tokens == inputs["input_ids"].shape[1]
        assert completion.usage.completion_tokens == new_tokens
        assert completion.choices[0].finish_reason == ("length" if new_tokens == max_tokens else "stop")


def test_streamed_chunks_join_to_the_completion(client, folders, local):
    model, tokenizer = local["gpt"]
    prompt = PROMPTS[0]
    chunks = list(
        client.completions.create(model=folders["gpt"], prompt=prompt, max_tokens=10, temperature=0, stream=True)
    )
    assert len(chunks) > 2
    text = "".join(chunk.choices[0].text for chunk in chunks)
    assert text == generate_locally(model, tokenizer, tokenizer(prompt, return_tensors="pt"), 10)
    assert chunks[-1].choices[0].finish_reason == "length" and chunks[-1].usage.completion_tokens == 10


def test_completion_without_max_tokens_fills_the_context(client, folders):
    """transformers' server defaults to 1024 new tokens: the model's 64 positions bound them instead."""
    completion = client.completions.create(model=folders["gpt"], prompt="hello", temperature=0)
    assert completion.usage.prompt_tokens + completion.usage.completion_tokens <= 64


# ------------------------------------------------------------------------------------------------ stop
def stop_and_expected(text: str) -> tuple[str, str]:
    """A stop string from the middle of a generated text, and the text OpenAI answers with it: what precedes its
    first occurrence."""
    stop = text[len(text) // 3 : len(text) // 3 + 2]
    return stop, text[: text.index(stop)]


@pytest.mark.parametrize("name", ["gpt", "gpt2"])
def test_stop_ends_the_completion_before_the_stop_string(client, folders, local, name):
    """The MiniTF GPT and transformers' own GPT-2 (a native export), as one text and as a list, streamed or not."""
    model, tokenizer = local[name]
    prompt = PROMPTS[0]
    full = generate_locally(model, tokenizer, tokenizer(prompt, return_tensors="pt"), 16)
    stop, expected = stop_and_expected(full)
    for stops in (stop, ["\x01", stop]):
        options = dict(model=folders[name], prompt=prompt, max_tokens=16, temperature=0, stop=stops)
        completion = client.completions.create(**options)
        assert completion.choices[0].text == expected and completion.choices[0].finish_reason == "stop"
        assert completion.usage.completion_tokens < 16
        chunks = list(client.completions.create(**options, stream=True))
        assert "".join(chunk.choices[0].text for chunk in chunks) == expected
        assert chunks[-1].choices[0].finish_reason == "stop"


def test_a_stop_completed_by_the_last_token_is_a_stop(client, folders, local):
    model, tokenizer = local["gpt"]
    full = generate_locally(model, tokenizer, tokenizer(PROMPTS[1], return_tensors="pt"), 6)
    if full[-1] in full[:-1]:
        pytest.fail(f"pick a prompt whose 6th character is new: {full!r}")
    completion = client.completions.create(
        model=folders["gpt"], prompt=PROMPTS[1], max_tokens=6, temperature=0, stop=full[-1]
    )
    assert completion.choices[0].text == full[:-1] and completion.choices[0].finish_reason == "stop"


def test_stop_ends_chat_replies_and_translations(client, folders, local):
    model, tokenizer = local["chat"]
    messages = [{"role": "user", "content": "hi"}]
    inputs = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    stop, expected = stop_and_expected(generate_locally(model, tokenizer, inputs, 6))
    options = dict(model=folders["chat"], messages=messages, max_tokens=6, temperature=0, stop=[stop])
    reply = client.chat.completions.create(**options)
    assert reply.choices[0].message.content == expected and reply.choices[0].finish_reason == "stop"
    stream = list(client.chat.completions.create(**options, stream=True))
    assert "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices) == expected

    translation = pipeline(TRANSLATION_TASK, model=folders["seq2seq"])("one two three")[0]["translation_text"]
    stop, expected = stop_and_expected(translation)
    completion = client.completions.create(model=folders["seq2seq"], prompt="one two three", temperature=0, stop=stop)
    assert completion.choices[0].text == expected and completion.choices[0].finish_reason == "stop"


# ------------------------------------------------------------------------------------------------ chat
def test_chat_uses_the_frawdllm_chat_template(client, folders, local):
    model, tokenizer = local["chat"]
    for content in ("hi", "sun?"):  # FrawdLLM's fixture reads 16 tokens
        messages = [{"role": "user", "content": content}]
        inputs = tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        expected = generate_locally(model, tokenizer, inputs, 4)
        assert expected
        reply = client.chat.completions.create(model=folders["chat"], messages=messages, max_tokens=4, temperature=0)
        assert reply.choices[0].message.role == "assistant"
        assert reply.choices[0].message.content == expected
        assert reply.usage.prompt_tokens == inputs["input_ids"].shape[1]
        stream = client.chat.completions.create(
            model=folders["chat"], messages=messages, max_tokens=4, temperature=0, stream=True
        )
        assert "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices) == expected


def test_chat_without_a_template_is_400_pointing_to_completions(client, folders):
    for name in ("gpt", "gpt2"):
        with pytest.raises(openai.BadRequestError) as error:
            client.chat.completions.create(model=folders[name], messages=[{"role": "user", "content": "hi"}])
        assert error.value.status_code == 400
        assert "no chat template" in error.value.message and "/v1/completions" in error.value.message


# ------------------------------------------------------------------------------------------------ embeddings
def test_embeddings_equal_local_encode(client, folders, local):
    expected = local["encoder"].encode(SENTENCES)
    for encoding_format in ("float", "base64"):
        response = client.embeddings.create(model=folders["encoder"], input=SENTENCES, encoding_format=encoding_format)
        vectors = (
            np.array([item.embedding for item in response.data], dtype=np.float32)
            if encoding_format == "float"
            else None
        )
        if encoding_format == "base64":  # the client hands the base64 text back as it came
            vectors = np.stack([np.frombuffer(base64.b64decode(item.embedding), dtype="<f4") for item in response.data])
        assert [item.index for item in response.data] == list(range(len(SENTENCES)))
        assert np.abs(vectors - expected).max() <= 1e-5 * max(1.0, np.abs(expected).max())
    tokens = sum(len(ids) for ids in local["encoder"].tokenizer(SENTENCES)["input_ids"])
    assert response.usage.prompt_tokens == response.usage.total_tokens == tokens
    one = client.embeddings.create(model=folders["encoder"], input=SENTENCES[1], dimensions=expected.shape[1])
    assert len(one.data) == 1 and np.abs(np.array(one.data[0].embedding) - expected[1]).max() <= 1e-5
    # The client's default (no encoding_format) asks for base64 and decodes it to floats.
    default = client.embeddings.create(model=folders["encoder"], input=SENTENCES[2:])
    assert np.abs(np.array([item.embedding for item in default.data]) - expected[2:]).max() <= 1e-5


def test_embedding_batcher_encodes_waiting_requests_together():
    from hf_minitf.serving.embeddings import EmbeddingBatcher

    calls = []

    def encode(texts):
        calls.append(list(texts))
        time.sleep(0.05)
        return np.array([[len(text), index] for index, text in enumerate(texts)], dtype=np.float32)

    batcher = EmbeddingBatcher(encode)

    async def run():
        return await asyncio.gather(*(batcher.embed(["x" * (n + 1)] * (n % 3 + 1)) for n in range(8)))

    results = asyncio.run(run())
    for n, rows in enumerate(results):
        assert rows.shape == (n % 3 + 1, 2) and (rows[:, 0] == n + 1).all()
    assert len(calls) < 8 and sum(map(len, calls)) == sum(n % 3 + 1 for n in range(8))


# ------------------------------------------------------------------------------------------------ translation
def test_translation_is_a_completion_of_the_source(client, folders):
    translate = pipeline(TRANSLATION_TASK, model=folders["seq2seq"])
    for source, max_tokens in (("one two three", 6), ("four five", None)):
        completion = client.completions.create(
            model=folders["seq2seq"], prompt=source, temperature=0, **({"max_tokens": max_tokens} if max_tokens else {})
        )
        options = {"max_new_tokens": max_tokens} if max_tokens else {}
        assert completion.choices[0].text == translate(source, **options)[0]["translation_text"]
        assert completion.choices[0].text
    streamed = client.completions.create(model=folders["seq2seq"], prompt="six two", max_tokens=4, stream=True)
    assert (
        "".join(chunk.choices[0].text for chunk in streamed)
        == translate("six two", max_new_tokens=4)[0]["translation_text"]
    )


# ------------------------------------------------------------------------------------------------ concurrency
def test_eight_concurrent_requests_are_all_answered_correctly(client, folders, local):
    model, tokenizer = local["gpt"]
    jobs = [("completion", PROMPTS[n % 4] + "xyz"[: n % 3], 3 + n) for n in range(5)]
    jobs += [("embedding", SENTENCES[n : n + 2], None) for n in range(3)]

    def ask(job):
        kind, payload, max_tokens = job
        if kind == "completion":
            return (
                client.completions.create(model=folders["gpt"], prompt=payload, max_tokens=max_tokens, temperature=0)
                .choices[0]
                .text
            )
        return np.array(
            [item.embedding for item in client.embeddings.create(model=folders["encoder"], input=payload).data]
        )

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(ask, jobs))
    for (kind, payload, max_tokens), answer in zip(jobs, answers):
        if kind == "completion":
            assert answer == generate_locally(model, tokenizer, tokenizer(payload, return_tensors="pt"), max_tokens)
        else:
            assert np.abs(answer - local["encoder"].encode(payload)).max() <= 1e-5


def test_continuous_batching_gives_generate_tokens(folders, local):
    """transformers' continuous batching (paged attention) runs the MiniTF GPT: 8 concurrent requests, one streamed."""
    model, tokenizer = local["gpt"]
    jobs = [(PROMPTS[n % 4] + "xyz"[: n % 3], 2 + n) for n in range(8)]
    with (
        server_process(
            [folders["gpt"]], "--continuous-batching", "--engine", "torch", "--log-level", "warning"
        ) as running,
        openai.OpenAI(base_url=f"{running.url}/v1", api_key="none", max_retries=0, timeout=120) as client,
    ):

        def ask(job):
            prompt, max_tokens = job
            return (
                client.completions.create(model=folders["gpt"], prompt=prompt, max_tokens=max_tokens, temperature=0)
                .choices[0]
                .text
            )

        def sample(prompt_and_seed):
            prompt, seed = prompt_and_seed
            answer = client.completions.create(
                model=folders["gpt"], prompt=prompt, max_tokens=10, temperature=1.2, seed=seed
            )
            return answer.choices[0].text

        def cancel(n):
            stream = client.completions.create(
                model=folders["gpt"], prompt=PROMPTS[n % 4], max_tokens=30, temperature=0, stream=True
            )
            for _ in zip(range(n % 3), stream):  # 0 to 2 chunks read, then the connection is closed
                pass
            stream.close()

        first = sample((PROMPTS[2], 11))  # the first request samples: the batch must not sample the greedy ones
        with ThreadPoolExecutor(16) as pool:  # 64 streams cancelled amid them cost the others nothing
            cancelled = [pool.submit(cancel, n) for n in range(64)]
            answers = list(pool.map(ask, jobs))
            for stream in cancelled:
                stream.result()
        streamed = client.completions.create(
            model=folders["gpt"], prompt=PROMPTS[3], max_tokens=6, temperature=0, stream=True
        )
        streamed = "".join(chunk.choices[0].text for chunk in streamed)
        full = generate_locally(model, tokenizer, tokenizer(PROMPTS[0], return_tensors="pt"), 12)
        stop, expected = stop_and_expected(full)
        stopped = client.completions.create(model=folders["gpt"], prompt=PROMPTS[0], max_tokens=12, stop=stop)
        penalised = client.completions.create(
            model=folders["gpt"], prompt=PROMPTS[1], max_tokens=8, temperature=0, frequency_penalty=-2.0
        )

        with ThreadPoolExecutor(8) as pool:  # sampled and greedy requests at once, each answered as it asked
            mixed_jobs = [(PROMPTS[n % 4], n) for n in range(4)]
            sampled = pool.map(sample, mixed_jobs)
            greedy_again = list(pool.map(ask, jobs[:4]))
            sampled = list(sampled)
        running.process.send_signal(signal.SIGTERM)  # the batch's thread stops with the server: the process exits
        assert running.process.wait(timeout=60) == 0
    # nor per-request sampling (its batch samples as its first request asked): sampled requests are generated alone
    assert first == sample_locally(model, tokenizer, PROMPTS[2], 10, 11, temperature=1.2)
    for (prompt, seed), answer in zip(mixed_jobs, sampled):
        assert answer == sample_locally(model, tokenizer, prompt, 10, seed, temperature=1.2)
    assert greedy_again == answers[:4]
    # continuous batching has no stop strings: a request with them is generated on its own, exactly
    assert stopped.choices[0].text == expected and stopped.choices[0].finish_reason == "stop"
    # nor per-request logits processors: a request with a penalty too
    ids = greedy_with_openai_logits(model, tokenizer(PROMPTS[1])["input_ids"], 8, frequency=-2.0)
    assert penalised.choices[0].text == tokenizer.decode(ids, skip_special_tokens=True)
    for (prompt, max_tokens), answer in zip(jobs, answers):
        assert answer == generate_locally(model, tokenizer, tokenizer(prompt, return_tensors="pt"), max_tokens)
    assert streamed == generate_locally(model, tokenizer, tokenizer(PROMPTS[3], return_tensors="pt"), 6)


# ------------------------------------------------------------------------------------------------ bad requests
COMPLETIONS, CHAT, EMBEDDINGS = "/v1/completions", "/v1/chat/completions", "/v1/embeddings"
# Requests the server answers (the model a folder's name): most bad requests below are one of them with a field wrong.
HI = {"model": "{gpt}", "prompt": "hi"}
CHAT_HI = {"model": "{chat}", "messages": [{"role": "user", "content": "hi"}]}
EMBED_HI = {"model": "{encoder}", "input": "hi"}
BAD_REQUESTS = {
    "unknown model": (COMPLETIONS, {"model": "no/such-model", "prompt": "hi"}, 404, "not served"),
    "zero max_tokens": (COMPLETIONS, {**HI, "max_tokens": 0}, 400, "positive integer"),
    "negative max_tokens (chat)": (CHAT, {**CHAT_HI, "max_tokens": -3}, 400, "positive integer"),
    "max_tokens past the context": (COMPLETIONS, {**HI, "prompt": "hello", "max_tokens": 60}, 400, "at most 59"),
    "prompt past the context": (COMPLETIONS, {**HI, "prompt": "x" * 70}, 400, "no room"),
    "chat past the context": (CHAT, {**CHAT_HI, "max_tokens": 50}, 400, "context"),
    "empty prompt": (COMPLETIONS, {**HI, "prompt": ""}, 400, "empty"),
    "empty messages": (CHAT, {**CHAT_HI, "messages": []}, 400, "messages"),
    "message the template refuses": (
        CHAT,
        {**CHAT_HI, "messages": [{"role": "system", "content": "Be nice."}, {"role": "user", "content": "hi"}]},
        400,
        "chat template",
    ),
    "empty embedding input": (EMBEDDINGS, {**EMBED_HI, "input": ""}, 400, "empty"),
    "empty embedding list": (EMBEDDINGS, {**EMBED_HI, "input": []}, 400, "non-empty"),
    "token ids as embedding input": (EMBEDDINGS, {**EMBED_HI, "input": [[1, 2]]}, 400, "token ids"),
    "other dimensions": (EMBEDDINGS, {**EMBED_HI, "dimensions": 8}, 400, "16 dim"),
    "bad encoding_format": (EMBEDDINGS, {**EMBED_HI, "encoding_format": "int8"}, 400, "encoding_format"),
    "embedding past the context": (EMBEDDINGS, {**EMBED_HI, "input": "the " * 20}, 400, "at most 12"),
    "embeddings of a GPT": (EMBEDDINGS, {**EMBED_HI, "model": "{gpt}"}, 400, COMPLETIONS),
    "completion of an encoder": (COMPLETIONS, {**HI, "model": "{encoder}"}, 400, EMBEDDINGS),
    "translation past the positions": (
        COMPLETIONS,
        {"model": "{seq2seq}", "prompt": "one", "max_tokens": 30},
        400,
        "at most 11",
    ),
    "no model named, several served": (COMPLETIONS, {"prompt": "hi"}, 400, "Name the model"),
    "temperature past 2": (COMPLETIONS, {**HI, "temperature": 1e300}, 400, "temperature must be a number in [0, 2]"),
    "negative temperature": (COMPLETIONS, {**HI, "temperature": -1}, 400, "temperature must be"),
    "temperature as text": (COMPLETIONS, {**HI, "temperature": "hot"}, 400, "got 'hot'"),
    "top_p past 1": (COMPLETIONS, {**HI, "top_p": 2}, 400, "top_p must be a number in (0, 1]"),
    "top_p 0 (chat)": (CHAT, {**CHAT_HI, "top_p": 0}, 400, "top_p"),
    "seed past 64 bits": (COMPLETIONS, {**HI, "seed": 2**70}, 400, "seed must be an integer"),
    "frequency_penalty huge": (
        COMPLETIONS,
        {**HI, "frequency_penalty": 1e308},
        400,
        "frequency_penalty must be a number in [-2, 2]",
    ),
    "several choices": (COMPLETIONS, {**HI, "n": 1000}, 400, "n=1000 is not supported"),
    "logprobs": (COMPLETIONS, {**HI, "logprobs": 5}, 400, "logprobs=5"),
    "presence_penalty past 2 (chat)": (
        CHAT,
        {**CHAT_HI, "presence_penalty": -2.5},
        400,
        "presence_penalty must be a number in [-2, 2]",
    ),
    "generation_config": (COMPLETIONS, {**HI, "generation_config": '{"num_beams": 1000}'}, 400, "generation_config"),
    "too many stops": (COMPLETIONS, {**HI, "stop": list("abcde")}, 400, "stop must"),
    "logit_bias key not ASCII digits": (COMPLETIONS, {**HI, "logit_bias": {"①": 5}}, 400, "not a token id"),
    "logit_bias past the vocabulary": (CHAT, {**CHAT_HI, "logit_bias": {"99999": 5}}, 400, "not a token id"),
    "logit_bias not a number": (CHAT, {**CHAT_HI, "logit_bias": {"x": 5}}, 400, "not a token id"),
    "body not JSON": (COMPLETIONS, '{"model": "x", "prompt": ', 400, "not valid JSON"),
    "body a JSON list": (EMBEDDINGS, "[1, 2]", 400, "JSON object"),
}


def greedy_with_openai_logits(model, prompt_ids: list[int], new_tokens: int, frequency=0.0, presence=0.0, bias=None):
    """Greedy decoding written out, with OpenAI's penalties and logit bias on each step's logits, counted over the
    generated tokens only: the reference the server's `frequency_penalty`, `presence_penalty` and `logit_bias`
    are held to. The new ids, up to and including the end token."""
    ids, generated = list(prompt_ids), []
    eos = model.generation_config.eos_token_id
    for _ in range(new_tokens):
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0, -1].double()
        for token in set(generated):
            logits[token] -= frequency * generated.count(token) + presence
        for token, value in (bias or {}).items():
            logits[token] += value
        token = int(logits.argmax())
        ids.append(token)
        generated.append(token)
        if token == eos:
            break
    return generated


def test_penalties_and_logit_bias_are_openais(client, folders, local):
    """Negative and positive penalties and an integer bias answer what greedy decoding with OpenAI's additive
    adjustments gives (transformers' server answered -2 with a 500, `penalty has to be a strictly positive
    float`, and an integer bias with a 500; in a stream a 200 carrying an error event)."""
    model, tokenizer = local["gpt"]
    prompt_ids = tokenizer(PROMPTS[1])["input_ids"]
    plain = greedy_with_openai_logits(model, prompt_ids, 16)
    cases = [
        {"frequency_penalty": -2.0},
        {"frequency_penalty": 1.5, "presence_penalty": 0.7},
        {"presence_penalty": -1.0, "logit_bias": {str(plain[0]): -100, str(plain[1]): 3}},
    ]
    for fields in cases:
        bias = {int(key): value for key, value in fields.get("logit_bias", {}).items()}
        ids = greedy_with_openai_logits(
            model, prompt_ids, 16, fields.get("frequency_penalty", 0), fields.get("presence_penalty", 0), bias
        )
        assert ids != plain, fields  # the adjustment changes the answer, so the comparison below tells
        expected = tokenizer.decode(ids, skip_special_tokens=True)
        options = dict(model=folders["gpt"], prompt=PROMPTS[1], max_tokens=16, temperature=0, **fields)
        assert client.completions.create(**options).choices[0].text == expected, fields
        chunks = list(client.completions.create(**options, stream=True))
        assert "".join(chunk.choices[0].text for chunk in chunks) == expected, fields

    model, tokenizer = local["chat"]
    messages = [{"role": "user", "content": "hi"}]
    prompt_ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=True)["input_ids"]
    ids = greedy_with_openai_logits(model, prompt_ids, 4, frequency=-2.0, bias={prompt_ids[-1]: 100})
    reply = client.chat.completions.create(
        model=folders["chat"],
        messages=messages,
        max_tokens=4,
        temperature=0,
        frequency_penalty=-2.0,
        logit_bias={str(prompt_ids[-1]): 100},
    )
    assert reply.choices[0].message.content == tokenizer.decode(ids, skip_special_tokens=True)

    target = AutoTokenizer.from_pretrained(folders["seq2seq"])(text_target="due")["input_ids"][0]
    completion = client.completions.create(
        model=folders["seq2seq"], prompt=PAIRS[0][0], max_tokens=3, temperature=0, logit_bias={str(target): 100}
    )
    assert completion.choices[0].text.split() == ["due"] * 3


def sample_locally(model, tokenizer, prompt: str, max_new_tokens: int, seed: int, **sampling) -> str:
    """`generate(do_sample=True)` after `torch.manual_seed(seed)`: what a request with that seed must answer."""
    inputs = tokenizer(prompt, return_tensors="pt")
    torch.manual_seed(seed)
    with torch.no_grad():
        output = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=True, **sampling)
    return tokenizer.decode(output[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)


def test_temperature_samples_and_seed_repeats_alone_or_beside_others(client, folders, local):
    """A request asking for sampling samples (transformers' server alone would answer greedily, keeping the
    model's do_sample=False); a seed gives what generate() gives after torch.manual_seed(seed), alone or while
    other sampled requests run (transformers' server seeds the global generator they all draw from);
    temperature 0 gives the greedy text."""
    model, tokenizer = local["gpt"]

    def complete(prompt="The cat", **fields):
        return client.completions.create(model=folders["gpt"], prompt=prompt, max_tokens=16, **fields).choices[0].text

    greedy = complete(temperature=0)
    sampled = {complete(temperature=1.5, seed=seed) for seed in range(4)}
    assert len(sampled) > 1 and greedy not in sampled
    expected = sample_locally(model, tokenizer, "The cat", 16, 7, temperature=1.5)
    assert complete(temperature=1.5, seed=7) == expected
    with ThreadPoolExecutor(4) as pool:
        others = [pool.submit(complete, prompt, temperature=1.0, top_p=0.9) for prompt in PROMPTS[:3]]
        beside = pool.submit(complete, temperature=1.5, seed=7).result()
        for other in others:
            other.result()
    assert beside == expected
    assert complete(temperature=0.8, top_p=0.8, seed=3) == sample_locally(
        model, tokenizer, "The cat", 16, 3, temperature=0.8, top_p=0.8
    )
    assert complete() == greedy  # no sampling field: the model's generation config (greedy)
    assert complete(temperature=1e-300) == greedy  # sampling's limit (dividing by it would overflow)


def test_bad_requests_answer_4xx_in_openai_shape_and_write_nothing(server, folders):
    headers = {"Authorization": f"Bearer {API_KEY}"}
    for case, (route, body, expected_status, message) in BAD_REQUESTS.items():
        if isinstance(body, dict):
            body = {key: value.format(**folders) if key == "model" else value for key, value in body.items()}
        status, answer = http("POST", server["url"] + route, body, headers)
        assert status == expected_status, (case, answer)
        error = answer["error"]
        assert message in error["message"], (case, error)
        assert error["type"] == "invalid_request_error" and set(error) == {"message", "type", "param", "code"}
    assert server["process"].poll() is None
    assert http("GET", server["url"] + "/health", headers=headers) == (200, {"status": "ok"})
    assert list(server["work"].iterdir()) == [] and _snapshot(folders) == server["before"]


def test_openai_client_raises_its_errors(client, folders):
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="no/such-model", prompt="hi", max_tokens=2)
    with pytest.raises(openai.BadRequestError, match="positive integer"):
        client.completions.create(model=folders["gpt"], prompt="hi", max_tokens=0)


# ------------------------------------------------------------------------------------------------ API key, models
def test_every_route_requires_the_api_key(server, folders):
    routes = [
        ("GET", "/health", None),
        ("GET", "/v1/models", None),
        ("POST", "/v1/completions", {"model": folders["gpt"], "prompt": "hi", "max_tokens": 1}),
        ("POST", "/v1/embeddings", {"model": folders["encoder"], "input": "hi"}),
    ]
    for method, route, body in routes:
        for headers in ({}, {"Authorization": "Bearer wrong-key"}, {"Authorization": API_KEY}):
            status, answer = http(method, server["url"] + route, body, headers)
            assert status == 401 and answer["error"]["code"] == "invalid_api_key", (route, headers)
        status, answer = http(method, server["url"] + route, body, {"Authorization": f"Bearer {API_KEY}"})
        assert status == 200, (route, answer)
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=f"{server['url']}/v1", api_key="wrong", max_retries=0).models.list()


def test_models_lists_the_served_names(client, folders):
    assert sorted(model.id for model in client.models.list()) == sorted(folders.values())


def test_serve_parser_binds_loopback_by_default():
    args = build_parser().parse_args(["serve", "some/folder"])
    assert (args.host, args.port, args.api_key, args.continuous_batching) == ("127.0.0.1", 8000, None, False)
    assert build_parser().parse_args(["serve", "f", "--host", "0.0.0.0"]).host == "0.0.0.0"


def test_serve_of_a_missing_folder_is_a_one_line_error(tmp_path, capsys):
    from hf_minitf.cli import main

    assert main(["serve", str(tmp_path / "absent")]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and error.startswith("minitf serve: error: cannot serve")


def test_a_missing_serve_extra_is_a_one_line_error_naming_it(tmp_path, capsys, monkeypatch):
    from hf_minitf.cli import main

    monkeypatch.setitem(sys.modules, "fastapi", None)
    monkeypatch.delitem(sys.modules, "hf_minitf.serving.server", raising=False)
    assert main(["serve", str(tmp_path)]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "hf-minitf[serve]" in error, error


def test_the_startup_line_names_each_model_and_warns_outside_the_tested_range(monkeypatch):
    from hf_minitf.catalog import packaging
    from hf_minitf.serving.models import ServedModel, ServedModels
    from hf_minitf.serving.server import startup_line

    models = ServedModels([ServedModel("my_gpt", "gpt", None, None, engine="onnxruntime")])
    monkeypatch.setattr(packaging, "TESTED_TRANSFORMERS", ("0.0.1", "99.0.0"))
    inside = startup_line(models, "127.0.0.1", 8000)
    assert "http://127.0.0.1:8000 serves my_gpt (gpt, onnxruntime); transformers 5." in inside
    assert "WARNING" not in inside
    monkeypatch.setattr(packaging, "TESTED_TRANSFORMERS", ("0.0.1", "0.0.2"))
    assert "WARNING: transformers 5." in startup_line(models, "127.0.0.1", 8000)


def test_the_serve_extra_keeps_the_installed_transformers():
    """The server runs on transformers' public API, so its extra pins no transformers (it held 5.24 before, and
    `pip install "hf-minitf[serve]"` downgraded a newer one)."""
    from importlib.metadata import requires

    serve = [line for line in requires("hf-minitf") or [] if 'extra == "serve"' in line]
    assert serve and not any(line.startswith("transformers") for line in serve), serve


def test_the_server_imports_no_private_transformers_module():
    """The server runs on transformers' public API: nothing from `transformers.cli`, no ContextVar (issue 49)."""
    package = Path(__file__).parents[2] / "hf_minitf"
    for path in package.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert "transformers.cli" not in text and "ContextVar" not in text, path


# ------------------------------------------------------------------------------------------------ the docs page
SERVING_PAGE = Path(__file__).parents[2] / "docs" / "serving.md"


def test_the_serving_page_examples(server, folders):
    """docs/serving.md's blocks against this server: `minitf serve` lines parse, curl commands (with the key) answer
    JSON without an error, or the error their comment shows, and the openai examples run and print."""
    import contextlib
    import io
    import subprocess

    from test_docs import read_blocks

    from hf_minitf.training.quickstart import FOLDERS

    quickstart = build_parser().parse_args(["quickstart"]).out  # the folders as `minitf quickstart` names them
    served = {(quickstart / FOLDERS[family]).as_posix(): folders[family] for family in ("gpt", "encoder", "seq2seq")}
    served["frawdllm-chat"] = folders["chat"]

    def aimed(code: str) -> str:
        for port in ("8000", "8001", "8002"):
            code = code.replace(f"http://127.0.0.1:{port}", server["url"])
        code = code.replace('api_key="none"', f'api_key="{API_KEY}"').replace("my-secret", API_KEY)
        for name, folder in served.items():
            code = code.replace(f'"{name}"', json.dumps(folder))
        # The test chat model's 16 positions hold the templated prompt and one new token; the test translator
        # knows the words of PAIRS only.
        code = code.replace('"max_tokens": 32', '"max_tokens": 1').replace("max_tokens=32", "max_tokens=1")
        return code.replace("the red cat sees a small girl", PAIRS[0][0])

    ran = {"serve": 0, "curl": 0, "python": 0}
    for block in read_blocks(SERVING_PAGE):
        if block.language == "text":
            continue
        if block.language == "bash" and block.code.lstrip().startswith(("minitf serve", "MINITF_API_KEY=")):
            words = block.code.split()
            words = words[1:] if words[0].startswith("MINITF_API_KEY=") else words
            args = build_parser().parse_args(words[1:])
            assert args.command == "serve" and args.models, block.name
            ran["serve"] += 1
        elif block.language == "bash":
            command, _, shown = block.code.partition("\n# ")
            assert command.lstrip().startswith("curl -s "), block.name
            command = aimed(command)
            if "Authorization" not in command:
                command = command.replace("curl -s ", f"curl -s -H 'Authorization: Bearer {API_KEY}' ", 1)
            done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, (block.name, done.stderr)
            answer = json.loads(done.stdout)
            if shown:
                assert answer == json.loads(shown.replace("\n#", "\n")), block.name
            else:
                assert "error" not in answer and answer, (block.name, answer)
            ran["curl"] += 1
        else:
            assert block.language == "python", block.name
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(aimed(block.code), block.name, "exec"), {"__name__": "__docs__"})
            assert out.getvalue().strip(), block.name
            ran["python"] += 1
    assert ran == {"serve": 5, "curl": 6, "python": 4}, ran
