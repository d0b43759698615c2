"""Leftovers of killed runs: removed, or restored and reported."""

import os
import subprocess
import sys

import pytest
from bad_inputs import (
    write,
)

from hf_minitf.safety.output_folders import OutputFolderError, atomic_output_dir


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_leftovers_of_killed_runs_are_removed_or_restored_and_reported(tmp_path, caplog):
    out = tmp_path / "out"
    stale = tmp_path / f".out.converting-{_dead_pid()}-0123abcd"
    legacy = tmp_path / ".out.converting-89abcdef"  # named before the PID was part of the name
    running = tmp_path / f".out.converting-{os.getpid()}-fedcba98"
    other = tmp_path / f".elsewhere.converting-{_dead_pid()}-0123abcd"
    for folder in (stale, legacy, running, other):
        write(folder / "model.safetensors", "partial")
    previous = tmp_path / f".out.old-{_dead_pid()}-11112222"  # killed between moving `out` away and moving in the new
    write(previous / "config.json", "{}")
    with caplog.at_level("WARNING", logger="hf_minitf.safety.output_folders"):
        with pytest.raises(OutputFolderError, match="not empty"):
            with atomic_output_dir(out):
                pass
    assert (out / "config.json").read_text() == "{}", "the interrupted run's previous folder was not restored"
    assert not stale.exists() and not legacy.exists() and not previous.exists()
    assert running.exists(), "a folder a live process is writing was removed"
    assert other.exists(), "a leftover of another output folder was removed"
    reported = caplog.text
    assert f"restored {out}" in reported and stale.name in reported and legacy.name in reported


def test_a_killed_file_writers_partial_file_is_removed_by_the_next_export(tmp_path, caplog):
    """`minitf export gguf` writes `.NAME.writing-PID-XXXXXXXX` beside its output, then renames it: a run killed in
    between left it for good (7 MB for a small model) before the next export of the same output removed it."""
    from factories import model_folder

    from hf_minitf.export.gguf import export_gguf

    out = tmp_path / "model.gguf"
    stale = tmp_path / f".model.gguf.writing-{_dead_pid()}-0123abcd"
    running = tmp_path / f".model.gguf.writing-{os.getpid()}-fedcba98"
    other = tmp_path / f".other.gguf.writing-{_dead_pid()}-0123abcd"
    for partial in (stale, running, other):
        partial.write_bytes(b"GGUF partial")
    with caplog.at_level("WARNING", logger="hf_minitf.safety.output_folders"):
        export_gguf(model_folder("gpt", "learned"), out)
    assert out.read_bytes()[:4] == b"GGUF"
    assert not stale.exists() and stale.name in caplog.text
    assert running.exists(), "the file a live process is writing was removed"
    assert other.exists(), "a leftover of another output was removed"
