"""score_output reads the benchmark's parsed config (uep_common.contract.configs.BenchmarkConfig): its metric and
params, hybrid routing without a metric, and a config that does not parse (no server: a stand-in store)."""

import asyncio
import uuid

from uep_common.contract.configs import parse_benchmark_config
from uep_common.contract.events import JudgeRequested, OutputGenerated, ScoreComputed
from uep_scorer.scoring import score_output


class _Refs:
    """What score_output asks of a ReferenceStore: the benchmark's (config, evaluation_type) and a reference."""

    def __init__(self, config: dict, evaluation_type: str = "automatic", reference: dict | None = None) -> None:
        self.config, self.evaluation_type, self.ref = config, evaluation_type, reference or {}

    async def benchmark(self, benchmark_id: uuid.UUID):
        return parse_benchmark_config(self.config), self.evaluation_type

    async def reference(self, sample_id: uuid.UUID, benchmark_id: uuid.UUID | None = None) -> dict:
        return self.ref


def _output(text: str | None = "Paris") -> OutputGenerated:
    return OutputGenerated(
        evaluation_id=uuid.uuid4(),
        tenant_id=uuid.uuid4(),
        sample_id=uuid.uuid4(),
        benchmark_id=uuid.uuid4(),
        model_id=uuid.uuid4(),
        prompt="Capital of France?",
        output=text,
    )


def test_the_metric_and_its_params_come_from_the_config():
    refs = _Refs({"metric": {"name": "exact_match", "params": {}}}, reference={"answer": "Paris"})
    out = asyncio.run(score_output(_output("Paris"), refs))
    assert isinstance(out, ScoreComputed) and out.metric_name == "exact_match" and out.is_correct is True and out.error is None


def test_a_hybrid_benchmark_without_a_metric_goes_to_the_judge():
    out = asyncio.run(score_output(_output(), _Refs({"prompt": {"template": "{{ q }}"}}, "hybrid")))
    assert isinstance(out, JudgeRequested) and out.route_reason == "free_form"


def test_a_config_that_does_not_parse_is_a_benchmark_config_error():
    out = asyncio.run(score_output(_output(), _Refs({"metric": {"name": "exact_match", "params": "strict"}})))
    assert isinstance(out, ScoreComputed) and out.is_correct is None and out.metric_name == "unknown"
    assert out.error.stage == "scoring" and out.error.type == "benchmark_config_error"
    assert "metric.params" in out.error.message
