"""Train MiniTF models with the ecosystem's trainers, one module per family (`gpt`, `encoder`, `seq2seq`, what they
share in `common`): transformers' `Trainer` (gpt), sentence-transformers'
`SentenceTransformerTrainer` (encoder, as a sentence-embedding model) and `Seq2SeqTrainer` (seq2seq).

So checkpoints, resuming, evaluation, logging integrations, mixed precision and multi-process runs
(`torchrun`, `accelerate launch`, FSDP or DeepSpeed through `TrainingArguments`) behave as those trainers'
users expect. Each `train_*` function builds a model from a preset (`presets`), trains it and writes one
complete folder (weights, tokenizer, model card with held-out figures, `loss_curve.png`) atomically: the output
folder is checked before training and appears only once everything succeeded. The held-out figures beside the
Trainer's `eval_loss` (a GPT's perplexity and bits per token, an encoder's retrieval figures, a translator's exact
match) are measured by `hf_minitf.evaluation.held_out`, the code `minitf eval` runs. In a multi-process run every
process trains and only the main one writes. `model_id` (default: the folder) is the name the card's usage
snippets load the model by. `training.data` reads the files `minitf train` takes.

A GPT's training text goes through the tokenizer in chunks (`training.data.text_chunks`) into a file of token
ids (uint16, or uint32 for vocabularies over 65,536) that the blocks are memory-mapped views of, so memory stays
bounded by a chunk, not the corpus. A run whose loss becomes NaN or infinite stops with a `TrainingError`.

Refused before the work: an output or checkpoint folder that cannot be written or whose disk is too small for the
weights, a `--resume` whose checkpoint was started with another corpus, tokenizer or config (`runs.RUN_RECORD`, written
into every checkpoint), and corpora nothing can be learned from (a GPT text of pad tokens only, encoder pairs no
batch can hold two of). A full disk is named: the output, `--checkpoint-dir` or the temporary folder.
"""

from hf_minitf.training.common import LOSS_CURVE, end_distributed_training, plot_loss_curve
from hf_minitf.training.encoder import train_encoder
from hf_minitf.training.gpt import train_gpt
from hf_minitf.training.seq2seq import train_seq2seq
from hf_minitf.training.settings import TrainingError, TrainingResult, TrainSettings

__all__ = [
    "LOSS_CURVE",
    "TrainSettings",
    "TrainingError",
    "TrainingResult",
    "end_distributed_training",
    "plot_loss_curve",
    "train_encoder",
    "train_gpt",
    "train_seq2seq",
]
