"""Each export format is one object (`hf_minitf.export.formats.NAME`): the command and the verification read their
tables from the objects, so what a format declares is what runs."""

import argparse
import importlib

import pytest

from hf_minitf.catalog.exports import EXPORTS
from hf_minitf.export.format import LAYOUTS, ExportFormat
from hf_minitf.export.formats import export_format, export_formats


def test_every_catalog_name_is_the_name_of_its_object():
    formats = export_formats()
    assert list(formats) == list(EXPORTS)
    assert all(isinstance(export, ExportFormat) and export.name == name for name, export in formats.items())


def test_an_unknown_format_is_refused_naming_the_formats():
    with pytest.raises(ValueError, match="no export format 'safetensors'; the formats are native, gguf, ollama"):
        export_format("safetensors")


def test_each_writer_and_runner_names_a_function_that_exists():
    runs = importlib.import_module("hf_minitf.verification.runs")
    for export in export_formats().values():
        module, _, function = export.writer.partition(":")
        assert callable(getattr(importlib.import_module(module), function)), export.writer
        for runner in export.runners:
            assert callable(getattr(runs, runner.loader)), runner


def test_the_verification_tables_are_read_from_the_objects():
    from hf_minitf.verification.runners import LAYOUTS as READERS_TRIED
    from hf_minitf.verification.runners import RUNNERS

    formats = export_formats()
    declared = {(runner.runtime, runner.kind): name for name, export in formats.items() for runner in export.runners}
    assert {key: runner.export_format for key, runner in RUNNERS.items()} == declared
    assert len(RUNNERS) == sum(len(export.runners) for export in formats.values())  # no pair declared twice
    assert RUNNERS["llama.cpp", "embedder"].exact is False  # gguf's declaration
    assert [reader.__name__ for reader in READERS_TRIED] == [
        name for name in LAYOUTS if any(export.layout == name for export in formats.values())
    ]


def test_the_command_calls_the_writer_the_object_names(monkeypatch, tmp_path):
    """`write` imports the named writer, passes it SRC, OUT and the object's arguments, and prints its report."""
    calls = []

    def fake_writer(source, out, **options):
        calls.append((source, out, options))
        return out / "written"

    native = importlib.import_module("hf_minitf.export.native")
    monkeypatch.setattr(native, "export_native", fake_writer)
    args = argparse.Namespace(source="owner/model", out=tmp_path, overwrite=True, revision="v1", license=None)
    line = export_format("native").write(args)
    assert calls == [("owner/model", tmp_path, {"overwrite": True, "revision": "v1", "license": None})]
    assert line == f"Exported owner/model to {tmp_path / 'written'} (native transformers architecture, no remote code)"


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("layout", "zip_file", "layout 'zip_file' is none of gguf_file"),
        ("writer", "os:system", "writer 'os:system' is no module:function of hf_minitf.export"),
        ("writer", "hf_minitf.export.native", "is no module:function"),
    ],
)
def test_a_format_naming_an_unknown_layout_or_a_writer_outside_the_exports_is_refused(field, value, message):
    fields = {"writer": "hf_minitf.export.native:export_native", "layout": "native_folder", field: value}
    with pytest.raises(ValueError, match=message):
        ExportFormat("toy", ("gpt",), "summary", "description", report=lambda args, out: "", **fields)
