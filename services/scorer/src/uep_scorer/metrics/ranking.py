"""Ranking / retrieval metrics: per query (:func:`query_metrics`, what the ``ndcg`` metric stores for each item) and
over a set of queries (:func:`ranking_metrics`): NDCG@k, MRR, recall@k, precision@k, hit rate@k, MAP@k.

Definitions, for one query with ranked list ``d_1, d_2, ...`` (duplicates dropped, first occurrence
kept), graded relevance ``rel(d) >= 0`` (``rel = 1`` for every id of a plain relevant set, 0 for an
id without a judgement) and relevant set ``R = {d : rel(d) > 0}``:

* ``DCG@k  = sum_{i=1..min(k, len)} rel(d_i) / log2(i + 1)`` (linear gain, log2 discount);
  ``IDCG@k`` = the same sum over all judged gains sorted in decreasing order (unretrieved relevant
  items included); ``NDCG@k = DCG@k / IDCG@k``. Source: Järvelin & Kekäläinen 2002, "Cumulated
  gain-based evaluation of IR techniques" (ACM TOIS 20(4)) for the normalisation by the ideal DCG; the
  discount ``1/log2(i + 1)`` at every rank is the now-standard form (Burges et al. 2005) that
  ``sklearn.metrics.ndcg_score`` also uses (Järvelin & Kekäläinen's original discounts only ranks
  ``i >= b``, by ``log_b(i)``). Checked against ``sklearn.metrics.ndcg_score`` in the tests.
* ``RR`` = ``1 / rank`` of the first relevant item in the whole ranked list (0 if none); ``RR@k`` the
  same within the top k. MRR = mean RR (Voorhees, TREC-8 QA track, 1999).
* ``recall@k = |R ∩ top-k| / |R|``; ``hit@k = 1`` if ``R ∩ top-k`` is non-empty, else 0.
* ``precision@k = |R ∩ top-k| / k`` (divided by k even when fewer than k items were ranked, as trec_eval's
  ``P_k``; NIST trec_eval, and Manning, Raghavan & Schütze 2008, *Introduction to Information Retrieval*,
  §8.4).
* ``AP@k = (1 / |R|) · sum_{i=1..k} precision@i · [d_i in R]``; MAP@k = mean AP@k. The normalisation by
  ``|R|`` (every relevant item, retrieved or not) is trec_eval's ``map_cut_k`` and the definition of
  average precision in Manning et al. 2008, §8.4 (some libraries divide by ``min(|R|, k)`` instead).

Each value is averaged over the *evaluable* queries. A query with no relevant item (``R`` empty) has
an undefined IDCG and recall: it is **excluded and counted** in ``excluded_queries``, never averaged in
as 0. With no evaluable query every average is ``None``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .base import MetricInputError, MetricResult, extraction_label

if TYPE_CHECKING:
    from uep_common.contract.events import Prediction


def _gains(relevant: Any) -> dict[Hashable, float]:
    if isinstance(relevant, Mapping):
        gains = {}
        for doc, gain in relevant.items():
            if isinstance(gain, bool) or not isinstance(gain, (int, float)) or not math.isfinite(gain) or gain < 0:
                raise ValueError(f"graded relevance must be finite numbers >= 0; got {gain!r} for {doc!r}")
            gains[doc] = float(gain)
        return gains
    if isinstance(relevant, (set, frozenset, list, tuple)):
        return dict.fromkeys(relevant, 1.0)
    raise ValueError(f"relevant items must be a set of ids or a dict id -> gain, got {type(relevant).__name__}")


def _dcg(gains: Sequence[float]) -> float:
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains))


def _query(ranked: Sequence[Hashable], relevant: Any, k: int) -> dict[str, float] | None:
    if isinstance(ranked, (str, bytes)) or not isinstance(ranked, Sequence):
        raise ValueError(f"ranked ids must be a list, got {type(ranked).__name__}")
    gains = _gains(relevant)
    positive = {doc for doc, g in gains.items() if g > 0}
    if not positive:
        return None
    ranked = list(dict.fromkeys(ranked))  # drop duplicates, keep first occurrence
    top = ranked[:k]
    ideal = sorted((g for g in gains.values() if g > 0), reverse=True)[:k]
    first = next((i for i, doc in enumerate(ranked, start=1) if doc in positive), None)
    found = sum(1 for doc in top if doc in positive)
    return {
        "ndcg_at_k": _dcg([gains.get(doc, 0.0) for doc in top]) / _dcg(ideal),
        "mrr": 0.0 if first is None else 1.0 / first,
        "mrr_at_k": 0.0 if first is None or first > k else 1.0 / first,
        "recall_at_k": found / len(positive),
        "precision_at_k": found / k,
        "hit_rate_at_k": 1.0 if found else 0.0,
        "ap_at_k": _average_precision(top, positive),
    }


def _average_precision(top: Sequence[Hashable], positive: set[Hashable]) -> float:
    """AP over the ranked ``top`` (already cut at k): sum of precision@i at each relevant rank, / |R|."""
    hits, total = 0, 0.0
    for i, doc in enumerate(top, start=1):
        if doc in positive:
            hits += 1
            total += hits / i
    return total / len(positive)


_KEYS = ("ndcg_at_k", "mrr", "mrr_at_k", "recall_at_k", "precision_at_k", "hit_rate_at_k", "ap_at_k")

CUTOFFS = (1, 3, 5, 10)
"""The cut-offs every query is measured at (besides the metric's own ``k``)."""


def query_metrics(
    ranked: Sequence[Hashable], relevant: set[Hashable] | Mapping[Hashable, float], k: int = 10
) -> dict[str, float] | None:
    """One query's values at every cut-off in :data:`CUTOFFS` and ``k`` (definitions in the module doc).

    Returns:
        ``{"rr", "ndcg@c", "recall@c", "precision@c", "hit@c", "ap@c" for each cut-off c}`` (floats in [0, 1];
        ``rr`` over the whole ranked list), or None when the query has no relevant item (excluded, never 0).

    Raises:
        ValueError: as :func:`ranking_metrics`.

    Example: ``query_metrics(["a", "b", "c"], {"b"}, k=3)["rr"]`` -> 0.5; ``["ap@3"]`` -> 0.5;
    ``["precision@3"]`` -> 1/3.
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an integer >= 1, got {k!r}")
    out: dict[str, float] = {}
    for cut in sorted({*CUTOFFS, k}):
        q = _query(ranked, relevant, cut)
        if q is None:
            return None
        out["rr"] = q["mrr"]
        out[f"ndcg@{cut}"] = q["ndcg_at_k"]
        out[f"recall@{cut}"] = q["recall_at_k"]
        out[f"precision@{cut}"] = q["precision_at_k"]
        out[f"hit@{cut}"] = q["hit_rate_at_k"]
        out[f"ap@{cut}"] = q["ap_at_k"]
    return out


def ranking_metrics(
    queries: Sequence[tuple[Sequence[Hashable], set[Hashable] | Mapping[Hashable, float]]], k: int
) -> dict[str, Any]:
    """Mean NDCG@k, MRR, MRR@k, recall@k, precision@k, hit rate@k and MAP@k over queries (definitions in the
    module doc).

    Args:
        queries: ``[(ranked_ids, relevant), ...]``; ``ranked_ids`` is the system's ranking, best first
            (a list of ids); ``relevant`` is a set of relevant ids (binary relevance, gain 1) or a dict
            ``id -> gain`` (graded relevance, gains >= 0; gain 0 = not relevant).
        k: the cut-off, an integer >= 1.

    Returns:
        ``{"k": k, "evaluated_queries": int, "excluded_queries": int, "ndcg_at_k", "mrr", "mrr_at_k",
        "recall_at_k", "precision_at_k", "hit_rate_at_k", "ap_at_k" (its mean is MAP@k): float | None,
        "per_query": [dict | None, ...]}``; the means are over evaluated queries (``None`` when there are
        none); ``per_query[i]`` holds query ``i``'s seven values, or ``None`` for an excluded query (no
        relevant item).

    Raises:
        ValueError: ``k`` not an integer >= 1, a query that is not a ``(ranked_ids, relevant)`` pair,
            or a negative / non-finite gain.

    Example: ``ranking_metrics([(["a", "b"], {"b"}), (["c"], set())], k=1)`` -> ``mrr`` 0.5,
    ``hit_rate_at_k`` 0.0, ``excluded_queries`` 1.
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an integer >= 1, got {k!r}")
    per_query: list[dict[str, float] | None] = []
    for i, query in enumerate(queries):
        try:
            ranked, relevant = query
        except (TypeError, ValueError):
            raise ValueError(f"query {i} must be a (ranked_ids, relevant) pair") from None
        per_query.append(_query(ranked, relevant, k))
    evaluated = [q for q in per_query if q is not None]
    means = {key: (sum(q[key] for q in evaluated) / len(evaluated) if evaluated else None) for key in _KEYS}
    return {
        "k": k,
        "evaluated_queries": len(evaluated),
        "excluded_queries": len(per_query) - len(evaluated),
        **means,
        "per_query": per_query,
    }


RANKING_REFERENCE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "relevant": {"type": "array", "items": {"type": "string", "minLength": 1}},
        "relevance": {"type": "object", "additionalProperties": {"type": "number", "minimum": 0}},
    },
    "anyOf": [{"required": ["relevant"]}, {"required": ["relevance"]}],
}
"""The reference of ``ndcg``: ``{"relevant": [candidate ids]}`` (binary) or ``{"relevance": {id: gain >= 0}}``."""

EXCLUDED = "excluded_no_relevant"
"""``details["status"]`` of a query without a relevant item: no score, counted as excluded in the summary."""


def ranking_of_text(output: str) -> list[str]:
    """Candidate ids an LLM listed, best first: the output split at commas, semicolons and whitespace, each
    piece stripped of quotes, brackets and a trailing period; empty pieces dropped.

    Example: ``ranking_of_text("d3, d1\\nd2.")`` -> ``["d3", "d1", "d2"]``.
    """
    pieces = (p.strip("\"'`()[]{}<>*").rstrip(".") for p in re.split(r"[\s,;]+", output or ""))
    return [p for p in pieces if p]


class Ndcg:
    """``ndcg``: one ranking query, scored by NDCG@k (``score``) and hit@1 (``is_correct``).

    The ranking is a ranker's ``prediction.ranking`` (candidate ids, best first), or for an LLM the ids its
    text lists (:func:`ranking_of_text`). Reference: :data:`RANKING_REFERENCE`. Params: ``k`` (default 10).
    Every value of :func:`query_metrics` (``rr``, and ``ndcg@c``, ``recall@c``, ``precision@c``, ``hit@c``,
    ``ap@c`` for c in 1, 3, 5, 10 and k) is stored as a per-item metric (``details["submetrics"]``); the
    evaluation summary averages them over the queries with bootstrap intervals (``uep_common.analytics.set_metrics``).
    A query without a relevant item has no score (``is_correct`` and ``score`` None, ``details["status"]`` =
    :data:`EXCLUDED`): it is excluded and counted, never averaged in as 0. An empty ranking is a decided 0
    (``extraction`` ``no_answer``).

    Raises:
        MetricInputError: no ``relevant`` / ``relevance`` in the reference, a negative or non-numeric gain, or
            ``k`` not an integer >= 1.
    """

    name = "ndcg"
    version = "1"
    params = {"k": "the cut-off of the score NDCG@k, an integer >= 1 (default 10)"}
    param_types = {"k": "integer"}
    required_params: tuple[str, ...] = ()
    reference_schema: dict[str, Any] = RANKING_REFERENCE
    source = (
        "NDCG (Järvelin & Kekäläinen 2002; log2 discount, Burges et al. 2005, as sklearn.metrics.ndcg_score), "
        "MRR (Voorhees 1999), P@k and MAP@k (trec_eval; Manning et al. 2008, §8.4)"
    )

    def score(self, output: str, reference: dict[str, Any], params: dict[str, Any]) -> MetricResult:
        """Score an LLM's listed ranking; see the class docstring."""
        return self.score_prediction(None, output, reference, params)

    def score_prediction(
        self, prediction: Prediction | None, output: str, reference: dict[str, Any], params: dict[str, Any]
    ) -> MetricResult:
        """Score a ranker's ``prediction.ranking`` (None: the ids ``output`` lists); see the class docstring."""
        k = params.get("k", 10)
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise MetricInputError(f"ndcg parameter 'k' must be an integer >= 1, got {k!r}")
        if "relevance" in reference:
            relevant: Any = reference["relevance"]
            if not isinstance(relevant, Mapping):
                raise MetricInputError("ndcg reference 'relevance' must be an object {candidate id: gain}")
        elif "relevant" in reference:
            relevant = reference["relevant"]
            if not isinstance(relevant, list):
                raise MetricInputError("ndcg reference 'relevant' must be a list of candidate ids")
            relevant = [str(x) for x in relevant]
        else:
            raise MetricInputError("ndcg reference needs 'relevant' (a list of ids) or 'relevance' ({id: gain})")
        if prediction is not None and prediction.ranking is not None:
            ranking = [str(x) for x in prediction.ranking]
        else:
            ranking = ranking_of_text(output)
        try:
            values = query_metrics(ranking, relevant, k)
        except ValueError as exc:
            raise MetricInputError(f"ndcg reference: {exc}") from exc
        structured = {"ranking": ranking} if ranking else None
        top = ranking[0] if ranking else None
        if values is None:
            details: dict[str, Any] = {"status": EXCLUDED, "extraction": extraction_label(bool(ranking))}
            return MetricResult(self.name, self.version, None, None, top, details, structured)
        details = {"submetrics": values, "k": k, "extraction": extraction_label(bool(ranking))}
        return MetricResult(self.name, self.version, values["hit@1"] == 1.0, values[f"ndcg@{k}"], top, details, structured)
