"""`generate(stop_strings=..., tokenizer=...)` and the pipelines stop at the token that completes a stop string,
for every kind of tokenizer the package writes: characters (one that cannot spell transformers' probe "abcdef"),
byte-level BPE (stop strings inside and across tokens, multi-byte characters), words, and the seq2seq pair.

The expected stop is found without the criterion: the greedy generation without stop strings, cut after the first
token whose prefix decodes to a text containing the stop string."""

import pytest
import torch
from factories import EXPORT_TEXT, PAIRS, SENTENCES, _random_gpt, make_seq2seq
from isolation import run_without_hf_minitf
from transformers import (
    AutoModelForCausalLM,
    AutoModelForSeq2SeqLM,
    AutoTokenizer,
    StoppingCriteria,
    StoppingCriteriaList,
    pipeline,
)

from hf_minitf import char_tokenizer, train_bpe_tokenizer, train_wordlevel_tokenizer

# No letter of transformers' probe "abcdef": its StopStringCriteria fails on this vocabulary.
CHAR_TEXT = "ghijklmnopqrstuvwxyz ghost jump zip\n"
NEW_TOKENS = 24


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("stops")
    words = train_wordlevel_tokenizer(SENTENCES + [source for source, _ in PAIRS], vocab_size=64, min_frequency=1)
    return {
        "char": _random_gpt(root / "char", char_tokenizer(CHAR_TEXT), 7),
        "bpe": _random_gpt(root / "bpe", train_bpe_tokenizer([EXPORT_TEXT], vocab_size=300, min_frequency=1), 1),
        "words": _random_gpt(root / "words", words, 2),
        "seq2seq": make_seq2seq(root / "seq2seq", seed=5),
    }


PROMPTS = {"char": "ghost ", "bpe": "the quick", "words": "the dog", "seq2seq": "the cat sat on the mat"}


def load(folder):
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model_class = AutoModelForSeq2SeqLM if folder.name == "seq2seq" else AutoModelForCausalLM
    return model_class.from_pretrained(folder), tokenizer


def generated(model, tokenizer, prompt: str, **options) -> list[int]:
    """The greedy continuation's ids (after the prompt, or after the decoder's start token)."""
    inputs = tokenizer(prompt, return_tensors="pt")
    room = model.config.max_position_embeddings - 1  # the seq2seq decoder's, after its start token
    with torch.no_grad():
        output = model.generate(
            **inputs, max_new_tokens=min(NEW_TOKENS, room), do_sample=False, tokenizer=tokenizer, **options
        )
    start = 1 if model.config.is_encoder_decoder else inputs["input_ids"].shape[1]
    return output[0, start:].tolist()


def decode(tokenizer, ids: list[int]) -> str:
    return tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)


def cut_at_first_stop(tokenizer, ids: list[int], stops: list[str]) -> list[int]:
    """`ids` up to the first token after which the decoded text holds one of `stops`."""
    for end in range(1, len(ids) + 1):
        if any(stop in decode(tokenizer, ids[:end]) for stop in stops):
            return ids[:end]
    return ids


def stops_in(text: str) -> list[str]:
    """Stop strings taken from a generated text: a character early on, a stretch across the middle, the tail."""
    middle = len(text) // 2
    return [text[len(text) // 4], text[middle : middle + 3], text[-2:]]


@pytest.mark.parametrize("kind", ["char", "bpe", "words", "seq2seq"])
def test_generation_stops_at_the_token_that_completes_a_stop_string(folders, kind):
    model, tokenizer = load(folders[kind])
    full = generated(model, tokenizer, PROMPTS[kind])
    text = decode(tokenizer, full)
    assert len(set(text)) > 3, f"the model should wander, not repeat: {text!r}"
    for stop in stops_in(text):
        expected = cut_at_first_stop(tokenizer, full, [stop])
        assert len(expected) < len(full) or stop == text[-2:]
        for use_cache in (True, False):
            assert generated(model, tokenizer, PROMPTS[kind], stop_strings=stop, use_cache=use_cache) == expected
    several = stops_in(text)[1:]
    assert generated(model, tokenizer, PROMPTS[kind], stop_strings=several) == cut_at_first_stop(
        tokenizer, full, several
    )


def test_a_stop_string_inside_a_multibyte_character_of_byte_level_bpe(folders):
    model, tokenizer = load(folders["bpe"])
    prompt = "caf"
    full = generated(model, tokenizer, prompt)
    text = decode(tokenizer, full)
    wide = next((character for character in text if len(character.encode()) > 1), None)
    stops = ["é", "—"] if wide is None else [wide]
    assert generated(model, tokenizer, prompt, stop_strings=stops) == cut_at_first_stop(tokenizer, full, stops)


def test_a_stop_string_in_the_prompt_stops_nothing(folders):
    model, tokenizer = load(folders["char"])
    full = generated(model, tokenizer, "ghost ")
    absent = next(stop for stop in ("ghost", "jump", "zip") if stop not in decode(tokenizer, full))
    assert generated(model, tokenizer, "ghost ", stop_strings=["ghost ", absent]) == full


def test_each_row_of_a_batch_stops_at_its_own_stop(folders):
    model, tokenizer = load(folders["char"])
    prompts = ["ghost ", "zip j"]
    singles = [generated(model, tokenizer, prompt) for prompt in prompts]
    stop = decode(tokenizer, singles[0])[3]
    tokenizer.padding_side = "left"
    inputs = tokenizer(prompts, return_tensors="pt", padding=True)
    with torch.no_grad():
        output = model.generate(
            **inputs, max_new_tokens=NEW_TOKENS, do_sample=False, stop_strings=stop, tokenizer=tokenizer
        )
    for row, single in zip(output[:, inputs["input_ids"].shape[1] :].tolist(), singles, strict=True):
        expected = cut_at_first_stop(tokenizer, single, [stop])
        assert row[: len(expected)] == expected
        assert set(row[len(expected) :]) <= {tokenizer.pad_token_id}


def test_the_pipelines_stop_at_a_stop_string(folders):
    model, tokenizer = load(folders["char"])
    ids = generated(model, tokenizer, "ghost ")
    visible = tokenizer.decode(ids, skip_special_tokens=True)
    stop = visible[len(visible) // 2]
    generator = pipeline("text-generation", model=model, tokenizer=tokenizer)
    answer = generator("ghost ", max_new_tokens=NEW_TOKENS, do_sample=False, stop_sequence=stop, return_full_text=False)
    expected = tokenizer.decode(cut_at_first_stop(tokenizer, ids, [stop]), skip_special_tokens=True)
    assert answer[0]["generated_text"] == expected and expected.endswith(stop) and len(expected) < len(visible)

    model, tokenizer = load(folders["seq2seq"])
    source = PROMPTS["seq2seq"]
    ids = generated(model, tokenizer, source)
    translation = tokenizer.decode(ids, skip_special_tokens=True)
    stop = translation.split()[1] if len(translation.split()) > 1 else translation[1]
    translator = pipeline("minitf-translation", model=model, tokenizer=tokenizer)
    stopped = translator(source, stop_strings=stop)[0]["translation_text"]
    assert stopped == tokenizer.decode(cut_at_first_stop(tokenizer, ids, [stop]), skip_special_tokens=True)
    assert stopped.endswith(stop) and len(stopped) < len(translation) + (stop == translation.split()[-1])


def test_the_saved_code_stops_without_hf_minitf(folders, tmp_path):
    """The criterion is copied beside saved models: remote-code users (no hf_minitf) get it too."""
    model, tokenizer = load(folders["char"])
    full = generated(model, tokenizer, "ghost ")
    stop = decode(tokenizer, full)[len(full) // 2]
    result = run_without_hf_minitf(
        f"""
        import json, torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
        folder = {str(folders["char"])!r}
        model = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)
        tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
        inputs = tokenizer("ghost ", return_tensors="pt")
        output = model.generate(**inputs, max_new_tokens={NEW_TOKENS}, do_sample=False, stop_strings={stop!r},
                                tokenizer=tokenizer)
        print(json.dumps({{"module": type(model).__module__, "ids": output[0, inputs["input_ids"].shape[1]:].tolist()}}))
        """,
        cwd=str(tmp_path),
    )
    assert result["module"].startswith("transformers_modules")
    assert result["ids"] == cut_at_first_stop(tokenizer, full, [stop])


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"stop_strings": ""}, "stop_strings must be a non-empty string"),
        ({"stop_strings": ["a", ""]}, "stop_strings must be a non-empty string"),
        ({"stop_strings": "a", "tokenizer": None}, "pass tokenizer= to generate"),
    ],
)
def test_stop_strings_that_cannot_stop_are_refused(folders, options, message):
    model, tokenizer = load(folders["char"])
    inputs = tokenizer("ghost", return_tensors="pt")
    with pytest.raises(ValueError, match=message):
        model.generate(**inputs, max_new_tokens=2, **{"tokenizer": tokenizer, **options})


class Steps(StoppingCriteria):
    """Records the sequence length at each decoding step, and stops nothing."""

    def __init__(self):
        self.lengths = []

    def __call__(self, input_ids, scores, **kwargs):
        self.lengths.append(input_ids.shape[1])
        return torch.zeros(input_ids.shape[0], dtype=torch.bool)


@pytest.mark.parametrize("path", ["prompt lookup", "assistant model"])
def test_a_stop_completed_inside_a_several_token_step_stops_there(folders, path):
    """Prompt lookup and assisted decoding accept several drafted tokens a step: a stop string completed by one
    that is not the step's last still ends generation at that token, as greedy decoding token by token does."""
    model, tokenizer = load(folders["char"])
    model.generation_config.eos_token_id = None  # a long run, for repeats that prompt lookup drafts from
    drafting = {"prompt_lookup_num_tokens": 8} if path == "prompt lookup" else {"assistant_model": model}
    prompt = "ghost jump zip ghost jump zip ghost "
    start = len(tokenizer(prompt).input_ids)
    steps = Steps()
    full = generated(model, tokenizer, prompt, stopping_criteria=StoppingCriteriaList([steps]), **drafting)
    assert full == generated(model, tokenizer, prompt), "drafting must not change greedy tokens"
    lengths = [start, *steps.lengths]
    several = [begin - start for begin, end in zip(lengths, lengths[1:]) if end - begin >= 2]
    cases = []
    for begin in several:  # a stop completed by the first token of a several-token step
        text = decode(tokenizer, full[: begin + 1])
        stop = next(
            (
                text[-size:]
                for size in (1, 2, 3, 4)
                if len(cut_at_first_stop(tokenizer, full, [text[-size:]])) == begin + 1
            ),
            None,
        )
        if stop is not None:
            cases.append((stop, full[: begin + 1]))
    assert cases, f"no several-token step to stop inside: steps {lengths}"
    for stop, expected in cases:
        assert generated(model, tokenizer, prompt, stop_strings=stop, **drafting) == expected
