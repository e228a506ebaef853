"""Hostile templates on the real stack: a judge template that tries to run a shell command is refused at
evaluation creation (422 naming ``judge.template_text``); one that hides the escape behind a condition only
the real answer meets passes the trial render and is refused by the judge service's sandbox when the item is
judged (the item is invalid with ``judge_template_error``). In both cases the command never runs: the marker
file it would write does not exist. Arm and benchmark prompt templates with an escape are refused too."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from integration.helpers import all_results, submit, wait_done
from integration.test_judge import upload

PAYLOAD = "{{ cycler.__init__.__globals__.os.popen('id > MARKER').read() }}"


def _marker() -> Path:
    return Path("/tmp") / f"uep-hostile-template-{uuid.uuid4().hex}"


def test_judge_template_escape_refused_at_creation(gateway):
    marker = _marker()
    slug = f"hostile-judge-{uuid.uuid4().hex[:8]}"
    r = upload(gateway, slug, ["[[say:Paris. JUDGE:SCORE=8]]"], "llm_judge", {"mode": "rubric", "judges": ["uep-judge"]})
    assert r.status_code == 201, r.text
    r = gateway.post(
        "/v1/evaluations",
        json={
            "benchmark": slug,
            "model": "uep-judge",
            "judge": {"template_text": "Grade " + PAYLOAD.replace("MARKER", str(marker)) + " {{ answer }}"},
        },
    )
    assert r.status_code == 422, r.text
    problem = r.json()["detail"][0]
    assert problem["loc"][-1] == "template_text" and problem["type"] == "bad_template"
    assert "unsafe" in problem["msg"]
    # the same template in a benchmark upload's judge block
    r = upload(
        gateway,
        slug + "-b",
        ["x"],
        "llm_judge",
        {"mode": "rubric", "judges": ["uep-judge"], "template_text": PAYLOAD.replace("MARKER", str(marker))},
    )
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == ["body", "spec", "judge", "template_text"]
    assert not marker.exists()


def test_judge_template_escape_behind_a_condition_is_refused_by_the_judge(gateway):
    marker = _marker()
    slug = f"hostile-judge-cond-{uuid.uuid4().hex[:8]}"
    template = (
        "{% if 'ESCAPE' in answer %}" + PAYLOAD.replace("MARKER", str(marker)) + "{% endif %}"
        "Grade the answer {{ answer }} to {{ question }} as {{ schema }}"
    )
    r = upload(
        gateway,
        slug,
        ["[[say:ESCAPE]]", "[[say:Paris. JUDGE:SCORE=8]]"],
        "llm_judge",
        {"mode": "rubric", "judges": ["uep-judge"], "template_text": template},
    )
    assert r.status_code == 201, r.text  # the trial render (answer 'A') does not reach the escape
    evaluation_id = submit(gateway, benchmark=slug, model="uep-judge")
    final = wait_done(gateway, evaluation_id, timeout_s=90)
    assert final["status"] in ("completed", "failed"), final
    items = all_results(gateway, evaluation_id)
    escaped = next(x for x in items if x["output"] == "ESCAPE")
    assert escaped["score"] is None and escaped["error"]["type"] == "judge_template_error"
    assert "unsafe" in escaped["error"]["message"]
    assert not marker.exists()


def test_arm_and_prompt_template_escapes_refused(gateway):
    marker = _marker()
    payload = PAYLOAD.replace("MARKER", str(marker))
    r = gateway.post(
        "/v1/evaluations",
        json={
            "benchmark": "gsm8k",
            "model": "uep-oracle",
            "sample_limit": 1,
            "arms": [{"name": "base"}, {"name": "evil", "prompt_template": "{{ question }} " + payload}],
        },
    )
    # the arm's template compiles; the trial render on the first sample at creation meets the escape
    assert r.status_code == 422, r.text
    problem = r.json()["detail"][0]
    assert problem["loc"] == ["body", "arms", 1, "prompt_template"] and "unsafe" in problem["msg"], problem
    slug = f"hostile-prompt-{uuid.uuid4().hex[:8]}"
    spec = {"slug": slug, "name": slug, "prompt": {"template": payload}, "metric": {"name": "exact_match", "params": {}}}
    r = gateway.post(
        "/v1/benchmarks",
        data={"spec": json.dumps(spec)},
        files={"file": ("rows.jsonl", json.dumps({"question": "q", "answer": "a"}).encode())},
    )
    assert r.status_code == 422, r.text
    assert not marker.exists()


def test_deeply_nested_templates_are_a_422_naming_the_field(gateway):
    nested = "{{ " + "(" * 2000 + "answer" + ")" * 2000 + " }}"
    slug = f"hostile-nested-{uuid.uuid4().hex[:8]}"
    r = upload(gateway, slug, ["[[say:Paris. JUDGE:SCORE=8]]"], "llm_judge", {"mode": "rubric", "judges": ["uep-judge"]})
    assert r.status_code == 201, r.text
    r = gateway.post("/v1/evaluations", json={"benchmark": slug, "model": "uep-judge", "judge": {"template_text": nested}})
    assert r.status_code == 422, r.text
    problem = r.json()["detail"][0]
    assert problem["loc"] == ["body", "judge", "template_text"] and problem["type"] == "bad_template", problem
    assert "nested too deeply" in problem["msg"]
    r = upload(gateway, slug + "-b", ["x"], "llm_judge", {"mode": "rubric", "judges": ["uep-judge"], "template_text": nested})
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == ["body", "spec", "judge", "template_text"]
    arms = [{"name": "base"}, {"name": "deep", "prompt_template": nested.replace("answer", "question")}]
    r = gateway.post("/v1/evaluations", json={"benchmark": "gsm8k", "model": "uep-oracle", "sample_limit": 1, "arms": arms})
    assert r.status_code == 422, r.text
    problem = r.json()["detail"][0]
    assert problem["loc"] == ["body", "arms", 1, "prompt_template"] and problem["type"] == "bad_template", problem
    assert "nested too deeply" in problem["msg"]
