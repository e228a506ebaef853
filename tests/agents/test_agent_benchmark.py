"""The built-in agent benchmark sklearn-data-agent: its gold answers (stated values from the datasets'
documentation), and a scripted ideal agent that runs each item's gold query through the real sql tool in the
sandbox, submits the answer and is scored right, on the path and traceable on all 12 items."""

import asyncio
import json

from uep_common.builtin.agent_data import database_script, load_sklearn_data_agent
from uep_common.builtin.catalog import BENCHMARKS
from uep_common.builtin.datasets import LICENSES
from uep_common.contract.configs import parse_benchmark_config
from uep_inference.agent.loop import StepReply, run_agent
from uep_scorer.scoring import apply_metric

BENCH = next(b for b in BENCHMARKS if b.slug == "sklearn-data-agent")
_AGENT = parse_benchmark_config(BENCH.config).prompt_spec.agent
assert _AGENT is not None
SPEC = _AGENT
ITEMS = load_sklearn_data_agent()


def test_gold_answers_match_the_documented_data():
    answers = {item.input["question"]: item.reference["answer"] for item in ITEMS}
    assert len(ITEMS) == 12
    # Fisher's iris: 150 flowers, sepal length sum 876.5 -> mean 5.8433; versicolor petal length mean 4.26
    assert answers["How many flowers are in the iris table?"] == "150"
    assert answers["What is the mean sepal length of all iris flowers, rounded to 2 decimals?"] == "5.84"
    assert answers["What is the mean petal length of the versicolor irises, rounded to 2 decimals?"] == "4.26"
    # UCI wine.names: class 1 has 59 instances (class_0 in scikit-learn)
    assert answers["How many wines of cultivar class_0 are in the wine table?"] == "59"
    assert answers["Which iris species has the largest mean petal length?"] == "virginica"
    assert all(item.reference["must_call"] == ["sql"] and item.reference["query"].startswith("SELECT") for item in ITEMS)
    assert BENCH.license_key in LICENSES
    assert SPEC.database == database_script() and SPEC.tools == ["sql", "python"]


def test_an_ideal_agent_scores_right_on_the_path_and_traceable():
    def ideal(query: str, answer: str):
        replies = iter([
            {"thought": "query the table", "tool": "sql", "arguments": {"query": query}},
            {"thought": "answer", "tool": "submit", "arguments": {"answer": answer}},
        ])  # fmt: skip

        async def ask(prompt, max_tokens, timeout_s, schema):
            return StepReply(json.dumps(next(replies)), None, 1.0, 100, 10)

        return ask

    async def all_items():
        return [
            await run_agent(i.input["question"], SPEC, ideal(i.reference["query"], i.reference["answer"]), 30.0) for i in ITEMS
        ]

    runs = asyncio.run(all_items())
    for item, run in zip(ITEMS, runs, strict=True):
        t = run.trajectory
        assert (t.stop_reason, [s.status for s in t.steps]) == ("submitted", ["ok", "ok"]), t.steps[0].result
        verdicts = [
            apply_metric(m, None, t.answer, item.reference, {}, t).is_correct
            for m in ("agent_answer", "agent_path", "agent_traceable")
        ]
        assert verdicts == [True, True, True], (item.input, t.steps[0].result)
