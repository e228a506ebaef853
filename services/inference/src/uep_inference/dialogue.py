"""Conversation items: a given conversation answered by the model, or a simulated user talking to it.

Both run inside the inference service because it owns the model calls: every call here — the model under test's
and the simulator's — goes through :func:`uep_inference.service.call_model`, so it takes its model's capacity
slot like any other call, is retried like any other, and stops once the item's evaluation has ended.

A given conversation (:class:`~uep_common.contract.dialogue.DialogueSpec`): one call with the history as chat
messages; the output is the reply to the last user turn, the prompt the conversation as text.

A simulated conversation (:class:`~uep_common.contract.dialogue.SimulationSpec`): the simulator writes the
user's turns from the persona and goal, the model under test answers, for at most ``max_turns`` replies. It is
bounded by turns, by ``max_tokens`` per turn on either side, by ``time_limit_s`` for the whole conversation
(each call's timeout is cut to what is left) and by the conversation bounds of
:mod:`uep_common.contract.dialogue`. The output is the whole conversation as text (what a judge grades, and what
a pairwise judge compares with a baseline's); the prompt the persona and goal. Token counts and latency are
those of the model under test only (the simulator's calls are not the evaluated model's cost).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from uep_common.contract.dialogue import (
    MAX_CONVERSATION_CHARS,
    MAX_MESSAGES,
    ChatMessage,
    SimulationSpec,
    Transcript,
    TranscriptEnd,
    conversation_text,
    input_text,
    parse_conversation,
)
from uep_common.contract.events import ErrorInfo, OutputGenerated, SampleDispatched
from uep_common.prompting.prompts import PromptRenderError, render_prompt

CallModel = Callable[..., Awaitable[Any]]
"""``call_model(target, prompt, max_tokens, stop, chat, messages=...)`` bound to the item's backends, limits,
retries and watch (:func:`uep_inference.service.call_model`), returning its ``ModelCall``."""

SIMULATOR_PROMPT = (
    "You are role-playing a customer who is chatting with a customer-service assistant.\n"
    "Your persona: {persona}\n"
    "Your goal: {goal}\n"
    "Write only the customer's next message: one or two short sentences, in the first person, never the "
    "assistant's words. When your goal is reached, or cannot be reached, end your message with {done}."
)
"""The simulator's system message (its persona, goal and the marker that ends the conversation)."""


def completion_text(messages: list[dict[str, str]]) -> str:
    """A chat history as one text prompt for a backend without a chat template: each message headed by its
    role, then an open ``Assistant:`` turn."""
    return conversation_text([ChatMessage(role=m["role"], content=m["content"]) for m in messages]) + "\n\nAssistant:"


def _as_chat(messages: list[ChatMessage]) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in messages]


def _system_message(event: SampleDispatched) -> ChatMessage | None:
    """The rendered prompt template as a system message, None when it renders blank.

    Raises:
        PromptRenderError: the template does not render on the sample.
    """
    text = render_prompt(event.prompt.template, event.input, event.fewshot).strip()
    return ChatMessage(role="system", content=text) if text else None


def _failed(common: dict[str, Any], prompt: str, kind: str, message: str) -> OutputGenerated:
    return OutputGenerated(**common, prompt=prompt, output=None, error=ErrorInfo(stage="inference", type=kind, message=message))


async def answer_conversation(event: SampleDispatched, call: CallModel, max_tokens: int, stop: list[str]) -> OutputGenerated:
    """The model's reply to the last user turn of the sample's conversation (``prompt.dialogue``), with the
    history as chat messages; the rendered template, when not blank, is the system message of a conversation
    without one. A malformed conversation is an ``error`` of type ``bad_conversation`` naming the message."""
    common = {**event.item_fields(), "benchmark_id": event.benchmark_id, "model_id": event.target.model_id}
    spec = event.prompt.dialogue
    assert spec is not None  # called for dialogue items only
    try:
        history = parse_conversation(event.input.get(spec.messages_field))
        system = _system_message(event)
    except ValueError as exc:
        kind = "prompt_render_error" if isinstance(exc, PromptRenderError) else "bad_conversation"
        return _failed(common, "", kind, f"{spec.messages_field}: {exc}")
    if system is not None and history[0].role != "system":
        history = [system, *history]
    chat = _as_chat(history)
    prompt = completion_text(chat)
    result = await call(event.target, prompt, max_tokens, stop, event.prompt.chat, messages=tuple(chat))
    if result.error is not None:
        return OutputGenerated(
            **common, prompt=prompt, output=None, latency_ms=result.latency_ms, error=result.error, throttled=result.throttled
        )
    gen = result.generation
    reply = ChatMessage(role="assistant", content=gen.text[:8000])
    transcript = Transcript(messages=[*history, reply], turns=1, ended="answered")
    return OutputGenerated(
        **common,
        prompt=prompt,
        output=gen.text,
        latency_ms=result.latency_ms,
        prompt_tokens=gen.prompt_tokens,
        completion_tokens=gen.completion_tokens,
        throttled=result.throttled,
        transcript=transcript,
    )


def _simulator_view(spec: SimulationSpec, persona: str, goal: str, messages: list[ChatMessage]) -> list[dict[str, str]]:
    """The conversation as the simulator sees it: its instructions as the system message, the model's replies
    as user turns and its own earlier turns as assistant turns (it plays the other side)."""
    view = [{"role": "system", "content": SIMULATOR_PROMPT.format(persona=persona, goal=goal, done=spec.done_marker)}]
    flip = {"user": "assistant", "assistant": "user"}
    view += [{"role": flip[m.role], "content": m.content} for m in messages if m.role in flip]
    if len(view) == 1 or view[-1]["role"] == "assistant":
        view.append({"role": "user", "content": "(The assistant is waiting for your message.)"})
    return view


def _fits(messages: list[ChatMessage], more: str) -> bool:
    return len(messages) + 2 <= MAX_MESSAGES and sum(len(m.content) for m in messages) + len(more) <= MAX_CONVERSATION_CHARS


class _Tally:
    """The model under test's calls of one conversation: summed latency and tokens, and whether any was throttled."""

    def __init__(self) -> None:
        self.latency_ms = 0.0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.throttled = False

    def add(self, result: Any) -> None:
        self.latency_ms += result.latency_ms
        self.throttled = self.throttled or result.throttled
        if result.generation is not None:
            self.prompt_tokens += result.generation.prompt_tokens or 0
            self.completion_tokens += result.generation.completion_tokens or 0


async def simulate_conversation(
    event: SampleDispatched, call: CallModel, stop: list[str], timeout_s: float, clock: Callable[[], float] = time.monotonic
) -> OutputGenerated:
    """A simulated user (``event.simulator`` with the sample's persona and goal) talking to the model under test
    (``prompt.simulation``; bounds in the module docstring). The sample's opening message, when it has one,
    is the user's first turn; otherwise the simulator writes it. Never raises for model failures: a failed
    first reply of the model is the item's error; a later failure ends the transcript (``model_error``,
    ``simulator_error``), which is still judged."""
    common = {**event.item_fields(), "benchmark_id": event.benchmark_id, "model_id": event.target.model_id}
    spec = event.prompt.simulation
    assert spec is not None  # called for simulated items only
    persona, goal = input_text(event.input, spec.persona_field), input_text(event.input, spec.goal_field)
    if persona is None or goal is None:
        missing = spec.persona_field if persona is None else spec.goal_field
        return _failed(common, "", "bad_conversation", f"{missing}: the sample needs a non-empty text")
    header = f"Simulated user. Persona: {persona}\nGoal: {goal}"
    if event.simulator is None:
        return _failed(common, header, "simulator_missing", "no simulator model was dispatched with the item")
    try:
        system = _system_message(event)
    except PromptRenderError as exc:
        return _failed(common, header, "prompt_render_error", str(exc))
    deadline = clock() + spec.time_limit_s
    messages: list[ChatMessage] = []
    tally = _Tally()
    opening = input_text(event.input, spec.opening_field)
    ended: TranscriptEnd | None = None
    first_error: ErrorInfo | None = None
    turns = 0
    while ended is None:
        left = deadline - clock()
        if left <= 1:
            ended = "time_limit"
            break
        if not messages and opening is not None:
            user_text: str | None = opening[: spec.max_tokens * 8]
        else:
            view = _simulator_view(spec, persona, goal, messages)
            sim = await call(
                event.simulator, completion_text(view), spec.max_tokens, [], True,
                messages=tuple(view), timeout_s=min(timeout_s, left),
            )  # fmt: skip
            if sim.error is not None:
                ended, first_error = "simulator_error", first_error or sim.error
                break
            user_text = sim.generation.text.strip()
            done = spec.done_marker in user_text
            user_text = user_text.replace(spec.done_marker, "").strip()
            if done or not user_text:
                if user_text and _fits(messages, user_text):
                    messages.append(ChatMessage(role="user", content=user_text[:8000]))
                ended = "user_done" if done else "simulator_silent"
                break
        if not _fits(messages, user_text or ""):
            ended = "length_limit"
            break
        messages.append(ChatMessage(role="user", content=(user_text or "")[:8000]))
        left = deadline - clock()
        if left <= 1:
            ended = "time_limit"
            break
        history = ([system] if system else []) + messages
        chat = _as_chat(history)
        reply = await call(
            event.target, completion_text(chat), spec.max_tokens, stop, event.prompt.chat,
            messages=tuple(chat), timeout_s=min(timeout_s, left),
        )  # fmt: skip
        tally.add(reply)
        if reply.error is not None:
            ended, first_error = "model_error", first_error or reply.error
            break
        text = reply.generation.text
        if not _fits(messages, text):
            ended = "length_limit"
            break
        messages.append(ChatMessage(role="assistant", content=text[:8000]))
        turns += 1
        if turns >= spec.max_turns:
            ended = "max_turns"
    transcript = Transcript(
        messages=([system] if system else []) + messages, simulated=True, turns=turns, ended=ended, persona=persona, goal=goal
    )
    if turns == 0:  # nothing of the model's to judge: the item fails with the reason
        error = first_error or ErrorInfo(stage="inference", type=f"conversation_{ended}", message=f"no reply: {ended}")
        return OutputGenerated(
            **common, prompt=header, output=None, latency_ms=tally.latency_ms, error=error, throttled=tally.throttled,
            transcript=transcript,
        )  # fmt: skip
    return OutputGenerated(
        **common,
        prompt=header,
        output=conversation_text(transcript.messages),
        latency_ms=tally.latency_ms,
        prompt_tokens=tally.prompt_tokens,
        completion_tokens=tally.completion_tokens,
        throttled=tally.throttled,
        transcript=transcript,
    )
