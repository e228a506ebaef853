"""Each registered metric is tied to its parameter model of uep_common.contract.metric_params: the scorer reads
its parameters through it, the catalogue rows publish its JSON Schema, and a mismatch fails registration."""

from typing import Any

import pytest
from pydantic import Field
from sacrebleu.metrics.bleu import BLEU

from uep_common.contract.metric_params import MetricParams, metric_params, params_model, registered_params
from uep_common.contract.metric_params import registry as metric_params_registry
from uep_common.contract.metric_params.text import BLEU_TOKENIZERS
from uep_scorer.catalog import catalogue_rows
from uep_scorer.metrics import MetricInputError, available_metrics, get_metric, register_metric
from uep_scorer.metrics.registry import REGISTRY


def test_every_metric_has_its_registered_model():
    assert sorted(registered_params()) == available_metrics()
    assert {n: get_metric(n).params_model for n in available_metrics()} == registered_params()


def test_catalogue_publishes_each_models_json_schema():
    rows = {r["name"]: r for r in catalogue_rows()}
    assert sorted(rows) == available_metrics()
    for name, row in rows.items():
        assert row["params_schema"] == params_model(name).model_json_schema()
        assert set(row) == {"name", "version", "source", "params_schema", "reference_schema"}
    assert rows["ndcg"]["params_schema"]["properties"]["k"]["default"] == 10
    assert rows["regex_match"]["params_schema"]["required"] == ["pattern"]


def test_bleu_tokenizers_are_sacrebleus():
    assert tuple(BLEU.TOKENIZERS) == BLEU_TOKENIZERS


@pytest.mark.parametrize(
    ("metric", "output", "reference", "params", "expected"),
    [
        # rapidfuzz ratio("kitten", "sitten") = 100 * (1 - 2/12) = 83.3 (Indel distance 2 over 12 characters):
        # wrong at the default threshold 90, right at 70
        ("fuzzy_match", "kitten", {"answer": "sitten"}, {"threshold": 70}, True),
        ("fuzzy_match", "kitten", {"answer": "sitten"}, {}, False),
        ("gsm8k_numeric_exact_match", "so 7. #### 8", {"answer": "8"}, {"variant": "strict-match"}, True),
        ("gsm8k_numeric_exact_match", "so 7. #### 8 then 9", {"answer": "8"}, {}, False),
        ("multiple_choice_letter", "The answer is (E).", {"answer": "E"}, {"choices": ["a", "b", "c", "d", "e"]}, True),
        ("exact_match", " Paris ", {"answer": "paris"}, {"ignore_case": True}, True),
        ("exact_match", " Paris ", {"answer": "paris"}, {"ignore_case": None}, False),
    ],
)
def test_dict_and_model_give_one_result(
    metric: str, output: str, reference: dict[str, Any], params: dict[str, Any], expected: bool
):
    m = get_metric(metric)
    from_dict = m.score(output, reference, params)
    from_model = m.score(output, reference, m.params_model.model_validate(params))
    assert from_dict == from_model and from_dict.is_correct is expected


def test_a_bad_param_is_a_metric_input_error_naming_it():
    with pytest.raises(MetricInputError, match=r"param 'threshold': Input should be less than or equal to 100"):
        get_metric("fuzzy_match").score("a", {"answer": "a"}, {"threshold": 101})
    with pytest.raises(MetricInputError, match=r"param 'colour': Extra inputs are not permitted; the metric takes k"):
        get_metric("ndcg").score("d1", {"relevant": ["d1"]}, {"colour": 1})


def test_register_metric_refuses_a_model_that_is_not_the_registered_one(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(metric_params_registry, "_MODELS", registered_params())  # a copy, put back afterwards

    @metric_params("test_only_metric")
    class TestOnlyParams(MetricParams):
        k: int = Field(1, ge=1, description="k")

    class Other(MetricParams):
        pass

    class TestOnly:
        name = "test_only_metric"
        version = "1"
        source = "test"
        reference_schema: dict[str, Any] = {}
        params_model = Other

        def score(self, output: str, reference: dict[str, Any], params: Any) -> Any:
            return None

    with pytest.raises(ValueError, match="names Other; its registered model is TestOnlyParams"):
        register_metric(TestOnly)
    TestOnly.name = "no_model_metric"
    with pytest.raises(ValueError, match="has no parameter model"):
        register_metric(TestOnly)
    with pytest.raises(ValueError, match="registered twice"):
        register_metric(type(get_metric("ndcg")))
    assert "test_only_metric" not in REGISTRY and "no_model_metric" not in REGISTRY


def test_reused_validations_keep_the_types_apart():
    """read_params validates each distinct parameter set once; 1, 1.0 and True hash alike, yet only the
    integer is a valid k, and a list is validated item by item whatever was validated before."""
    from uep_common.contract.metric_params.answers import LabelMatchParams, PassAtKParams
    from uep_scorer.metrics.base import read_params

    assert read_params(PassAtKParams, {"k": 1}).k == 1
    for bad in (True, 1.0):
        with pytest.raises(MetricInputError, match="param 'k': Input should be a valid integer"):
            read_params(PassAtKParams, {"k": bad})
    first = read_params(LabelMatchParams, {"labels": ["a", "b"]})
    assert first is read_params(LabelMatchParams, {"labels": ["a", "b"]}) and first.labels == ["a", "b"]
    with pytest.raises(MetricInputError, match="param 'labels.1': Input should be a valid string"):
        read_params(LabelMatchParams, {"labels": ["a", 1]})
    with pytest.raises(MetricInputError, match="param 'labels': Input should be a valid list"):
        read_params(LabelMatchParams, {"labels": ("a", "b")})
