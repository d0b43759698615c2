"""The speed benchmark runs end to end in a tiny configuration, so it never rots (it measures nothing here)."""

import json

from helpers import load_benchmark


def test_tiny_benchmark_reports_every_comparison(tmp_path):
    benchmark = load_benchmark("speed")
    output = tmp_path / "speed.json"
    report = benchmark.main(
        ["--tiny", "--repeats", "1", "--no-compile", "--sections", "train", "decode", "encode", "--json", str(output)]
    )
    assert json.loads(output.read_text()) == json.loads(json.dumps(report))
    decode = {row["case"]: row for row in report["decode_batch_8"]}
    for case in (
        "minitf default (dynamic cache)",
        "gpt2 default (dynamic cache)",
        "minitf static cache",
        "gpt2 continuous batching",
        "minitf bf16 default",
        "minitf int8 default",
    ):
        assert decode[case]["median_s"] > 0, case
    assert decode["gpt2 default (dynamic cache)"]["speedup_vs_reference"] == 1.0
    # every MiniTF path generates what MiniTF's fp32 default generates here (tiny model, few tokens)
    assert decode["minitf static cache"]["greedy_agreement_with_fp32"] == 1.0
    assert decode["minitf continuous batching"]["greedy_agreement_with_fp32"] == 1.0
    assert decode["minitf default (dynamic cache)"]["physical_limit_ratio"] > 0
    assert set(report["perplexity"]) == {"fp32", "bf16", "int8"}
    assert {row["case"] for row in report["train"]} == {
        "train step minitf",
        "train step gpt2",
        "train step gpt2 without dropout",
    }
    encode = {row["case"]: row for row in report["encode"]}
    assert set(encode) == {
        "SentenceTransformer minitf",
        "SentenceTransformer bert",
        "SentenceTransformer minitf bf16",
        "SentenceTransformer bert bf16",
        "minitf padded to 32 (MiniEmbed's way)",
    }
    assert 0.9 < encode["SentenceTransformer minitf bf16"]["min_cosine_with_fp32"] <= 1.0 + 1e-6


def test_memory_case_measures_what_it_runs():
    benchmark = load_benchmark("speed")
    added_mib = benchmark.peak_memory("train step minitf", tiny=True)  # a fresh process, as the benchmark does
    assert 0 < added_mib < 1024
