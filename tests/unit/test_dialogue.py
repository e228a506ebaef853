"""Conversation items: the conversation parser and its bounds, the upload's row checks (422 naming the line
and the field), the chat messages each backend sends (the uep ``messages`` tensor to a model that declares it,
an OpenAI-compatible ``messages`` list, the embedded LLM's llama.cpp body, the model server's decoding), and
the bounds of the simulated-user loop (turns, the done marker, time, a failing model), driven by scripted
model calls."""

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import httpx
import numpy as np
import pytest

from uep_common.contract.dialogue import (
    MAX_CONVERSATION_CHARS,
    MAX_MESSAGE_CHARS,
    MAX_MESSAGES,
    SimulationSpec,
    Transcript,
    conversation_text,
    parse_conversation,
)
from uep_common.contract.events import (
    Backend,
    ErrorInfo,
    JudgeRequested,
    ModelKind,
    ModelTarget,
    OutputGenerated,
    PromptSpec,
    SampleDispatched,
)
from uep_gateway.uploads import UploadInvalid, validate_rows
from uep_inference.backends import triton_contracts as tc
from uep_inference.backends.base import Generation, GenerationRequest
from uep_inference.backends.openai_compatible import OpenAIBackend
from uep_inference.dialogue import answer_conversation, completion_text, simulate_conversation
from uep_inference.settings import InferenceSettings
from uep_judge.service import question_of
from uep_model_server.io import GenerationRequest as ServerRequest
from uep_model_server.io import decode_requests, parse_messages
from uep_model_server.llm import LlmSettings, SmolLM2

CHAT = [
    {"role": "system", "content": "You are the help desk of Acme."},
    {"role": "user", "content": "My parcel is late.", "reference": "Ask for the order number."},
    {"role": "assistant", "content": "Sorry to hear that. What is your order number?"},
    {"role": "user", "content": "It is 1234."},
]


# ------------------------------------------------------------------------------------------------ the parser


def test_a_well_formed_conversation_parses_with_its_references():
    messages = parse_conversation(CHAT)
    assert [m.role for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[1].reference == "Ask for the order number."
    text = conversation_text(messages, references=True)
    assert text.startswith("System: You are the help desk of Acme.\n\nUser: My parcel is late.")
    assert "(Reference reply: Ask for the order number.)" in text
    assert "Reference" not in conversation_text(messages)


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("hello", "expected a list of chat messages"),
        ([], "0 messages"),
        ([{"role": "user", "content": "hi"}] * (MAX_MESSAGES + 1), f"{MAX_MESSAGES + 1} messages"),
        ([{"role": "customer", "content": "hi"}], "message 0.role"),
        ([{"role": "user"}], "message 0.content"),
        ([{"role": "user", "content": "hi", "mood": "sad"}], "message 0.mood"),
        ([{"role": "user", "content": "x" * (MAX_MESSAGE_CHARS + 1)}], "message 0.content"),
        ([{"role": "user", "content": "x" * 7000}] * 10, f"at most {MAX_CONVERSATION_CHARS}"),
        ([{"role": "user", "content": "hi"}, {"role": "system", "content": "be nice"}, {"role": "user", "content": "?"}], "message 1: a system message may only come first"),
        ([{"role": "user", "content": "  "}], "message 0: a user message needs content"),
        ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}], "the last message must be a user turn"),
    ],
)  # fmt: skip
def test_a_malformed_conversation_is_refused_naming_the_message(value, needle):
    with pytest.raises(ValueError, match=None) as err:
        parse_conversation(value)
    assert needle in str(err.value)


def test_a_prompt_spec_takes_one_item_kind_at_most():
    with pytest.raises(ValueError, match="at most one of loglik, dialogue, simulation and agent"):
        PromptSpec.model_validate({"template": "", "dialogue": {}, "simulation": {}})
    assert PromptSpec.model_validate({"template": "", "simulation": {"max_turns": 2}}).simulation == SimulationSpec(max_turns=2)
    with pytest.raises(ValueError, match="max_turns"):
        PromptSpec.model_validate({"template": "", "simulation": {"max_turns": 11}})


# ------------------------------------------------------------------------------------------------ the upload


def _rows(records, prompt):
    return validate_rows(list(enumerate(records, start=1)), "Be brief.", 100, prompt_spec=PromptSpec.model_validate(prompt))


def test_the_upload_checks_each_conversation_and_names_the_line_and_field():
    dialogue = {"template": "Be brief.", "dialogue": {"messages_field": "messages"}}
    ok = _rows([{"input": {"messages": CHAT}, "reference": {"answer": "x"}}], dialogue)
    assert ok[0].input["messages"][3]["content"] == "It is 1234."
    bad = [
        {"input": {"messages": CHAT}, "reference": {"answer": "-"}},
        {"input": {"messages": [{"role": "bot", "content": "hi"}]}, "reference": {"answer": "-"}},
        {"input": {"text": "no conversation"}, "reference": {"answer": "-"}},
    ]
    with pytest.raises(UploadInvalid) as err:
        _rows(bad, dialogue)
    problems = [(p.loc, p.type) for p in err.value.problems]
    assert problems == [
        (["body", "file", "line 2", "messages"], "bad_conversation"),
        (["body", "file", "line 3", "messages"], "bad_conversation"),
    ]
    assert "message 0.role" in err.value.problems[0].msg


def test_the_upload_checks_each_simulated_user():
    sim = {"template": "", "simulation": {}}
    assert len(_rows([{"input": {"persona": "a retiree", "goal": "cancel the order"}, "reference": {"answer": "-"}}], sim)) == 1
    with pytest.raises(UploadInvalid) as err:
        _rows([{"input": {"persona": "a retiree", "goal": " ", "opening": 3}, "reference": {"answer": "-"}}], sim)
    assert [p.loc[-1] for p in err.value.problems] == ["goal", "opening"]


# ------------------------------------------------------------------------------------------------ the backends


def _target(backend: str = "triton", contract: str = "uep", **kw) -> ModelTarget:
    return ModelTarget(
        model_id=uuid.uuid4(), name="m", backend=Backend(backend), endpoint="http://llm.test/", kind=ModelKind.generation,
        contract=contract, **kw,
    )  # fmt: skip


PLAIN = tuple({"role": m["role"], "content": m["content"]} for m in CHAT)


def test_the_uep_request_sends_the_messages_to_a_model_that_declares_them():
    request = GenerationRequest(_target(), completion_text(list(PLAIN)), 16, 5.0, messages=PLAIN)
    sent = {t.name: t.value.tolist() for t in tc.GENERATION["uep"].build(request, False, True)}
    assert json.loads(sent["messages"][0][0]) == list(PLAIN)
    without = {t.name: t.value.tolist() for t in tc.GENERATION["uep"].build(request, False, False)}
    assert "messages" not in without
    assert without["text_input"][0][0].decode().endswith("User: It is 1234.\n\nAssistant:")
    vllm = {
        t.name
        for t in tc.GENERATION["vllm"].build(
            GenerationRequest(_target(contract="vllm"), "p", 1, 1.0, messages=PLAIN), False, True
        )
    }
    assert "messages" not in vllm  # no chat template there: the text prompt carries the conversation


async def test_an_openai_compatible_server_gets_the_chat_messages():
    sent: list[dict] = []

    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, json={"choices": [{"message": {"content": "Thanks."}}], "usage": {}})

    backend = OpenAIBackend(InferenceSettings(openai_api_key="k"), transport=httpx.MockTransport(handle))
    gen = await backend.generate(GenerationRequest(_target("openai_compatible", "openai"), "text", 8, 5.0, messages=PLAIN))
    assert gen.text == "Thanks." and sent[0]["messages"] == list(PLAIN)
    await backend.generate(GenerationRequest(_target("openai_compatible", "openai"), "Q?", 8, 5.0))
    assert sent[1]["messages"] == [{"role": "user", "content": "Q?"}]


def test_the_model_server_decodes_messages_and_the_llm_sends_them_to_llama_cpp():
    assert parse_messages(b"") == () and parse_messages(json.dumps(list(PLAIN)).encode()) == PLAIN
    for bad in (b'{"role": "user"}', b'[{"role": "bot", "content": "x"}]', b'[{"role": "user", "content": 1}]', b"[nope"):
        with pytest.raises(ValueError, match="messages"):
            parse_messages(bad)
    rows = decode_requests(
        np.array([[b"a"], [b"b"]], dtype=object), messages=np.array([[json.dumps(list(PLAIN)).encode()], [b""]], dtype=object)
    )
    assert [r.messages for r in rows] == [PLAIN, ()]
    llm = SmolLM2.__new__(SmolLM2)  # request_body needs only the settings, not the loaded weights
    llm.settings = LlmSettings()
    assert llm.request_body(ServerRequest("ignored", messages=PLAIN))["messages"] == list(PLAIN)
    assert llm.request_body(ServerRequest("Q?"))["messages"] == [{"role": "user", "content": "Q?"}]
    assert SmolLM2.chat_messages is True


# ------------------------------------------------------------------------------------------------ the loops


@dataclass
class Call:
    """A model call's outcome as :func:`uep_inference.service.call_model` returns it (the fields read here)."""

    generation: Generation | None
    error: ErrorInfo | None = None
    latency_ms: float = 10.0
    throttled: bool = False


class Script:
    """Scripted model calls: each target name answers its next line in turn (an ErrorInfo fails the call);
    every call is kept, with its messages."""

    def __init__(self, **lines: list) -> None:
        self.lines = {k: list(v) for k, v in lines.items()}
        self.calls: list[tuple[str, tuple, float | None]] = []

    async def __call__(self, target, prompt, max_tokens, stop, chat, *, messages=(), timeout_s=None):
        self.calls.append((target.name, messages, timeout_s))
        line = self.lines[target.name].pop(0)
        if isinstance(line, ErrorInfo):
            return Call(None, line)
        return Call(Generation(line, 20, 5))


def _event(prompt: dict, fields: dict) -> SampleDispatched:
    sut = _target()
    return SampleDispatched(
        evaluation_id=uuid.uuid4(), tenant_id=uuid.uuid4(), sample_id=uuid.uuid4(), benchmark_id=uuid.uuid4(),
        sample_ordinal=0, input=fields, prompt=PromptSpec.model_validate(prompt), target=sut,
        lease_expires_at=datetime.now(UTC) + timedelta(minutes=5), simulator=sut.model_copy(update={"name": "sim"}),
    )  # fmt: skip


def _t(out: OutputGenerated) -> Transcript:
    assert out.transcript is not None
    return out.transcript


async def test_a_given_conversation_is_answered_with_its_history_and_kept_as_a_transcript():
    script = Script(m=["Thank you, order 1234 ships tomorrow."])
    out = await answer_conversation(_event({"template": "", "dialogue": {}}, {"messages": CHAT}), script, 64, [])
    assert out.error is None and out.output == "Thank you, order 1234 ships tomorrow."
    assert script.calls[0][1] == PLAIN  # the history as chat messages, references left out
    assert [m.role for m in _t(out).messages] == ["system", "user", "assistant", "user", "assistant"]
    assert _t(out).turns == 1 and _t(out).ended == "answered"
    judged = JudgeRequested(**out.item_fields(), benchmark_id=out.benchmark_id, model_id=out.model_id, prompt=out.prompt,
                            output=out.output, transcript=out.transcript)  # fmt: skip
    assert question_of(judged) == conversation_text(parse_conversation(CHAT), references=True)


async def test_a_template_becomes_the_system_message_of_a_conversation_without_one():
    script = Script(m=["Hello."])
    fields = {"messages": CHAT[1:], "shop": "Acme"}
    out = await answer_conversation(_event({"template": "You work for {{ shop }}.", "dialogue": {}}, fields), script, 64, [])
    assert script.calls[0][1][0] == {"role": "system", "content": "You work for Acme."}
    assert _t(out).messages[0].content == "You work for Acme."


async def test_a_bad_conversation_fails_the_item_naming_the_field():
    out = await answer_conversation(_event({"template": "", "dialogue": {}}, {"messages": [{"role": "x"}]}), Script(), 64, [])
    assert out.output is None and out.error is not None
    assert out.error.type == "bad_conversation" and out.error.message.startswith("messages: message 0")


SIM = {"template": "You are Acme's help desk.", "simulation": {"max_turns": 3, "time_limit_s": 60}}
USER = {"persona": "a busy nurse", "goal": "get a refund for order 77"}


async def test_the_simulated_user_talks_until_it_writes_the_done_marker():
    script = Script(
        sim=["I want a refund for order 77.", "Thanks, that is all. [DONE]"],
        m=["I have refunded order 77."],
    )
    out = await simulate_conversation(_event(SIM, USER), script, [], 30.0)
    t = _t(out)
    assert (t.simulated, t.turns, t.ended, t.persona) == (True, 1, "user_done", "a busy nurse")
    assert [(m.role, m.content) for m in t.messages] == [
        ("system", "You are Acme's help desk."),
        ("user", "I want a refund for order 77."),
        ("assistant", "I have refunded order 77."),
        ("user", "Thanks, that is all."),
    ]
    # the simulator plays the other side: its own turns are assistant turns, the model's replies user turns
    second_view = script.calls[2][1]
    assert "a busy nurse" in second_view[0]["content"] and [m["role"] for m in second_view[1:]] == ["assistant", "user"]
    assert out.output == conversation_text(t.messages) and out.prompt.startswith("Simulated user. Persona: a busy nurse")
    assert (out.prompt_tokens, out.completion_tokens) == (20, 5)  # the model under test's calls only


async def test_the_simulation_stops_at_max_turns_and_counts_them():
    script = Script(sim=["a", "b", "c", "d"], m=["1", "2", "3", "4"])
    out = await simulate_conversation(_event(SIM, {**USER, "opening": "Hello, I need help."}), script, [], 30.0)
    assert _t(out).turns == 3 and _t(out).ended == "max_turns"
    assert _t(out).messages[1].content == "Hello, I need help."  # the opening, not the simulator's
    assert [c[0] for c in script.calls] == ["m", "sim", "m", "sim", "m"]


async def test_the_simulation_stops_at_its_time_limit():
    now = [0.0]

    def clock() -> float:
        now[0] += 25.0  # each look at the clock is 25 s later: the 60 s bound ends the conversation
        return now[0]

    script = Script(sim=["a", "b", "c"], m=["1", "2", "3"])
    out = await simulate_conversation(_event(SIM, USER), script, [], 30.0, clock=clock)
    assert _t(out).ended == "time_limit" and _t(out).turns == 1
    assert all(c[2] is not None and c[2] <= 30.0 for c in script.calls)


async def test_a_failing_model_ends_the_transcript_or_fails_the_item():
    boom = ErrorInfo(stage="inference", type="triton_unavailable", message="down")
    first = await simulate_conversation(_event(SIM, USER), Script(sim=["hi"], m=[boom]), [], 30.0)
    assert first.output is None and first.error == boom and _t(first).ended == "model_error"
    later = await simulate_conversation(_event(SIM, USER), Script(sim=["hi", boom], m=["hello"]), [], 30.0)
    assert later.error is None and _t(later).ended == "simulator_error" and _t(later).turns == 1


def test_a_transcript_cannot_claim_more_turns_than_replies():
    with pytest.raises(ValueError, match="turns 2"):
        Transcript(messages=parse_conversation([{"role": "user", "content": "hi"}]), turns=2)
    assert SimulationSpec().simulator == "smollm2-135m-instruct"


def test_the_builtin_dialogue_benchmarks_are_the_documented_seed_sets():
    from uep_common.builtin.catalog import BENCHMARKS
    from uep_common.builtin.datasets import LICENSES

    by_slug = {b.slug: b for b in BENCHMARKS}
    dialogues, simulated = by_slug["support-dialogues"], by_slug["support-simulated"]
    items = dialogues.loader()
    assert len(items) == 20 and len({i.external_id for i in items}) == 20
    for it in items:  # every conversation parses and its last turn carries the reference the judge sees
        last = parse_conversation(it.input["messages"])[-1]
        assert last.role == "user" and last.reference == it.reference["answer"]
    assert len(simulated.loader()) == 8 and simulated.config["prompt"]["simulation"]["simulator"] == "smollm2-135m-instruct"
    assert dialogues.config["judge"]["judges"] == simulated.config["judge"]["judges"] == ["smollm2-135m-instruct"]
    assert LICENSES[dialogues.license_key].spdx == "LicenseRef-uep-seed"
