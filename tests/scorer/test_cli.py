"""``uep-scorer score`` / ``uep-scorer metrics``: offline scoring through the real console script."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

UEP_SCORER = str(Path(sys.executable).parent / "uep-scorer")


def run(args: list[str], stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([UEP_SCORER, *args], input=stdin, capture_output=True, text=True, timeout=60)


def test_metrics_lists_each_metric_with_version_params_and_source():
    r = run(["metrics", "--json"])
    assert r.returncode == 0, r.stderr
    rows = {m["name"]: m for m in json.loads(r.stdout)}
    assert rows["gsm8k_numeric_exact_match"]["version"] == "2"
    assert "variant" in rows["gsm8k_numeric_exact_match"]["params"]
    assert all(m["source"] for m in rows.values())


def test_score_gsm8k_lines_and_summary(tmp_path):
    f = tmp_path / "in.jsonl"
    f.write_text(
        "\n".join(
            json.dumps(x)
            for x in [
                {"id": "a", "prediction": "The total is 72, in all, so the farm earns that much.", "reference": 72},
                {"id": "b", "prediction": "I think 5", "reference": "-5"},
                {"id": "c", "prediction": "no number here", "reference": "3"},
            ]
        )
    )
    r = run(["score", "--metric", "gsm8k_numeric_exact_match", "--summary", str(f)])
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert [(x["id"], x["extracted"], x["correct"]) for x in lines[:3]] == [
        ("a", "72", True),
        ("b", "5", False),
        ("c", None, False),
    ]
    assert lines[3]["summary"] == {
        "metric": "gsm8k_numeric_exact_match",
        "version": "2",
        "n": 3,
        "decided": 3,
        "correct": 1,
        "accuracy": pytest.approx(1 / 3),
        "mean_score": pytest.approx(1 / 3),
        "errors": 0,
        "extraction_failure_rate": pytest.approx(1 / 3),
    }


def test_params_and_metric_fields_reach_the_metric():
    line = json.dumps({"prediction": "Answer: E", "reference": "E"})
    r = run(["score", "-m", "multiple_choice_letter", "-p", "choices=ABCDE", "-"], stdin=line)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["correct"] is True


def test_bad_lines_name_the_line_and_field_and_exit_2():
    r = run(
        ["score", "-m", "gsm8k_numeric_exact_match", "-"],
        stdin='{"prediction": "1", "reference": "1"}\n{oops\n{"reference": "2"}\n',
    )
    assert r.returncode == 2
    out = [json.loads(x) for x in r.stdout.splitlines()]
    assert out[0]["correct"] is True
    assert out[1] == {"line": 2, "error": out[1]["error"]} and out[1]["error"].startswith("line 2: invalid JSON")
    assert out[2]["error"] == "line 3: field 'prediction' is missing"


def test_unknown_metric_is_refused_naming_the_option():
    r = run(["score", "-m", "nope", "-"], stdin="")
    assert r.returncode == 2 and "--metric" in r.stderr and "unknown metric 'nope'" in r.stderr


def test_summary_reports_corpus_bleu_apart_from_mean_sentence_bleu():
    import sacrebleu

    hyps = ["the cat sat on the mat", "a dog barked loudly at night"]
    refs = ["the cat sat on a mat", "the dog barked at night"]
    lines = "\n".join(json.dumps({"prediction": h, "reference": r}) for h, r in zip(hyps, refs, strict=True))
    r = run(["score", "-m", "sentence_bleu", "--summary", "-"], stdin=lines)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout.splitlines()[-1])["summary"]
    expected = sacrebleu.corpus_bleu(hyps, [refs]).score  # the reference implementation, same tokenizer (13a)
    assert summary["corpus"]["corpus_bleu"] == pytest.approx(expected, abs=1e-9)
    assert summary["corpus"]["signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")
    assert summary["mean_score"] != pytest.approx(expected)


def test_unknown_param_is_refused_naming_it():
    r = run(["score", "-m", "exact_match", "-p", "ignore_cas=true", "-"], stdin='{"prediction": "a", "reference": "A"}')
    assert r.returncode == 2 and "ignore_cas" in r.stderr and "ignore_case" in r.stderr
