"""Notes `minitf generate` prints."""

from bad_inputs import (
    char_gpt_folder,
)

from hf_minitf.cli import main as minitf_main


def test_generate_says_when_a_rotary_model_reads_past_its_trained_positions(tmp_path, capsys):
    """Rotary positions have no table to run out of, so generation goes on, with a note (learned positions refuse)."""
    folder = char_gpt_folder(tmp_path, position_embedding_type="rope")
    assert minitf_main(["generate", str(folder), "abc " * 3, "--max-new-tokens", "8"]) == 0
    assert (
        "note: the prompt (12 tokens) and 8 new tokens pass the 16 positions this model was trained on; its "
        "rotary positions go on past them" in capsys.readouterr().err
    )
