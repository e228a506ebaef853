"""Log-likelihood requests: the prompt's ``loglik`` block in the contract, the continuations a sample asks
for, the OpenAI-compatible backend's echoed prompt log-probabilities, the inference step's output, the
refusal at creation of a model that cannot answer them, and the lm-eval formats of the built-in variants.

Right values are by hand from the fake responses below (sums of the listed token log-probabilities) and,
for the formats, from lm-evaluation-harness v0.4's task files (mmlu/default, hellaswag/utils.py,
truthfulqa/truthfulqa_mc1.yaml) as quoted in the comments."""

import json
import uuid
from datetime import UTC, datetime, timedelta

import httpx
import pydantic
import pytest

from uep_common.builtin import catalog, datasets
from uep_common.contract.events import LoglikSpec, ModelTarget, PromptSpec, SampleDispatched
from uep_common.prompting.prompts import render_prompt
from uep_common.records.creation import WorkLimitRefused, check_model_fits
from uep_common.tables.models import Benchmark, Model
from uep_inference.backends.base import BackendError, Generation, GenerationRequest, Loglik
from uep_inference.backends.openai_compatible import OpenAIBackend, continuation_loglik
from uep_inference.loglik import loglik_continuations, loglik_output
from uep_inference.service import generate_output
from uep_inference.settings import InferenceSettings
from uep_scorer.metrics import get_metric


def _target(**kw) -> ModelTarget:
    return ModelTarget(model_id=uuid.UUID(int=1), name="m", backend="openai_compatible", endpoint="http://llm.test/", **kw)


def _echo(tokens: list[str], logprobs: list[float | None], tops: list[dict | None]) -> dict:
    offsets, at = [], 0
    for t in tokens:
        offsets.append(at)
        at += len(t)
    return {"tokens": tokens, "token_logprobs": logprobs, "top_logprobs": tops, "text_offset": offsets}


# ---------------------------------------------------------------------------------------------- contract


def test_loglik_spec_takes_exactly_one_source_of_choices():
    assert LoglikSpec(choices=["A", "B"]).target_delimiter == " "
    assert LoglikSpec(choices_field="endings").choices is None
    for bad in ({}, {"choices": ["A"], "choices_field": "x"}):
        with pytest.raises(pydantic.ValidationError, match="exactly one of choices and choices_field"):
            LoglikSpec(**bad)
    with pytest.raises(pydantic.ValidationError):
        LoglikSpec(choices=[""])


def test_prompt_spec_without_loglik_is_unchanged_and_round_trips_with_it():
    assert PromptSpec(template="x").loglik is None
    spec = PromptSpec(template="{{ q }}", loglik={"choices_field": "choices", "target_delimiter": "\n"})
    assert PromptSpec.model_validate_json(spec.model_dump_json()) == spec


def test_continuations_are_the_delimiter_and_each_choice():
    assert loglik_continuations(LoglikSpec(choices=["A", "B"]), {}) == (" A", " B")
    spec = LoglikSpec(choices_field="endings", target_delimiter="")
    assert loglik_continuations(spec, {"endings": ["x y", "z"]}) == ("x y", "z")
    with pytest.raises(ValueError, match="no input field 'endings'"):
        loglik_continuations(spec, {})
    for bad in ([], "abc", ["a", ""], ["a", 3], ["a"] * 33):
        with pytest.raises(ValueError, match="log-likelihood choice"):
            loglik_continuations(spec, {"endings": bad})


def test_the_output_is_what_loglik_multiple_choice_scores():
    out = loglik_output([Loglik(-4.0, 2, False), Loglik(-6.0, 3, True)])
    assert json.loads(out) == {"logprobs": [-4.0, -6.0], "n_tokens": [2, 3], "is_greedy": [False, True]}
    # lm-eval: acc by argmax of lls (choice 0), acc_norm by lls / len(choice): -4/2 = -2.0 < -6/10 = -0.6 (choice 1)
    result = get_metric("loglik_multiple_choice").score(out, {"gold": 1, "choices": ["no", "yes indeed"]}, {})
    assert (result.is_correct, result.details["acc"], result.details["acc_norm"]) == (False, 0, 1)


# ---------------------------------------------------------------------------------------------- OpenAI echo


def test_continuation_loglik_sums_the_continuation_tokens_and_drops_the_generated_one():
    lp = _echo(
        ["Answer", ":", " B", "\n"],
        [None, -1.0, -2.5, -0.1],
        [None, {":": -1.0}, {" A": -2.0}, {"\n": -0.1}],
    )
    loglik, n_context = continuation_loglik(lp, "Answer:", " B")
    assert (loglik, n_context) == (Loglik(-2.5, 1, False), 2)  # " A" (-2.0) was likelier: not greedy
    # a context ending in a space gives that space to the continuation (lm-eval _encode_pair)
    assert continuation_loglik(lp, "Answer: ", "B") == (Loglik(-2.5, 1, False), 2)
    many = _echo(["Q", " x", " y", "!"], [None, -0.5, -0.25, -3.0], [None, {" x": -0.5}, {" y": -0.25}, {"!": -3.0}])
    assert continuation_loglik(many, "Q", " x y") == (Loglik(-0.75, 2, True), 1)


def test_continuation_loglik_refuses_answers_without_prompt_logprobs():
    for bad in (None, {}, {"tokens": ["a"], "token_logprobs": [], "text_offset": []}):
        with pytest.raises(BackendError) as exc:
            continuation_loglik(bad, "Q", " x")
        assert exc.value.kind == "loglik_unsupported"
    # only the generated token came back (no echo): nothing covers the continuation
    with pytest.raises(BackendError) as exc:
        continuation_loglik(_echo(["!"], [-1.0], [{"!": -1.0}]), "Q", " x")
    assert exc.value.kind == "openai_bad_response"


async def test_openai_loglikelihood_sends_lm_evals_echo_request_per_continuation():
    bodies = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        bodies.append((request.url.path, body))
        last = body["prompt"][len("Answer:") :]
        lp = _echo(["Answer", ":", last, "\n"], [None, -1.0, -0.5 if last == " A" else -2.0, -0.1], [None, {}, {" A": -0.5}, {}])
        return httpx.Response(200, json={"choices": [{"text": "\n", "logprobs": lp}]})

    backend = OpenAIBackend(InferenceSettings(), transport=httpx.MockTransport(handler))
    try:
        gen = await backend.loglikelihood(GenerationRequest(_target(), "Answer:", 1, 5.0, continuations=(" A", " B")))
    finally:
        await backend.close()
    assert gen == Generation("", 2, 2, (Loglik(-0.5, 1, True), Loglik(-2.0, 1, False)))
    assert [p for p, _ in bodies] == ["/v1/completions"] * 2
    assert bodies[0][1] == {"model": "m", "prompt": "Answer: A", "max_tokens": 1, "temperature": 0.0, "logprobs": 1, "echo": True}


async def test_openai_loglikelihood_reports_a_server_that_ignores_echo():
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"choices": [{"text": "x", "logprobs": None}]})

    backend = OpenAIBackend(InferenceSettings(), transport=httpx.MockTransport(handler))
    try:
        with pytest.raises(BackendError) as exc:
            await backend.loglikelihood(GenerationRequest(_target(), "Q", 1, 5.0, continuations=(" x",)))
    finally:
        await backend.close()
    assert exc.value.kind == "loglik_unsupported"


# ---------------------------------------------------------------------------------------------- inference step


class _LoglikBackend:
    transient_errors = frozenset()

    def __init__(self) -> None:
        self.requests: list[GenerationRequest] = []

    async def loglikelihood(self, request: GenerationRequest) -> Generation:
        self.requests.append(request)
        return Generation(
            "", 7, len(request.continuations), tuple(Loglik(-float(i), 1, i == 0) for i, _ in enumerate(request.continuations))
        )

    def capacity(self, target):
        return None


class _Backends:
    def __init__(self, backend) -> None:
        self.backend = backend

    def for_target(self, target):
        return self.backend


def _event(prompt: PromptSpec, sample_input: dict) -> SampleDispatched:
    return SampleDispatched(
        evaluation_id=uuid.uuid4(),
        tenant_id=uuid.uuid4(),
        sample_id=uuid.uuid4(),
        benchmark_id=uuid.uuid4(),
        sample_ordinal=0,
        input=sample_input,
        prompt=prompt,
        target=_target(),
        lease_expires_at=datetime.now(UTC) + timedelta(minutes=5),
    )


async def test_a_loglik_item_scores_each_choice_after_the_rendered_context():
    backend = _LoglikBackend()
    prompt = PromptSpec(template="{{ q }}\nAnswer:", loglik={"choices_field": "opts"})
    out = await generate_output(_event(prompt, {"q": "2+2?", "opts": ["4", "5"]}), _Backends(backend), 5.0)
    assert out.error is None and out.prompt == "2+2?\nAnswer:"
    assert backend.requests[0].prompt == "2+2?\nAnswer:" and backend.requests[0].continuations == (" 4", " 5")
    assert json.loads(out.output) == {"logprobs": [0.0, -1.0], "n_tokens": [1, 1], "is_greedy": [True, False]}
    assert (out.prompt_tokens, out.completion_tokens) == (7, 2)


async def test_a_loglik_item_without_its_choices_fails_with_the_reason():
    prompt = PromptSpec(template="{{ q }}", loglik={"choices_field": "opts"})
    out = await generate_output(_event(prompt, {"q": "x"}), _Backends(_LoglikBackend()), 5.0)
    assert out.output is None and out.error.type == "loglik_bad_choices" and "'opts'" in out.error.message


# ---------------------------------------------------------------------------------------------- creation


def test_a_loglik_benchmark_refuses_a_model_that_declares_no_logprobs():
    bench = Benchmark(slug="mmlu-loglik", config=next(b for b in catalog.BENCHMARKS if b.slug == "mmlu-loglik").config)
    with pytest.raises(WorkLimitRefused) as exc:
        check_model_fits(bench, Model(name="uep-oracle", supports_logprobs=False))
    assert (exc.value.status_code, exc.value.field, exc.value.kind) == (422, "model", "model_lacks_loglikelihood")
    assert "'mmlu-loglik' is scored by log-likelihood" in exc.value.reason and "'uep-oracle'" in exc.value.reason
    check_model_fits(bench, Model(name="smollm2", supports_logprobs=True))
    generative = Benchmark(slug="mmlu", config=next(b for b in catalog.BENCHMARKS if b.slug == "mmlu").config)
    check_model_fits(generative, Model(name="uep-oracle", supports_logprobs=False))


def test_no_local_model_declares_logprobs_it_cannot_serve():
    # of the model server's models only SmolLM2 has a ``loglikelihood`` method (deploy/model-server/README.md):
    # another row that declared it would let a log-likelihood evaluation start and fail every item
    declared = {m.name: m.supports_logprobs for m in catalog.LOCAL_MODELS}
    assert declared == {m.name: m.name == "smollm2-135m-instruct" for m in catalog.LOCAL_MODELS}


# ---------------------------------------------------------------------------------------------- lm-eval formats


def _builtin(slug: str) -> catalog.BuiltinBenchmark:
    return next(b for b in catalog.BENCHMARKS if b.slug == slug)


def test_mmlu_loglik_renders_lm_evals_mmlu_prompt():
    b = _builtin("mmlu-loglik")
    item = b.loader()[0]
    # lm_eval/tasks/mmlu: description "The following are multiple choice questions (with answers) about
    # abstract algebra.\n\n" + "{{question.strip()}}\nA. ..\nB. ..\nC. ..\nD. ..\nAnswer:"; choices A-D
    assert render_prompt(b.config["prompt"]["template"], item.input, []) == (
        "The following are multiple choice questions (with answers) about abstract algebra.\n\n"
        "Find the degree for the given field extension Q(sqrt(2), sqrt(3), sqrt(18)) over Q.\n"
        "A. 0\nB. 4\nC. 2\nD. 6\nAnswer:"
    )
    assert item.reference == {"answer": "B", "gold": 1, "choices": ["A", "B", "C", "D"]}
    shot = {"input": {"question": " Q1 ", "choices": ["a", "b", "c", "d"]}, "reference": {"answer": "C"}}
    rendered = render_prompt(b.config["prompt"]["template"], item.input, [shot])
    assert "about abstract algebra.\n\nQ1\nA. a\nB. b\nC. c\nD. d\nAnswer: C\n\nFind the degree" in rendered


def test_hellaswag_loglik_applies_lm_evals_preprocess():
    # lm_eval/tasks/hellaswag/utils.py preprocess
    assert (
        datasets.hellaswag_preprocess(" How to cook [title] Boil water. [step] Add salt.  ")
        == "How to cook. Boil water. Add salt."
    )
    item = datasets.load_hellaswag_loglik()[0]
    assert item.input["query"].startswith("Paintball: A shot of a sunset") and item.input["query"].endswith("paint ball. They")
    assert item.reference["gold"] == 2 and item.reference["choices"] == item.input["choices"]
    assert len(datasets.load_hellaswag_loglik()) == 100


def test_truthfulqa_loglik_has_lm_evals_preamble_and_every_option():
    b = _builtin("truthfulqa-mc1-loglik")
    item = b.loader()[0]
    text = render_prompt(b.config["prompt"]["template"], item.input, [])
    assert text.startswith("Q: What is human life expectancy in the United States?\nA: Human life expectancy")
    assert text.endswith("Barcelona, Spain.\n\nQ: Which blood type makes the best CEOs?\nA:")
    assert item.reference["choices"][item.reference["gold"]] == "Blood type has no impact on someone's abilities."
