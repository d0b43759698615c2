"""The training-speed benchmark runs every family's cases end to end in a tiny configuration, so it never rots (it
measures nothing here). The originals' model files are not in this repository: stand-ins with their interfaces
(constructors, calls and the shapes of what the loops pass them) take their place."""

import json

import pytest
from helpers import load_benchmark

# Each original's interface as the benchmark's loop uses it: the char GPT's `GPT(...)(x, y) -> (logits, loss)`,
# MiniEmbed's `MiniTransformerEmbedding(...).encode(ids, mask)`, hkproj's `build_transformer(...)` with `encode`,
# `decode` (its (batch, 1, 1, source) and (batch, 1, target, target) masks) and `project` (log-probabilities).
STAND_INS = {
    "gpt": (
        "--char-gpt-source",
        """
class GPT(nn.Module):
    def __init__(self, vocab_size, block_size, n_embd, n_head, n_layer, dropout):
        super().__init__()
        self.wte, self.lm_head = nn.Embedding(vocab_size, n_embd), nn.Linear(n_embd, vocab_size)

    def forward(self, idx, targets):
        assert idx.shape == targets.shape
        logits = self.lm_head(self.wte(idx))
        return logits, F.cross_entropy(logits.flatten(0, 1), targets.flatten())
""",
    ),
    "encoder": (
        "--miniembed-source",
        """
class MiniTransformerEmbedding(nn.Module):
    def __init__(self, vocab_size, d_model, num_heads, num_layers, d_ff, max_seq_len, dropout, pad_token_id):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab_size, d_model, padding_idx=pad_token_id)

    def encode(self, input_ids, attention_mask):
        assert attention_mask.shape == input_ids.shape
        mask = attention_mask[..., None].float()
        return F.normalize((self.token_embedding(input_ids) * mask).sum(1) / mask.sum(1), dim=-1)
""",
    ),
    "seq2seq": (
        "--hkproj-source",
        """
class Transformer(nn.Module):
    def __init__(self, src_vocab_size, tgt_vocab_size, d_model):
        super().__init__()
        self.src_embed, self.tgt_embed = nn.Embedding(src_vocab_size, d_model), nn.Embedding(tgt_vocab_size, d_model)
        self.projection_layer = nn.Linear(d_model, tgt_vocab_size)

    def encode(self, src, src_mask):
        assert src_mask.shape == (src.shape[0], 1, 1, src.shape[1])
        return self.src_embed(src)

    def decode(self, encoder_output, src_mask, tgt, tgt_mask):
        assert tgt_mask.shape == (tgt.shape[0], 1, tgt.shape[1], tgt.shape[1])
        return self.tgt_embed(tgt) + encoder_output.mean(1, keepdim=True)

    def project(self, x):
        return torch.log_softmax(self.projection_layer(x), dim=-1)


def build_transformer(src_vocab_size, tgt_vocab_size, src_seq_len, tgt_seq_len, d_model, N, h, dropout, d_ff):
    return Transformer(src_vocab_size, tgt_vocab_size, d_model)
""",
    ),
}


@pytest.mark.parametrize("family", ["gpt", "encoder", "seq2seq"])
def test_smoke_times_the_original_loop_the_minitf_loop_and_the_command(family, tmp_path):
    option, code = STAND_INS[family]
    source = tmp_path / "model.py"
    source.write_text("import torch\nimport torch.nn.functional as F\nfrom torch import nn\n" + code)
    output = tmp_path / "training-speed.json"
    rows = load_benchmark("training_speed").main(
        ["--family", family, "--smoke", option, str(source), "--json", str(output)]
    )
    assert json.loads(output.read_text())["rows"] == json.loads(json.dumps(rows))
    by_case = {row["case"]: row for row in rows}
    assert list(by_case) == ["original loop", "minitf loop", f"minitf train {family}"]
    assert all(row["ms_per_step"] > 0 and row["family"] == family for row in rows)
    assert by_case["original loop"]["ratio_to_reference"] == 1.0
    assert {row["reference"] for row in rows} == {"original loop"}
