"""The chat templates a GPT folder can be given by name (`minitf train gpt --chat-template NAME`, `minitf
chat-template FOLDER NAME`, `hf_minitf.set_chat_template`); any other template comes from a Jinja file.

Each names the special tokens it needs as one id each (added to the vocabulary when missing) and the token that
ends an assistant turn, where generation stops (`None`: the tokenizer's own EOS token).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ChatTemplateSpec:
    """A named chat template: its Jinja text, the special tokens it needs and the token ending an assistant turn."""

    name: str
    summary: str
    template: str
    special_tokens: tuple[str, ...] = ()
    end_of_turn: str | None = None


_ROLES_ERROR = "{{ raise_exception(\"the 'simple' chat format has system, user and assistant messages, not '\" ~ "
_CHATML = (
    "{%- for message in messages -%}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}"
)
_SIMPLE = (
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'system' -%}{{ 'System: ' + message['content'] + '\\n' }}"
    "{%- elif message['role'] == 'user' -%}{{ 'User: ' + message['content'] + '\\n' }}"
    "{%- elif message['role'] == 'assistant' -%}{{ 'Assistant: ' + message['content'] + eos_token }}"
    "{%- else -%}" + _ROLES_ERROR + "message['role'] ~ \"'\") }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ 'Assistant: ' }}{%- endif -%}"
)

CHAT_TEMPLATES = {
    spec.name: spec
    for spec in (
        ChatTemplateSpec(
            "chatml",
            "ChatML, <|im_start|>ROLE\\nTEXT<|im_end|> per message (the two markers are added as special tokens); "
            "for BPE vocabularies",
            _CHATML,
            special_tokens=("<|im_start|>", "<|im_end|>"),
            end_of_turn="<|im_end|>",
        ),
        ChatTemplateSpec(
            "simple",
            "'User: TEXT\\nAssistant: TEXT' then EOS, role names in plain characters; for character vocabularies",
            _SIMPLE,
        ),
    )
}

CHAT_TEMPLATE_HELP = (
    "the chat template to give the tokenizer: "
    + "; ".join(f"{spec.name}: {spec.summary}" for spec in CHAT_TEMPLATES.values())
    + "; or the path of a Jinja file"
)

__all__ = ["CHAT_TEMPLATES", "CHAT_TEMPLATE_HELP", "ChatTemplateSpec"]
