"""Judging with the deterministic judge models of deploy/model-server (their real code, called in-process
here; tests/integration/test_judge.py calls them through Triton): retries with the parse error fed back,
invalid verdicts kept with their raw text, pairwise in both orders, juries, and the diagnostics."""

import uuid

from uep_common.contract.events import Backend, ModelTarget
from uep_common.contract.judge_config import JudgeConfig
from uep_gateway.judge_diagnostics import VerdictRow, diagnostics, spearman
from uep_judge.aggregate import pairwise_outcome, rubric_outcome
from uep_judge.client import JudgeGeneration
from uep_judge.modes import compare, grade
from uep_judge.store import Context, verdict_rows
from uep_judge.templates import template_for
from uep_model_server.judge_stub import DeterministicJudge

JUDGES = {"uep-judge": DeterministicJudge("consistent"), "uep-judge-first": DeterministicJudge("first")}
TARGETS = {n: ModelTarget(model_id=uuid.uuid4(), name=n, backend=Backend.triton, endpoint="grpc://x") for n in JUDGES}


class Recorder:
    """``generate`` backed by the deterministic judges; keeps every prompt it was sent."""

    def __init__(self):
        self.prompts: list[str] = []

    async def __call__(self, target, prompt, max_tokens, json_schema=None):
        self.prompts.append(prompt)
        text = JUDGES[target.name].answer(prompt)
        return JudgeGeneration(text, len(prompt.split()), len(text.split()), 1.0)


def cfg(**kw) -> JudgeConfig:
    return JudgeConfig(**({"judges": ["uep-judge"]} | kw))


async def _grade(answer: str, c: JudgeConfig, reference=None):
    gen = Recorder()
    verdicts = await grade(gen, c, template_for(c), [TARGETS[j] for j in c.judges], "Question?", answer, reference)
    return verdicts, rubric_outcome(c, verdicts), gen


async def test_valid_rubric_answer():
    verdicts, out, _ = await _grade("Paris. JUDGE:SCORE=8", cfg())
    assert out.valid and out.metrics["judge_overall"] == 8 and out.metrics["judge_accuracy"] == 8
    assert out.score == 0.8 and out.is_correct is True  # (8 - 0) / (10 - 0); 8 >= midpoint 5
    assert verdicts[0].attempts[0].error is None and len(verdicts[0].attempts) == 1


async def test_fenced_and_chatty_answers_are_recovered():
    for marker in ("JUDGE:FENCED", "JUDGE:CHATTY"):
        verdicts, out, _ = await _grade(f"Paris. JUDGE:SCORE=8 {marker}", cfg())
        assert out.valid and out.metrics["judge_overall"] == 8 and out.metrics["judge_parse_failures"] == 0
    assert verdicts[0].raw_text.startswith("Here is my verdict:")


async def test_worked_case_prose_is_retried_then_recorded_invalid_with_raw_text():
    verdicts, out, gen = await _grade("Paris. JUDGE:PROSE", cfg(max_retries=2))
    v = verdicts[0]
    assert len(v.attempts) == 3 and not v.valid  # 1 ask + 2 re-asks (max_retries=2)
    assert [a.raw for a in v.attempts] == ["I would rate it highly."] * 3
    assert all("Your previous reply could not be used: no JSON object found" in p for p in gen.prompts[1:])
    assert "Your previous reply was:\nI would rate it highly." in gen.prompts[1]
    assert (out.valid, out.score, out.is_correct) == (False, None, None)
    assert out.error_type == "judge_unparsed_output" and "raw: 'I would rate it highly.'" in out.error_message
    assert out.metrics["judge_invalid"] == 1 and out.metrics["judge_parse_failures"] == 3
    assert out.metrics["judge_raw"] == "I would rate it highly."


async def test_garbage_once_recovers_on_retry():
    verdicts, out, _ = await _grade("JUDGE:SCORE=6 JUDGE:GARBAGE_ONCE", cfg())
    assert out.valid and out.metrics["judge_overall"] == 6
    assert [a.error is None for a in verdicts[0].attempts] == [False, True] and verdicts[0].parse_failures == 1


async def test_out_of_scale_is_invalid_never_clamped():
    verdicts, out, _ = await _grade("JUDGE:SCORE=8 JUDGE:OUT_OF_SCALE", cfg(max_retries=1))
    assert not out.valid and out.score is None
    assert verdicts[0].error == '"overall" 14 is outside the scale [0, 10]'  # stub answers max + 4


async def test_reference_guided():
    c = cfg(mode="reference")
    _, right, _ = await _grade("Let me compute.\n#### 18", c, reference="18")
    _, wrong, _ = await _grade("Let me compute.\n#### 19", c, reference="18")
    assert (right.metrics["judge_overall"], right.is_correct) == (9, True)  # stub: same last number -> 9
    assert (wrong.metrics["judge_overall"], wrong.is_correct) == (2, False)  # else 2


async def test_jury_disagreement_is_low_confidence():
    # consistent judge: 8; harsh "first" judge: 8 - 5 = 3 (judge_stub rules)
    _, mean, _ = await _grade("JUDGE:SCORE=8", cfg(judges=["uep-judge", "uep-judge-first"]))
    assert mean.metrics["judge_overall"] == 5.5 and mean.metrics["judge_spread"] == 5  # (8 + 3) / 2; 8 - 3
    assert mean.is_correct is True and mean.human_reason == "jury_disagreement"  # 5.5 >= 5; spread 5 > 3
    _, maj, _ = await _grade("JUDGE:SCORE=8", cfg(judges=["uep-judge", "uep-judge-first"], aggregate="majority"))
    assert maj.is_correct is None and maj.human_reason == "jury_disagreement"  # 1 pass vs 1 fail: no majority
    _, agree, _ = await _grade("JUDGE:SCORE=10", cfg(judges=["uep-judge", "uep-judge-first"], disagreement_threshold=6))
    assert agree.human_reason is None and agree.metrics["judge_low_confidence"] == 0  # 10 vs 5: spread 5 <= 6


async def _compare(candidate: str, baseline: str, c: JudgeConfig):
    comps = await compare(Recorder(), c, template_for(c), [TARGETS[j] for j in c.judges], "Q?", candidate, baseline, None)
    return comps, pairwise_outcome(c, comps)


async def test_consistent_pairwise():
    c = cfg(mode="pairwise")
    comps, win = await _compare("JUDGE:SCORE=9", "JUDGE:SCORE=4", c)
    assert (comps[0].ab.pairwise.winner, comps[0].ba.pairwise.winner) == ("A", "B")
    assert (win.is_correct, win.score, win.metrics["pairwise_inconsistent"], win.human_reason) == (True, 1.0, 0, None)
    _, loss = await _compare("JUDGE:SCORE=2", "JUDGE:SCORE=4", c)
    assert (loss.is_correct, loss.score) == (False, 0.0)


def _rows(comparisons_per_item, c):
    """judge_verdicts rows as the judge service writes them, for the diagnostics."""
    rows = []
    candidate = uuid.uuid4()
    for comps in comparisons_per_item:
        ctx = Context(None, "llm_judge", c, [], None, "b", uuid.uuid4())

        class Ev:  # the JudgeRequested fields verdict_rows reads
            evaluation_id, sample_id, repeat, arm = uuid.uuid4(), uuid.uuid4(), 0, "main"
            benchmark_id, model_id, output = uuid.uuid4(), candidate, "x"

        verdicts = [v for comp in comps for v in (comp.ab, comp.ba)]
        rows += [VerdictRow.from_record(r) for r in verdict_rows(Ev, ctx, ("pairwise", "v1"), verdicts)]
    return rows


async def test_worked_case_always_first_judge_is_inconsistent_on_every_comparison():
    c = cfg(mode="pairwise", judges=["uep-judge-first"])
    pairs = [("JUDGE:SCORE=9", "JUDGE:SCORE=1"), ("JUDGE:SCORE=1", "JUDGE:SCORE=9"), ("same", "same"), ("a b c", "a")]
    results = [await _compare(a, b, c) for a, b in pairs]
    for comps, out in results:
        assert comps[0].inconsistent and comps[0].outcome == "tie"
        assert (out.is_correct, out.score, out.metrics["pairwise_outcome"]) == (None, 0.5, "tie")
        assert out.human_reason == "swap_inconsistent"
    (d,) = diagnostics(_rows([comps for comps, _ in results], c))
    # 4 comparisons, each answered "A" in both orders -> 4 of 4 disagree for the candidate: rate 1.0
    assert (d["pairwise_comparisons"], d["position_swap_inconsistent"], d["position_swap_inconsistency_rate"]) == (4, 4, 1.0)
    assert d["first_position_rate"] == 1.0 and d["parse_failure_rate"] == 0.0
    consistent = [await _compare(a, b, cfg(mode="pairwise")) for a, b in pairs]
    (d2,) = diagnostics(_rows([comps for comps, _ in consistent], cfg(mode="pairwise")))
    assert d2["position_swap_inconsistency_rate"] == 0.0


def test_spearman_against_hand_computed_values():
    # identical ranks -> rho 1; reversed -> -1 (Spearman 1904: rho = 1 - 6 sum d^2 / (n (n^2 - 1)))
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40])["rho"] == 1.0
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1])["rho"] == -1.0
    # ranks x = 1,2,3,4,5, y = 2,1,4,3,5: sum d^2 = 1+1+1+1+0 = 4 -> 1 - 24 / 120 = 0.8
    assert abs(spearman([1, 2, 3, 4, 5], [2, 1, 4, 3, 5])["rho"] - 0.8) < 1e-12
    assert spearman([1, 2], [1, 2])["rho"] is None and spearman([1, 2, 3], [5, 5, 5])["rho"] is None


async def test_length_bias_and_self_preference_diagnostics():
    # Without a marker or reference the stub scores min(10, 2 + words // 3): longer answers score higher
    c = cfg()
    judge_id = TARGETS["uep-judge"].model_id
    rows = []
    for i, n_words in enumerate((3, 6, 9, 12, 15)):
        verdicts, _, _ = await _grade(" ".join(["word"] * n_words), c)

        class Ev:
            evaluation_id, sample_id, repeat, arm = uuid.uuid4(), uuid.uuid4(), 0, "main"
            benchmark_id, output = uuid.uuid4(), " ".join(["word"] * n_words)
            model_id = judge_id if i % 2 == 0 else uuid.uuid4()  # the judge grades its own answers 0, 2, 4

        rows += [
            VerdictRow.from_record(r)
            for r in verdict_rows(Ev, Context(None, "llm_judge", c, [], None, None, None), ("rubric", "v1"), verdicts)
        ]
    (d,) = diagnostics(rows)
    assert abs(d["length_correlation"]["rho"] - 1.0) < 1e-12 and d["length_correlation"]["n"] == 5  # scores 3, 4, 5, 6, 7
    sp = d["self_preference"]["rubric"]
    # own answers (3, 9, 15 words) scored 3, 5, 7 -> mean 5; others (6, 12 words) 4, 6 -> mean 5; delta 0
    assert (sp["own_mean"], sp["others_mean"], sp["delta"], sp["n_own"], sp["n_others"]) == (5, 5, 0, 3, 2)
