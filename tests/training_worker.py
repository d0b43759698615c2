"""Run by test_training_distributed.py under `torchrun --nproc_per_node 2`: train a tiny GPT for a few steps
through hf_minitf.training.trainers (transformers' Trainer) and write what this process ended with."""

import hashlib
import json
import os
import sys
from pathlib import Path

import torch

from hf_minitf.training.trainers import TrainSettings, end_distributed_training, train_gpt

out = Path(sys.argv[1])
rank = int(os.environ.get("RANK", "0"))
text = "".join(f"{number} is {'even' if number % 2 == 0 else 'odd'}.\n" for number in range(200))
result = train_gpt(
    text,
    out / "model",
    settings=TrainSettings(max_steps=8, batch_size=4, learning_rate=3e-3, logging_steps=1, progress=False),
    block_size=32,
    eval_fraction=0.0,
    config_overrides=dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, max_position_embeddings=32),
)
world_size = torch.distributed.get_world_size() if torch.distributed.is_initialized() else 1
end_distributed_training()
weights = b"".join(
    tensor.detach().cpu().contiguous().numpy().tobytes() for _, tensor in sorted(result.model.state_dict().items())
)
(out / f"rank{rank}.json").write_text(
    json.dumps(
        {
            "world_size": world_size,
            "losses": [loss for _, loss in result.losses],
            "weights_sha256": hashlib.sha256(weights).hexdigest(),
            "wrote_folder": result.folder is not None,
        }
    )
)
