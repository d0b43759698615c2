"""`minitf eval`'s figures equal an independent computation: a GPT's perplexity equals transformers' perplexity guide
run verbatim on the native export (no overlap) and a hand-written per-token loop (overlapping windows); an encoder's
retrieval figures equal sentence-transformers' InformationRetrievalEvaluator called as its docs show; a translator's
BLEU, chrF and exact match equal sacrebleu called on translations generated one sentence at a time. The engine exports
(CTranslate2, ONNX) give the MiniTF folder's figures, each in its own process."""

import json
import math

import pytest
import sacrebleu
import torch
from factories import (
    ENGINE_TEXT,
    PAIRS,
    ctranslate2_export,
    model_folder,
    onnx_export,
    onnx_gpt_export,
    onnx_translator_export,
)
from helpers import run_cli, run_minitf
from sentence_transformers import SentenceTransformer
from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

from hf_minitf.export import export_native

try:  # sentence-transformers 6 moved it; 5.x has only the old path
    from sentence_transformers.sentence_transformer.evaluation import InformationRetrievalEvaluator
except ImportError:
    from sentence_transformers.evaluation import InformationRetrievalEvaluator

TEXT = ENGINE_TEXT * 3 + "the lazy dog saves a stitch.\n" * 4
RETRIEVAL_PAIRS = [
    ("the quick brown fox", "a quick fox that is brown"),
    ("a lazy dog sleeps in the sun", "the dog is lazy and sleeps"),
    ("time saves nine", "a stitch in time saves nine"),
    ("dog", "the lazy dog"),
    ("the sun", "sun in the sky"),
]


def evaluate(capsys, folder, data, *options) -> dict:
    status, out, err = run_cli(["eval", folder, "--data", data, "--json", "--no-progress", *options], capsys)
    assert status == 0, err
    return json.loads(out)


def evaluate_in_process_of_its_own(folder, data, *options) -> dict:
    result = run_minitf("eval", str(folder), "--data", str(data), "--json", "--no-progress", "--no-card", *options)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def guide_perplexity(model, input_ids: torch.Tensor, stride: int) -> float:
    """https://huggingface.co/docs/transformers/perplexity, as written there."""
    max_length = model.config.n_positions
    seq_len = input_ids.size(1)
    nll_sum, n_tokens, prev_end_loc = 0.0, 0, 0
    for begin_loc in range(0, seq_len, stride):
        end_loc = min(begin_loc + max_length, seq_len)
        trg_len = end_loc - prev_end_loc
        window = input_ids[:, begin_loc:end_loc]
        target_ids = window.clone()
        target_ids[:, :-trg_len] = -100
        with torch.no_grad():
            neg_log_likelihood = model(window, labels=target_ids).loss
        num_loss_tokens = (target_ids != -100).sum().item() - target_ids.size(0)
        nll_sum += neg_log_likelihood * num_loss_tokens
        n_tokens += num_loss_tokens
        prev_end_loc = end_loc
        if end_loc == seq_len:
            break
    return torch.exp(nll_sum / n_tokens).item()


def per_token_perplexity(model, ids: list[int], window: int, stride: int) -> tuple[float, int]:
    """Every token after the first scored once, by the window that first reaches it (the guide's windows), in a
    plain loop over positions."""
    scored, total, covered = 0, 0.0, 1
    for begin in range(0, len(ids), stride):
        end = min(begin + window, len(ids))
        with torch.no_grad():
            log_probs = torch.log_softmax(model(torch.tensor([ids[begin:end]])).logits[0].double(), dim=-1)
        for position in range(max(covered, begin + 1), end):
            total -= log_probs[position - begin - 1, ids[position]].item()
            scored += 1
        covered = end
        if end == len(ids):
            break
    return math.exp(total / scored), scored


@pytest.fixture(scope="module")
def gpt(tmp_path_factory):
    root = tmp_path_factory.mktemp("gpt")
    (root / "text.txt").write_text(TEXT)
    return model_folder("gpt", "learned"), export_native(model_folder("gpt", "learned"), root / "native"), root


def test_gpt_perplexity_is_the_perplexity_guides_on_the_native_export(gpt, capsys):
    source, native, root = gpt
    model = AutoModelForCausalLM.from_pretrained(native).eval()
    assert type(model).__name__ == "GPT2LMHeadModel"
    ids = AutoTokenizer.from_pretrained(native)(TEXT, add_special_tokens=False, return_tensors="pt").input_ids
    context = model.config.n_positions
    assert ids.size(1) > 3 * context  # several windows

    no_overlap = evaluate(capsys, source, root / "text.txt", "--stride", str(context), "--no-card")
    assert no_overlap["window"] == context and no_overlap["stride"] == context
    expected = guide_perplexity(model, ids, context)
    assert no_overlap["figures"]["perplexity"] == pytest.approx(expected, rel=1e-5)

    overlapping = evaluate(capsys, native, root / "text.txt", "--no-card")  # the native export itself, default stride
    expected, scored = per_token_perplexity(model, ids[0].tolist(), context, context // 2)
    assert overlapping["stride"] == context // 2 and overlapping["tokens"] == scored == ids.size(1) - 1
    assert overlapping["figures"]["perplexity"] == pytest.approx(expected, rel=1e-9)
    bits = math.log2(expected)
    assert overlapping["figures"]["bits_per_token"] == pytest.approx(bits, rel=1e-9)
    # a character tokenizer: a token is a character
    assert overlapping["figures"]["bits_per_character"] == pytest.approx(bits, rel=1e-9)
    assert evaluate(capsys, source, root / "text.txt", "--no-card")["figures"] == pytest.approx(
        overlapping["figures"], rel=1e-5
    )


def test_gpt_engine_exports_give_the_minitf_folders_figures(gpt, capsys):
    source, _, root = gpt
    expected = evaluate(capsys, source, root / "text.txt", "--no-card")["figures"]
    for export, measured_by in (
        (ctranslate2_export("gpt", "learned"), "CTranslate2 Generator.score_batch"),
        (onnx_gpt_export("learned"), "ONNX Runtime logits"),
    ):
        report = evaluate_in_process_of_its_own(export, root / "text.txt")
        assert report["measured_by"].startswith(measured_by)
        assert report["figures"] == pytest.approx(expected, rel=1e-4), measured_by


def test_encoder_figures_are_sentence_transformers_evaluators(tmp_path, capsys):
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps({"anchor": query, "positive": text}) + "\n" for query, text in RETRIEVAL_PAIRS))
    folder = model_folder("encoder", "miniembed")
    report = evaluate(capsys, folder, data, "--no-card")

    evaluator = InformationRetrievalEvaluator(
        queries={str(index): query for index, (query, _) in enumerate(RETRIEVAL_PAIRS)},
        corpus={str(index): text for index, (_, text) in enumerate(RETRIEVAL_PAIRS)},
        relevant_docs={str(index): {str(index)} for index in range(len(RETRIEVAL_PAIRS))},
        accuracy_at_k=[1],
        precision_recall_at_k=[1, 5, 10],
        mrr_at_k=[10],
        ndcg_at_k=[10],
        write_csv=False,
    )
    scores = evaluator(SentenceTransformer(str(folder)))
    expected = {name: scores[f"cosine_{name}"] for name in report["figures"]}
    assert report["figures"] == pytest.approx(expected, rel=1e-6)
    assert 0 < report["figures"]["mrr@10"] <= 1 and report["pairs"] == len(RETRIEVAL_PAIRS)

    onnx = evaluate_in_process_of_its_own(onnx_export(()), data)
    assert onnx["measured_by"] == "ONNX Runtime embeddings"
    assert onnx["figures"] == pytest.approx(report["figures"], rel=1e-5)
    ct2 = evaluate_in_process_of_its_own(ctranslate2_export("encoder", "miniembed"), data)
    assert ct2["measured_by"] == "CTranslate2 embeddings"
    assert ct2["figures"] == pytest.approx(report["figures"], rel=1e-5)


def test_translator_figures_are_sacrebleus_on_greedy_translations(tmp_path, capsys):
    data = tmp_path / "pairs.tsv"
    data.write_text("".join(f"{source}\t{target}\n" for source, target in PAIRS))
    folder = model_folder("seq2seq", "layer_norm")
    report = evaluate(capsys, folder, data, "--no-card")

    model, tokenizer = AutoModelForSeq2SeqLM.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)
    translations = []
    for source, _ in PAIRS:  # one sentence at a time: no padding
        with torch.no_grad():
            output = model.generate(**tokenizer(source, return_tensors="pt"), do_sample=False, num_beams=1)
        translations.append(tokenizer.decode(output[0], skip_special_tokens=True))
    references = [target for _, target in PAIRS]
    assert report["figures"] == pytest.approx(
        {
            "bleu": sacrebleu.corpus_bleu(translations, [references]).score,
            "chrf": sacrebleu.corpus_chrf(translations, [references]).score,
            "exact_match": sum(a == b for a, b in zip(translations, references)) / len(PAIRS),
        },
        rel=1e-9,
    )
    assert report["figures"]["chrf"] > 0  # the random model's words share some characters with the references

    exact = tmp_path / "exact.tsv"  # the model's own translations as references: exact match 1, BLEU 100
    exact.write_text("".join(f"{source}\t{target}\n" for (source, _), target in zip(PAIRS, translations) if target))
    figures = evaluate(capsys, folder, exact, "--no-card")["figures"]
    assert figures["exact_match"] == 1.0 and figures["chrf"] == pytest.approx(100.0)

    engine = evaluate_in_process_of_its_own(ctranslate2_export("seq2seq", "layer_norm"), data)
    assert engine["measured_by"] == "CTranslate2 translations (greedy)" and engine["figures"] == report["figures"]
    onnx = evaluate_in_process_of_its_own(onnx_translator_export(), data)
    assert onnx["measured_by"] == "ONNX Runtime translations (greedy)" and onnx["figures"] == report["figures"]
