"""docs/training.md's "Chat fine-tuning with TRL" end to end, its blocks as written: a BPE GPT given the chatml
template while it trains, TRL's SFTTrainer with a LoRA adapter (peft) on conversations, the adapter merged and
saved, `minitf serve` on the folder, and the openai client's chat completion, which must be the merged model's
greedy `generate()` of the templated prompt up to the end of the turn."""

import contextlib
import io
from pathlib import Path

import pytest
import torch
from test_docs import read_blocks
from transformers import AutoModelForCausalLM, AutoTokenizer

from hf_minitf.cli import build_parser
from hf_minitf.serving.process import server_process

pytest.importorskip("trl")
pytest.importorskip("peft")

PAGE = Path(__file__).parents[2] / "docs" / "training.md"
SECTION = "Chat fine-tuning with TRL"
DOC_URL = "http://127.0.0.1:8000"


def test_the_chat_fine_tuning_section(tmp_path, monkeypatch):
    blocks = [block for block in read_blocks(PAGE) if block.section == SECTION and block.language != "text"]
    assert [block.language for block in blocks] == ["python", "python", "bash", "python"]
    monkeypatch.chdir(tmp_path)
    torch.manual_seed(0)
    namespace = {"__name__": "__docs__"}
    for block in blocks[:2]:  # train the base GPT; SFT + LoRA, merge, save
        exec(compile(block.code, block.name, "exec"), namespace)
    assert not (tmp_path / "chat_gpt" / "training_args.bin").exists()
    assert "lora" not in "".join(AutoModelForCausalLM.from_pretrained("chat_gpt").state_dict())

    args = build_parser().parse_args(blocks[2].code.split()[1:])
    assert args.command == "serve" and args.models == ["chat_gpt"] and args.port == 8000
    with server_process(args.models, "--log-level", "warning", "--engine", "torch", cwd=tmp_path) as server:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(blocks[3].code.replace(DOC_URL, server.url), blocks[3].name, "exec"), namespace)
    reply = namespace["reply"].choices[0]
    assert out.getvalue() == f"{reply.message.content} {reply.finish_reason}\n"

    model = AutoModelForCausalLM.from_pretrained("chat_gpt").eval()
    tokenizer = AutoTokenizer.from_pretrained("chat_gpt")
    end_of_turn = tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert end_of_turn in model.generation_config.eos_token_id
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Is 12 even?"}], add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    with torch.no_grad():
        new = model.generate(**prompt, max_new_tokens=8, do_sample=False)[0, prompt["input_ids"].shape[1] :]
    assert reply.message.content == tokenizer.decode(new, skip_special_tokens=True)
    assert reply.finish_reason == ("stop" if new[-1].item() in model.generation_config.eos_token_id else "length")
