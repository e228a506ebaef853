"""Ranking / retrieval metrics over a set of queries: NDCG@k, MRR, recall@k, hit rate@k.

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

Each value is averaged over the *evaluable* queries. A query with no relevant item (``R`` empty) has
an undefined IDCG and recall: it is **excluded and counted** in ``excluded_queries``, never averaged in
as 0. With no evaluable query every average is ``None``.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Any


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
        "hit_rate_at_k": 1.0 if found else 0.0,
    }


_KEYS = ("ndcg_at_k", "mrr", "mrr_at_k", "recall_at_k", "hit_rate_at_k")


def ranking_metrics(
    queries: Sequence[tuple[Sequence[Hashable], set[Hashable] | Mapping[Hashable, float]]], k: int
) -> dict[str, Any]:
    """Mean NDCG@k, MRR, MRR@k, recall@k and hit rate@k over queries (definitions in the module doc).

    Args:
        queries: ``[(ranked_ids, relevant), ...]``; ``ranked_ids`` is the system's ranking, best first
            (a list of ids); ``relevant`` is a set of relevant ids (binary relevance, gain 1) or a dict
            ``id -> gain`` (graded relevance, gains >= 0; gain 0 = not relevant).
        k: the cut-off, an integer >= 1.

    Returns:
        ``{"k": k, "evaluated_queries": int, "excluded_queries": int, "ndcg_at_k", "mrr", "mrr_at_k",
        "recall_at_k", "hit_rate_at_k": float | None, "per_query": [dict | None, ...]}``; the means are
        over evaluated queries (``None`` when there are none); ``per_query[i]`` holds query ``i``'s five
        values, or ``None`` for an excluded query (no relevant item).

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
