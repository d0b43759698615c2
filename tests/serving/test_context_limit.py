"""One context limit for a GPT, whatever asks: `minitf generate` and `minitf serve` read
`catalog.exports.context_limit`, and a translator's is its position table."""

from types import SimpleNamespace

import pytest
from factories import tiny_config

from hf_minitf.catalog.exports import context_limit
from hf_minitf.serving.models import ServedModel


@pytest.mark.parametrize(
    ("config", "limit"),
    [
        (tiny_config("gpt", max_position_embeddings=48), 48),
        (tiny_config("gpt", max_position_embeddings=48, context_overflow="crop"), None),
        (tiny_config("gpt", max_position_embeddings=48, position_embedding_type="rope"), None),
        (SimpleNamespace(model_type="gpt2", max_position_embeddings=1024), 1024),  # a native export's config
        (SimpleNamespace(model_type="gpt_neox", max_position_embeddings=2048), None),
    ],
    ids=["learned", "learned-crop", "rope", "native-gpt2", "native-gpt-neox"],
)
def test_a_gpt_has_one_context_limit(config, limit):
    assert context_limit(config) == limit
    assert ServedModel(name="m", family="gpt", model=None, tokenizer=None, config=config).context_limit == limit


def test_a_translator_is_limited_by_its_position_table():
    config = tiny_config("seq2seq", max_position_embeddings=40)
    assert ServedModel(name="m", family="seq2seq", model=None, tokenizer=None, config=config).context_limit == 40
