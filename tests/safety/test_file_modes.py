"""Files others can read: everything the package writes, the weights included, gets the mode a plain `open()`
gives under the user's umask (safetensors writes weights 0600, beside a 0644 config.json)."""

import json
import subprocess
import sys
import textwrap

import pytest

WRITE_EVERYTHING = """
import json, os, pathlib, sys
os.umask({umask})
from hf_minitf import MiniTFGPTConfig, MiniTFGPTForCausalLM, TrainSettings, char_tokenizer, train_gpt
from hf_minitf.export.native import export_native

root = pathlib.Path(sys.argv[1])
tokenizer = char_tokenizer("abcdefgh\\n")
config = MiniTFGPTConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=32, max_position_embeddings=16)
MiniTFGPTForCausalLM(config).save_pretrained(root / "saved")  # the model's own save_pretrained
tokenizer.save_pretrained(root / "saved")
export_native(root / "saved", root / "native")  # an export, through the atomic folder writer
train_gpt("abcdefgh\\n" * 20, root / "trained", block_size=8,  # training, through the same writer
          settings=TrainSettings(max_steps=1, batch_size=4, progress=False),
          config_overrides={{"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2}})
print(json.dumps({{str(path.relative_to(root)): path.stat().st_mode & 0o777
                  for path in root.rglob("*") if path.is_file()}}))
"""


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_every_file_written_has_the_mode_open_gives(umask, tmp_path):
    code = textwrap.dedent(WRITE_EVERYTHING.format(umask=oct(umask)))
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    modes = json.loads(done.stdout.strip().splitlines()[-1])
    assert {"saved/model.safetensors", "native/model.safetensors", "trained/model.safetensors"} <= set(modes)
    other = {name: oct(mode) for name, mode in modes.items() if mode != 0o666 & ~umask}
    assert not other, f"files not {oct(0o666 & ~umask)} under umask {oct(umask)}: {other}"
