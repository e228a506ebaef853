"""Failed items are never silent: an evaluation whose headline leaves out errored or excluded items says so
beside the headline (uep_common.analytics.summary.headline_of → the API's ``headline.note``, shown by the list,
the evaluation page, the report header and the CLI). The counts are the summary's: 40 items, 7 errors, 33
scored (the run of a ranker that timed out on 7 of 40 queries)."""

from __future__ import annotations

import numpy as np

from uep_cli.main import _status_text
from uep_common.analytics.set_metrics import ranking_set_metrics
from uep_common.analytics.summary import excluded_note
from uep_common.contract.events import EvaluationSummary, SetMetrics

from .test_one_interval import headline

BASE = {"n": 40, "scored": 33, "correct": 20, "errors": 7, "accuracy": 20 / 33, "ci_low": 0.44, "ci_high": 0.75}
BASE |= {"latency_ms_p50": 1.0, "latency_ms_p90": 2.0, "prompt_tokens": 0, "completion_tokens": 0}


def test_a_ranker_with_7_errored_queries_says_so_beside_its_ndcg():
    values = {"ndcg@10": np.linspace(0.2, 0.9, 33), "hit@1": np.ones(33)}
    sm = SetMetrics.model_validate({**ranking_set_metrics(values, 0, n_resamples=200), "excluded": 7, "primary": "ndcg@10"})
    summary = EvaluationSummary.model_validate(BASE | {"metric_name": "ndcg", "set_metrics": sm}).model_dump(mode="json")
    hl = headline(summary)
    assert (hl.metric, hl.n, hl.errors, hl.excluded) == ("ndcg@10", 33, 7, 7)
    assert hl.note == "7 errors, excluded from the headline"
    view = {"status": "completed", "headline": hl.model_dump(mode="json")}
    assert _status_text(view) == "completed · 7 errors, excluded from the headline"


def test_an_llm_s_accuracy_names_its_errors_and_a_clean_run_names_nothing():
    hl = headline(EvaluationSummary.model_validate(BASE | {"metric_name": "exact_match"}).model_dump(mode="json"))
    assert (hl.metric, hl.n, hl.note) == ("accuracy", 33, "7 errors, excluded from the headline")
    clean = BASE | {"scored": 40, "errors": 0, "metric_name": "exact_match"}
    assert headline(clean).note is None
    assert _status_text({"status": "completed", "headline": headline(clean).model_dump(mode="json")}) == "completed"


def test_items_left_out_for_other_reasons_are_counted_apart_from_errors():
    assert excluded_note(1, 1) == "1 error, excluded from the headline"
    assert excluded_note(7, 10, "without a relevant item") == (
        "7 errors and 3 items without a relevant item, excluded from the headline"
    )
    assert excluded_note(0, 2) == "2 items without a verdict, excluded from the headline"
    assert excluded_note(0, 0) is None
