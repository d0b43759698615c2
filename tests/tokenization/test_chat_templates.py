"""Chat templates for GPTs (hf_minitf.tokenization.chat_templates, `minitf chat-template`, `minitf train gpt
--chat-template`): the named templates render as declared, markers are one id each, generation stops at the end of
an assistant turn, and a template the vocabulary cannot spell (or that gives no token to stop at) is refused naming
what is wrong, leaving the tokenizer or folder as it was."""

import json
import threading

import pytest
import torch
from bad_inputs import bad, check_bad_input, minitf, write
from factories import make_encoder, tiny_model_folder
from transformers import AutoModelForCausalLM, AutoTokenizer

from hf_minitf import char_tokenizer, set_chat_template, train_bpe_tokenizer
from hf_minitf.catalog.chat_templates import CHAT_TEMPLATES
from hf_minitf.tokenization.gpt import CHAR_SPECIAL_TOKENS
from hf_minitf.training.trainers import TrainSettings, train_gpt

CHAT = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": "hello"},
]
ROLE_CHARACTERS = "User: Assistant: System:\n"
TEXTS = ["the cat sat on the mat, the dog ran in the park.\n", "user assistant system said hello there\n"] * 20


def bpe_tokenizer():
    return train_bpe_tokenizer(TEXTS, vocab_size=280, min_frequency=1)


def gpt_folder(folder, tokenizer):
    """A tiny random GPT of `tokenizer`'s vocabulary saved with it."""
    return tiny_model_folder("gpt", folder, tokenizer)


def snapshot(folder):
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir()) if path.is_file()}


def test_the_simple_template_is_spelled_character_by_character_and_ends_turns_with_eos():
    tokenizer = char_tokenizer(ROLE_CHARACTERS + "abefhilnory")
    change = set_chat_template(tokenizer, "simple")
    assert (change.added_tokens, change.end_of_turn, change.end_of_turn_id) == ((), "<eos>", tokenizer.eos_token_id)
    text = tokenizer.apply_chat_template(CHAT, tokenize=False)
    assert text == "System: be brief\nUser: hi\nAssistant: hello<eos>"
    prompt = tokenizer.apply_chat_template(CHAT[:2], tokenize=False, add_generation_prompt=True)
    assert prompt == "System: be brief\nUser: hi\nAssistant: "
    ids = tokenizer(text, add_special_tokens=False).input_ids
    assert tokenizer.unk_token_id not in ids and tokenizer.decode(ids) == text


def test_chatml_adds_its_markers_as_special_tokens_of_one_id_each():
    tokenizer = bpe_tokenizer()
    size = len(tokenizer)
    change = set_chat_template(tokenizer, "chatml")
    assert change.added_tokens == ("<|im_start|>", "<|im_end|>") and len(tokenizer) == size + 2
    assert change.end_of_turn_id == tokenizer.convert_tokens_to_ids("<|im_end|>") == size + 1
    text = tokenizer.apply_chat_template(CHAT, tokenize=False)
    assert text == (
        "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
        "<|im_start|>assistant\nhello<|im_end|>\n"
    )
    ids = tokenizer(text, add_special_tokens=False).input_ids
    assert ids.count(size) == 3 and ids.count(size + 1) == 3
    assert "<|im_" not in tokenizer.decode(ids, skip_special_tokens=True)


def test_a_folder_grows_rows_for_the_markers_and_generation_stops_at_the_end_of_a_turn(tmp_path):
    folder = gpt_folder(tmp_path / "gpt", bpe_tokenizer())
    before = AutoModelForCausalLM.from_pretrained(folder)
    rows = before.get_input_embeddings().num_embeddings
    change = set_chat_template(folder, "chatml")
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert tokenizer.chat_template == CHAT_TEMPLATES["chatml"].template
    assert model.config.vocab_size == len(tokenizer) == rows + 2
    assert torch.equal(model.get_input_embeddings().weight[:rows], before.get_input_embeddings().weight)
    assert model.generation_config.eos_token_id == [tokenizer.eos_token_id, change.end_of_turn_id]
    assert json.loads((folder / "generation_config.json").read_text())["eos_token_id"][-1] == change.end_of_turn_id
    # Make the end of turn the likeliest next token: greedy generation must stop right there.
    with torch.no_grad():
        model.lm_head.weight[change.end_of_turn_id] = 50 * model.lm_head.weight[5:10].mean(0).sign()
        model.get_input_embeddings().weight[change.end_of_turn_id] = model.lm_head.weight[change.end_of_turn_id]
    prompt = tokenizer.apply_chat_template(CHAT[1:2], add_generation_prompt=True, return_tensors="pt", return_dict=True)
    output = model.generate(**prompt, max_new_tokens=10, do_sample=False)[0, prompt["input_ids"].shape[1] :]
    assert output[-1] == change.end_of_turn_id and len(output) < 10


def test_a_folder_whose_vocabulary_has_room_keeps_its_weights(tmp_path):
    folder = gpt_folder(tmp_path / "gpt", char_tokenizer(ROLE_CHARACTERS + "abc"))
    weights = (folder / "model.safetensors").read_bytes()
    set_chat_template(folder, "simple")
    assert (folder / "model.safetensors").read_bytes() == weights
    assert AutoTokenizer.from_pretrained(folder).chat_template == CHAT_TEMPLATES["simple"].template
    assert (folder / "chat_template.jinja").is_file()


def test_a_jinja_file_ending_answers_with_eos_is_taken(tmp_path):
    template = write(
        tmp_path / "chat.jinja",
        "{% for m in messages %}{{ m['role'][0] }}>{{ m['content'] }}{% if m['role'] == 'assistant' %}"
        "{{ eos_token }}{% endif %}{% endfor %}{% if add_generation_prompt %}a>{% endif %}",
    )
    tokenizer = char_tokenizer("usa>hello")
    change = set_chat_template(tokenizer, template)
    assert (change.name, change.end_of_turn) == (str(template), "<eos>")
    assert tokenizer.apply_chat_template(CHAT[1:], tokenize=False) == "u>hia>hello<eos>"


def test_training_with_a_template_gives_a_character_vocabulary_its_characters(tmp_path):
    text = "".join(f"{n} is {'even' if n % 2 == 0 else 'odd'}\n" for n in range(60))  # no capitals, no colon
    result = train_gpt(
        text,
        tmp_path / "gpt",
        tokenizer="char",
        chat_template="simple",
        block_size=16,
        settings=TrainSettings(max_steps=1, batch_size=4, progress=False),
        config_overrides={"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2},
    )
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "gpt")
    assert set("UAS:") <= set(tokenizer.get_vocab()) and tokenizer.chat_template == CHAT_TEMPLATES["simple"].template
    assert result.model.config.vocab_size == len(tokenizer)
    assert "Chat template: simple" in (tmp_path / "gpt" / "README.md").read_text()


def test_minitf_chat_template_gives_a_folder_one(tmp_path, capsys):
    folder = gpt_folder(tmp_path / "gpt", bpe_tokenizer())
    minitf("chat-template", folder, "chatml")
    assert "the chat template chatml; added <|im_start|>, <|im_end|>" in capsys.readouterr().out
    minitf("chat-template", folder, "chatml", "--replace")
    assert AutoTokenizer.from_pretrained(folder).chat_template == CHAT_TEMPLATES["chatml"].template


def test_two_runs_on_one_folder_at_once_keep_one_template_and_tell_the_other(tmp_path):
    """The second run waits for the first and finds its template: refused (no --replace), not silently lost."""
    folder = gpt_folder(tmp_path / "gpt", bpe_tokenizer())
    start = threading.Barrier(2)
    outcomes = {}

    def give(template):
        start.wait()
        try:
            set_chat_template(folder, template)
            outcomes[template] = "given"
        except ValueError as error:
            outcomes[template] = str(error)

    runs = [threading.Thread(target=give, args=(template,)) for template in ("chatml", "simple")]
    for run in runs:
        run.start()
    for run in runs:
        run.join()
    given = [template for template, outcome in outcomes.items() if outcome == "given"]
    assert len(given) == 1, outcomes
    (refusal,) = (outcome for outcome in outcomes.values() if outcome != "given")
    assert "already has a chat template" in refusal and "replace" in refusal
    assert AutoTokenizer.from_pretrained(folder).chat_template == CHAT_TEMPLATES[given[0]].template
    assert sorted(path.name for path in tmp_path.iterdir()) == ["gpt"]


def refused_in_folder(tmp, template, make=lambda folder: gpt_folder(folder, bpe_tokenizer()), *options):
    """`minitf chat-template` on a fresh folder, which must be left as it was."""
    folder = make(tmp / "model")
    before = snapshot(folder)
    try:
        minitf("chat-template", folder, template, *options)
    finally:
        assert snapshot(folder) == before


def refused_on_tokenizer(tokenizer, template):
    """`set_chat_template` on a tokenizer in memory, which must be left as it was."""
    size, state = len(tokenizer), tokenizer.chat_template
    try:
        set_chat_template(tokenizer, template)
    finally:
        assert (len(tokenizer), tokenizer.chat_template) == (size, state)


def gave_twice(folder):
    set_chat_template(gpt_folder(folder, bpe_tokenizer()), "chatml")
    return folder


BAD_INPUTS = [
    bad(
        "chat-template-characters-missing",
        lambda tmp: refused_on_tokenizer(char_tokenizer("abc"), "simple"),
        ValueError,
        r"chat template simple writes the characters \['\\n', ' ', ':', 'A', 'S', 'U', 'e', .*which the vocabulary "
        "cannot spell",
    ),
    bad(
        "chat-template-chatml-characters-missing",
        lambda tmp: refused_on_tokenizer(char_tokenizer("user", special_tokens=CHAR_SPECIAL_TOKENS), "chatml"),
        ValueError,
        r"chat template chatml writes the characters \['\\n', 'a', 'i', 'm', 'n', 't', 'y'\]",
    ),
    bad(
        "chat-template-no-end-of-turn-token",
        lambda tmp: refused_on_tokenizer(
            char_tokenizer("ab:\n"), write(tmp / "t.jinja", "{% for m in messages %}{{ m['content'] }}\n{% endfor %}")
        ),
        ValueError,
        r"ends an assistant message with '\\n', not with one token, so generation could not stop .*eos_token",
    ),
    bad(
        "chat-template-drops-the-content",
        lambda tmp: refused_on_tokenizer(char_tokenizer("ab"), write(tmp / "t.jinja", "a{{ eos_token }}")),
        ValueError,
        r"leaves out the messages' content",
    ),
    bad(
        "chat-template-jinja-syntax",
        lambda tmp: refused_on_tokenizer(char_tokenizer("ab"), write(tmp / "t.jinja", "{% for m in messages %}")),
        ValueError,
        r"chat template .*t.jinja does not render: ",
    ),
    bad(
        "chat-template-unknown-name",
        lambda tmp: refused_on_tokenizer(char_tokenizer("ab"), "chatlm"),
        ValueError,
        r"'chatlm' is neither a template name \(chatml, simple\) nor a Jinja file",
    ),
    bad(
        "chat-template-folder-has-one",
        lambda tmp: refused_in_folder(tmp, "simple", gave_twice),
        Exception,
        r"minitf chat-template: error: the tokenizer already has a chat template; pass .*--replace",
    ),
    bad(
        "chat-template-encoder-folder",
        lambda tmp: refused_in_folder(tmp, "chatml", make_encoder),
        Exception,
        r"model holds an encoder model; chat templates are for GPT folders",
    ),
]


@pytest.mark.parametrize("action, error, message", BAD_INPUTS)
def test_bad_chat_templates(tmp_path, action, error, message):
    check_bad_input(tmp_path, action, error, message)
