"""Custom benchmarks through the gateway: upload (JSONL, CSV, Parquet), versioning by content hash,
row errors naming line and field, preview, and a run through the whole pipeline."""

import io
import json
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sqlalchemy import text

from uep_common.contract.metric_params import registered_params

from .helpers import all_results, submit, wait_done


def spec(slug: str, metric: str = "exact_match", params: dict | None = None, template: str = "{{ question }}") -> str:
    return json.dumps(
        {
            "slug": slug,
            "name": f"Custom {slug}",
            "category": "custom",
            "capability_dimensions": ["test"],
            "prompt": {"template": template, "max_tokens": 32},
            "metric": {"name": metric, "params": params or {}},
        }
    )


def upload(gateway, slug_spec: str, content: bytes, filename: str):
    return gateway.post("/v1/benchmarks", data={"spec": slug_spec}, files={"file": (filename, content)})


def _count(db) -> int:
    with db.connect() as c:
        return c.execute(text("SELECT count(*) FROM benchmarks")).scalar()


def test_custom_jsonl_runs_through_the_pipeline(gateway):
    """The oracle answers unknown prompts "I do not know." (deploy/model-server/README.md), so with exact
    match against these references the verdicts are [True, True, False]."""
    slug = f"custom-{uuid.uuid4().hex[:8]}"
    rows = [
        {"id": "r1", "input": {"question": "Who wrote the unwritten book?"}, "reference": "I do not know."},
        {"id": "r2", "input": {"question": "What colour is a zorblat?"}, "reference": {"answer": "I do not know."}},
        {"id": "r3", "input": {"question": "Is this a trick?"}, "reference": "yes"},
    ]
    r = upload(gateway, spec(slug), "\n".join(json.dumps(x) for x in rows).encode(), "data.jsonl")
    assert r.status_code == 201, r.text
    bench = r.json()
    assert (bench["slug"], bench["sample_count"], bench["is_builtin"], bench["metric"]) == (slug, 3, False, "exact_match")
    again = upload(gateway, spec(slug), "\n".join(json.dumps(x) for x in rows).encode(), "data.jsonl")
    assert again.status_code == 200 and again.json()["id"] == bench["id"] and again.json()["version"] == bench["version"]

    preview = gateway.get(f"/v1/benchmarks/{slug}/samples", params={"limit": 2}).json()
    assert [(p["external_id"], p["prompt"]) for p in preview] == [
        ("r1", "Who wrote the unwritten book?"),
        ("r2", "What colour is a zorblat?"),
    ]

    evaluation_id = submit(gateway, benchmark=slug, model="uep-oracle")
    final = wait_done(gateway, evaluation_id)
    assert final["status"] == "completed" and final["summary"]["correct"] == 2 and final["summary"]["n"] == 3
    assert [x["is_correct"] for x in all_results(gateway, evaluation_id)] == [True, True, False]


def test_embedded_llm_on_a_custom_question(gateway):
    """SmolLM2-135M-Instruct answers "The capital of France is Paris." to this prompt (greedy; checked in
    tests/model_server), so `contains` with ignore_case marks it correct."""
    slug = f"capitals-{uuid.uuid4().hex[:8]}"
    content = b"question,answer\nWhat is the capital of France? Answer in one word.,paris\n"
    r = upload(gateway, spec(slug, "contains", {"ignore_case": True}), content, "capitals.csv")
    assert r.status_code == 201, r.text
    evaluation_id = submit(gateway, benchmark=slug, model="smollm2-135m-instruct")
    final = wait_done(gateway, evaluation_id, timeout_s=120)
    assert final["status"] == "completed"
    (item,) = all_results(gateway, evaluation_id)
    assert "Paris" in item["output"] and item["is_correct"] is True


def test_parquet_upload_and_new_version_on_changed_content(gateway):
    slug = f"pq-{uuid.uuid4().hex[:8]}"
    versions = []
    for answers in (["x", "y"], ["x", "z"]):
        buf = io.BytesIO()
        pq.write_table(pa.table({"question": ["a?", "b?"], "answer": answers}), buf)
        r = upload(gateway, spec(slug), buf.getvalue(), "rows.parquet")
        assert r.status_code == 201, r.text
        versions.append(r.json()["version"])
    assert versions[0] != versions[1]
    assert len({b["version"] for b in gateway.get("/v1/benchmarks").json() if b["slug"] == slug}) == 2


def test_bad_uploads_name_the_field_and_store_nothing(gateway, db):
    before = _count(db)
    slug = f"bad-{uuid.uuid4().hex[:8]}"
    good_row = b'{"question": "q", "answer": "a"}\n'
    cases = [
        (spec(slug), good_row + b'{"question": "q2"}\n', "d.jsonl", 422, ["body", "file", "line 2", "reference"]),
        (spec(slug), b'{"prompt": "q", "answer": "a"}\n', "d.jsonl", 422, ["body", "file", "line 1"]),
        (spec(slug, "no_such_metric"), good_row, "d.jsonl", 422, ["body", "spec", "metric", "name"]),
        (spec(slug, "exact_match", {"colour": 1}), good_row, "d.jsonl", 422, ["body", "spec", "metric", "params", "colour"]),
        (
            spec(slug, "exact_match", {"ignore_case": "maybe"}),
            good_row,
            "d.jsonl",
            422,
            ["body", "spec", "metric", "params", "ignore_case"],
        ),
        (spec(slug, "regex_match"), good_row, "d.jsonl", 422, ["body", "spec", "metric", "params", "pattern"]),
        (
            spec(slug, "fuzzy_match", {"threshold": 101}),
            good_row,
            "d.jsonl",
            422,
            ["body", "spec", "metric", "params", "threshold"],
        ),
        (
            spec(slug, "exact_match", {"regexes_to_ignore": ["("]}),
            good_row,
            "d.jsonl",
            422,
            ["body", "spec", "metric", "params", "regexes_to_ignore", "0"],
        ),
        (spec("gsm8k"), good_row, "d.jsonl", 409, ["body", "spec", "slug"]),
        (spec("Bad Slug!"), good_row, "d.jsonl", 422, ["body", "spec", "slug"]),
        ("{not json", good_row, "d.jsonl", 422, ["body", "spec"]),
        (spec(slug), good_row, "d.xlsx", 422, ["body", "format"]),
    ]
    for s, content, name, status, loc in cases:
        r = upload(gateway, s, content, name)
        assert r.status_code == status, (loc, r.text)
        detail = r.json()["detail"]
        assert any(d["loc"][: len(loc)] == loc and d["msg"] for d in detail), (loc, detail)
    assert _count(db) == before
    r = gateway.get("/v1/benchmarks/no-such-benchmark/samples")
    assert r.status_code == 404 and r.json()["detail"][0]["loc"] == ["path", "ref"]


def test_metric_catalogue_is_listed(gateway):
    metrics = {m["name"]: m for m in gateway.get("/v1/metrics").json()}
    assert sorted(metrics) == sorted(registered_params())
    for name, model in registered_params().items():  # what the scorer registered is each model's own schema
        assert metrics[name]["params_schema"] == model.model_json_schema(), name
    assert metrics["regex_match"]["params_schema"]["required"] == ["pattern"]
    ignore_case = metrics["exact_match"]["params_schema"]["properties"]["ignore_case"]
    assert (ignore_case["type"], ignore_case["default"]) == ("boolean", False)
    assert metrics["exact_match"]["params_schema"]["additionalProperties"] is False and metrics["exact_match"]["source"]


def test_a_bad_parameter_is_a_422_naming_the_field_and_pydantics_reason(gateway, db):
    before = _count(db)
    r = upload(
        gateway,
        spec(f"bad-{uuid.uuid4().hex[:8]}", "fuzzy_match", {"threshold": 101, "colour": 1}),
        b'{"question": "q", "answer": "a"}\n',
        "d.jsonl",
    )
    assert r.status_code == 422, r.text
    assert r.json()["detail"] == [
        {
            "loc": ["body", "spec", "metric", "params", "threshold"],
            "msg": "fuzzy_match parameter 'threshold': Input should be less than or equal to 100",
            "type": "bad_param",
        },
        {
            "loc": ["body", "spec", "metric", "params", "colour"],
            "msg": "fuzzy_match parameter 'colour': Extra inputs are not permitted; the metric takes ignore_articles, "
            "ignore_case, ignore_punctuation, ignore_whitespace, min_reference_length, partial, regexes_to_ignore, "
            "squad, threshold",
            "type": "unknown_param",
        },
    ]
    assert _count(db) == before


def test_chat_template_option_sends_raw_text_to_the_llm(gateway):
    """With chat_template=false the prompt goes to SmolLM2 as raw text and is continued: greedy decoding of
    "The capital of France is" gives " Paris." first (checked by hand on the embedded model); with the chat
    template (the default) the same text is treated as a user message instead."""
    slug = f"raw-{uuid.uuid4().hex[:8]}"
    r = upload(
        gateway,
        spec(slug, "contains", {"ignore_case": True}, template="{{ text }}"),
        b'{"text": "The capital of France is", "answer": "paris"}\n',
        "raw.jsonl",
    )
    assert r.status_code == 201, r.text
    raw = submit(gateway, benchmark=slug, model="smollm2-135m-instruct", chat_template=False)
    chat = submit(gateway, benchmark=slug, model="smollm2-135m-instruct")
    assert wait_done(gateway, raw, timeout_s=120)["status"] == "completed"
    assert wait_done(gateway, chat, timeout_s=120)["status"] == "completed"
    (raw_item,), (chat_item,) = all_results(gateway, raw), all_results(gateway, chat)
    assert raw_item["output"].startswith(" Paris.") and raw_item["is_correct"] is True
    assert raw_item["prompt_tokens"] == 5  # the bare text, no chat-template tokens around it
    assert chat_item["prompt_tokens"] > 20


def test_graded_metric_runs_through_the_pipeline(gateway):
    """Sentence BLEU has no true/false verdict: the evaluation completes (not "failed") with accuracy None,
    and each item's BLEU equals sacrebleu's on the oracle's answer "I do not know." (its fixed reply to
    unknown prompts), with the sacrebleu signature stored."""
    import sacrebleu

    slug = f"bleu-{uuid.uuid4().hex[:8]}"
    refs = ["I do not know.", "I really do not know that."]
    content = "\n".join(json.dumps({"question": f"Unknown question {i}?", "answer": r}) for i, r in enumerate(refs)).encode()
    assert upload(gateway, spec(slug, "sentence_bleu"), content, "g.jsonl").status_code == 201
    evaluation_id = submit(gateway, benchmark=slug, model="uep-oracle")
    final = wait_done(gateway, evaluation_id)
    assert final["status"] == "completed"
    s = final["summary"]
    assert (s["n"], s["scored"], s["errors"], s["accuracy"]) == (2, 0, 0, None)
    # the metric's defaults are sacrebleu.sentence_bleu's (effective order on)
    expected = [sacrebleu.sentence_bleu("I do not know.", [r]).score for r in refs]
    assert expected[0] == pytest.approx(100.0)
    results = all_results(gateway, evaluation_id)
    assert [r["score"] for r in results] == [pytest.approx(e, abs=1e-9) for e in expected]
    assert s["metric_means"]["sentence_bleu"] == pytest.approx(sum(expected) / 2, abs=1e-9)
    assert results[0]["metrics"]["signature"].startswith("nrefs:1|case:mixed|eff:yes|tok:13a")


# --------------------------------------------------------------------------- ownership and visibility


@pytest.fixture(scope="module")
def other_tenant(stack):
    """An httpx client authenticated as the builder of a second tenant (``bench-b-…``)."""
    import httpx

    from uep_common.admin import create_api_key, create_tenant

    slug = f"bench-b-{uuid.uuid4().hex[:6]}"
    create_tenant(stack.database_url, slug)
    key = create_api_key(stack.database_url, slug, "builder", "custom benchmark tests")
    with httpx.Client(base_url=stack.gateway_url, timeout=30, headers={"Authorization": f"Bearer {key}"}) as client:
        yield client


ROWS = b'{"question": "Who wrote the unwritten book?", "answer": "I do not know."}\n{"question": "q2", "answer": "a2"}\n'


def _listed(client, slug: str) -> list[dict]:
    r = client.get("/v1/benchmarks")
    assert r.status_code == 200, r.text
    return [b for b in r.json() if b["slug"] == slug]


def test_a_private_benchmark_is_invisible_to_another_tenant(gateway, other_tenant):
    slug = f"priv-{uuid.uuid4().hex[:8]}"
    r = upload(gateway, spec(slug), ROWS, "d.jsonl")
    assert r.status_code == 201, r.text
    assert (r.json()["visibility"], r.json()["owned"]) == ("private", True)
    assert [(b["id"], b["visibility"], b["owned"]) for b in _listed(gateway, slug)] == [(r.json()["id"], "private", True)]

    assert _listed(other_tenant, slug) == []
    for ref in (slug, r.json()["id"]):
        p = other_tenant.get(f"/v1/benchmarks/{ref}/samples")
        assert p.status_code == 404 and p.json()["detail"][0]["loc"] == ["path", "ref"], p.text
    ev = other_tenant.post("/v1/evaluations", json={"benchmark": slug, "model": "uep-oracle"})
    assert ev.status_code in (404, 422) and ev.json()["detail"][0]["loc"] == ["body", "benchmark"], ev.text
    cost = other_tenant.get(f"/v1/costs/benchmarks/{slug}")
    assert cost.status_code == 404 and cost.json()["detail"][0]["loc"] == ["path", "slug"], cost.text
    # the owner still previews it and reads its cost profile
    assert [s["ordinal"] for s in gateway.get(f"/v1/benchmarks/{slug}/samples").json()] == [0, 1]
    assert gateway.get(f"/v1/costs/benchmarks/{slug}").json() == {
        "benchmark": slug,
        "expected_input_tokens": None,
        "expected_output_tokens": None,
        "expected_latency_ms": None,
    }


def test_another_tenants_slug_cannot_get_a_new_version(gateway, other_tenant):
    slug = f"owned-{uuid.uuid4().hex[:8]}"
    first = upload(gateway, spec(slug), ROWS, "d.jsonl")
    assert first.status_code == 201, first.text
    for content in (ROWS, ROWS + b'{"question": "q3", "answer": "a3"}\n'):  # the same content, and new content
        r = upload(other_tenant, spec(slug), content, "d.jsonl")
        assert r.status_code == 409, r.text
        assert (r.json()["detail"][0]["loc"], r.json()["detail"][0]["type"]) == (["body", "spec", "slug"], "slug_taken")
    assert [(b["id"], b["version"]) for b in _listed(gateway, slug)] == [(first.json()["id"], first.json()["version"])]
    # the site catalogue's slugs are no one's to extend either
    builtin = upload(other_tenant, spec("gsm8k"), ROWS, "d.jsonl")
    assert builtin.status_code == 409 and builtin.json()["detail"][0]["loc"] == ["body", "spec", "slug"]


def test_an_invalid_upload_under_a_private_slug_answers_as_under_a_free_one(gateway, other_tenant):
    taken = f"hidden-{uuid.uuid4().hex[:8]}"
    assert upload(gateway, spec(taken), ROWS, "d.jsonl").status_code == 201
    free = f"free-{uuid.uuid4().hex[:8]}"
    for content in (b'{"question": "q1", "answer": "a1"}\n{"question": ', b"", b'{"answer": "a1"}\n'):
        under_taken = upload(other_tenant, spec(taken), content, "d.jsonl")
        under_free = upload(other_tenant, spec(free), content, "d.jsonl")
        assert under_taken.status_code == under_free.status_code == 422, (under_taken.text, under_free.text)
        assert under_taken.json() == under_free.json()
    assert _listed(other_tenant, free) == []
    # a valid upload is refused; the message names neither the owner nor the visibility
    r = upload(other_tenant, spec(taken), ROWS, "d.jsonl")
    assert r.status_code == 409, r.text
    problem = r.json()["detail"][0]
    assert (problem["loc"], problem["type"]) == (["body", "spec", "slug"], "slug_taken")
    assert problem["msg"] == f"the slug {taken!r} is not available; choose another slug"
    # a shared slug is refused before the file is read (it is in every tenant's catalogue anyway)
    shared = f"open-{uuid.uuid4().hex[:8]}"
    r = gateway.post("/v1/benchmarks", data={"spec": spec(shared), "visibility": "shared"}, files={"file": ("d.jsonl", ROWS)})
    assert r.status_code == 201, r.text
    r = upload(other_tenant, spec(shared), b"", "d.jsonl")
    assert r.status_code == 409 and r.json()["detail"][0]["msg"] == problem["msg"].replace(taken, shared), r.text


def test_a_shared_benchmark_is_visible_to_every_tenant(gateway, other_tenant):
    slug = f"shared-{uuid.uuid4().hex[:8]}"
    r = gateway.post("/v1/benchmarks", data={"spec": spec(slug), "visibility": "shared"}, files={"file": ("d.jsonl", ROWS)})
    assert r.status_code == 201, r.text
    assert [(b["visibility"], b["owned"]) for b in _listed(other_tenant, slug)] == [("shared", False)]
    assert [(b["visibility"], b["owned"]) for b in _listed(gateway, slug)] == [("shared", True)]
    preview = other_tenant.get(f"/v1/benchmarks/{slug}/samples")
    assert preview.status_code == 200 and [p["prompt"] for p in preview.json()] == ["Who wrote the unwritten book?", "q2"]
    # a new version without the field keeps the slug's visibility
    v2 = upload(gateway, spec(slug), ROWS + b'{"question": "q3", "answer": "a3"}\n', "d.jsonl")
    assert v2.status_code == 201 and v2.json()["visibility"] == "shared", v2.text
    # built-ins are the site catalogue: readable by all, owned by no tenant
    assert {(b["visibility"], b["owned"]) for b in _listed(other_tenant, "gsm8k")} == {("site", False)}


def test_an_unknown_visibility_is_refused(gateway, db):
    before = _count(db)
    r = gateway.post(
        "/v1/benchmarks",
        data={"spec": spec(f"vis-{uuid.uuid4().hex[:8]}"), "visibility": "public"},
        files={"file": ("d.jsonl", ROWS)},
    )
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "visibility"], r.text
    assert _count(db) == before
