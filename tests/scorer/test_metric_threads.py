"""Where the scorer runs a metric: the cheap, linear ones on the event loop (a worker-thread round trip costs
more than they do), everything else — user regexes, sandboxed programs, long outputs — in a worker thread."""

import threading

from uep_scorer.metrics import get_metric
from uep_scorer.scoring import ON_LOOP_MAX_CHARS, ON_LOOP_METRICS, run_metric


async def _thread_of(monkeypatch, name: str, output: str) -> tuple[str, object]:
    seen: list[str] = []
    metric = get_metric(name)
    original = type(metric).score

    def spy(self, out, reference, params):
        seen.append(threading.current_thread().name)
        return original(self, out, reference, params)

    monkeypatch.setattr(type(metric), "score", spy)
    result = await run_metric(name, None, output, {"answer": "Paris"}, {"pattern": "Paris"} if name == "regex_match" else {})
    return seen[0], result.is_correct


async def test_exact_match_runs_on_the_loop_and_a_user_regex_in_a_worker_thread(monkeypatch):
    loop_thread = threading.current_thread().name
    assert await _thread_of(monkeypatch, "exact_match", "Paris") == (loop_thread, True)
    where, correct = await _thread_of(monkeypatch, "regex_match", "Paris")
    assert where != loop_thread and correct is True


async def test_a_long_output_goes_to_a_worker_thread_even_for_an_on_loop_metric(monkeypatch):
    loop_thread = threading.current_thread().name
    where, correct = await _thread_of(monkeypatch, "exact_match", "x" * (ON_LOOP_MAX_CHARS + 1))
    assert where != loop_thread and correct is False


def test_the_on_loop_metrics_are_registered_and_run_no_program():
    for name in ON_LOOP_METRICS:
        assert get_metric(name).name == name
    assert not {"regex_match", "humaneval_pass_at_1", "pass_at_k", "rouge", "sentence_bleu"} & ON_LOOP_METRICS
