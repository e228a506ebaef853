"""Conversations in the event contract: chat messages, dialogue items, simulated users, and transcripts.

A benchmark item may be a conversation instead of a single prompt (:class:`DialogueSpec`): the sample's input
field ``messages`` holds chat messages (``system`` / ``user`` / ``assistant``), the last one a user turn, and the
model under test answers it with the earlier messages as its chat history (the backend applies the model's chat
template). Or an item may give a user persona and goal (:class:`SimulationSpec`): a simulator model plays that
user for up to ``max_turns`` turns against the model under test. Either way the item's :class:`Transcript`
travels with its output, its judge request and its score, and is stored with the item's result.

The bounds here (:data:`MAX_MESSAGES`, :data:`MAX_MESSAGE_CHARS`, :data:`MAX_CONVERSATION_CHARS`) are the work
bound of one conversation: an upload whose conversation exceeds one is refused naming the field, and a
simulated transcript stops before it would exceed them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

MAX_MESSAGES = 64
"""Most messages in one conversation (system, user and assistant turns together)."""
MAX_MESSAGE_CHARS = 8000
"""Longest message content, characters."""
MAX_CONVERSATION_CHARS = 64_000
"""Longest conversation, characters of content summed over its messages."""
MAX_REFERENCE_CHARS = 8000
"""Longest per-turn reference, characters."""

Role = Literal["system", "user", "assistant"]
ROLE_LABELS: dict[str, str] = {"system": "System", "user": "User", "assistant": "Assistant"}
"""How each role is written when a conversation is shown as text (:func:`conversation_text`)."""


class ChatMessage(BaseModel):
    """One chat message: ``role`` (``system``, ``user`` or ``assistant``) and ``content`` (at most
    :data:`MAX_MESSAGE_CHARS` characters); an uploaded user turn may carry ``reference``, the reply expected to
    it (a per-turn reference the judge is shown; never sent to the model under test)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: Role
    content: Annotated[str, Field(max_length=MAX_MESSAGE_CHARS)]
    reference: Annotated[str, Field(max_length=MAX_REFERENCE_CHARS)] | None = None


def _check_conversation(messages: list[ChatMessage], *, ends_with_user: bool) -> list[ChatMessage]:
    total = sum(len(m.content) for m in messages)
    if total > MAX_CONVERSATION_CHARS:
        raise ValueError(f"the conversation holds {total} characters; at most {MAX_CONVERSATION_CHARS} are accepted")
    for i, m in enumerate(messages):
        if m.role == "system" and i > 0:
            raise ValueError(f"message {i}: a system message may only come first")
        if not m.content.strip() and m.role != "assistant":
            raise ValueError(f"message {i}: a {m.role} message needs content")
    if ends_with_user and (not messages or messages[-1].role != "user"):
        raise ValueError("the last message must be a user turn (the one the model answers)")
    return messages


_MESSAGES = TypeAdapter(list[ChatMessage])


def parse_conversation(value: object) -> list[ChatMessage]:
    """The conversation ``value`` (a list of ``{"role", "content"[, "reference"]}`` objects) as messages: at
    most :data:`MAX_MESSAGES`, each within :data:`MAX_MESSAGE_CHARS`, :data:`MAX_CONVERSATION_CHARS` in all, a
    system message only first, the last a user turn.

    Raises:
        ValueError: what is wrong, naming the message index and field (``messages.3.role: ...``).
    """
    if not isinstance(value, list):
        raise ValueError(f"expected a list of chat messages, got {type(value).__name__}")
    if not 1 <= len(value) <= MAX_MESSAGES:
        raise ValueError(f"{len(value)} messages; between 1 and {MAX_MESSAGES} are accepted")
    try:
        messages = _MESSAGES.validate_python(value)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise ValueError(f"message {where}: {err['msg']}") from None
    return _check_conversation(messages, ends_with_user=True)


def conversation_text(messages: list[ChatMessage], *, references: bool = False) -> str:
    """The conversation as text, one block per message headed by its role (``User: ...``); with
    ``references`` each user turn's reference follows it (``(Reference reply: ...)``). What the judge reads
    and what a backend without a chat template is sent."""
    lines: list[str] = []
    for m in messages:
        lines.append(f"{ROLE_LABELS[m.role]}: {m.content}")
        if references and m.reference:
            lines.append(f"(Reference reply: {m.reference})")
    return "\n\n".join(lines)


class DialogueSpec(BaseModel):
    """The benchmark's items are conversations: the sample's input field ``messages_field`` holds the chat
    messages (:func:`parse_conversation`); the model answers the last user turn with the earlier ones as its
    history. The benchmark's rendered prompt template, when not blank, is the system message of a conversation
    that has none."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    messages_field: str = Field("messages", min_length=1, max_length=100)


class SimulationSpec(BaseModel):
    """The benchmark's items are simulated conversations: a simulator model plays a user with the persona of
    the input field ``persona_field`` and the goal of ``goal_field`` (and, when the sample has it, opens with the
    message of ``opening_field``) against the model under test, for at most ``max_turns`` replies of the model.

    The simulator ends the conversation early by writing ``done_marker`` (the goal is reached or given up).
    Bounds: ``max_tokens`` per turn (either side), ``time_limit_s`` for the whole conversation, and the
    conversation bounds of this module. ``simulator``: the registered generation model that plays the user
    (its name; the embedded SmolLM2 by default). The rendered prompt template, when not blank, is the system
    message of the model under test."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    simulator: str = Field("smollm2-135m-instruct", min_length=1, max_length=200)
    persona_field: str = Field("persona", min_length=1, max_length=100)
    goal_field: str = Field("goal", min_length=1, max_length=100)
    opening_field: str = Field("opening", min_length=1, max_length=100)
    max_turns: int = Field(3, ge=1, le=10, description="Most replies of the model under test.")
    max_tokens: int = Field(96, ge=8, le=1024, description="Most new tokens of each turn, either side.")
    time_limit_s: float = Field(180.0, gt=0, le=900, description="Wall-clock bound of the whole conversation, s.")
    done_marker: str = Field("[DONE]", min_length=1, max_length=40)


TranscriptEnd = Literal[
    "answered", "user_done", "max_turns", "time_limit", "length_limit", "model_error", "simulator_error", "simulator_silent"
]


class Transcript(BaseModel):
    """One item's conversation as it happened: ``messages`` (the history given or simulated, then the model's
    replies), ``simulated`` (a simulator played the user), ``turns`` (replies of the model under test) and
    ``ended`` (why it stopped: ``answered`` for a given conversation; for a simulated one ``user_done``,
    ``max_turns``, ``time_limit``, ``length_limit``, ``model_error``, ``simulator_error`` or
    ``simulator_silent``: the simulator wrote nothing). ``persona`` and ``goal``: the
    simulated user's."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    messages: list[ChatMessage] = Field(max_length=2 * MAX_MESSAGES + 2)
    simulated: bool = False
    turns: int = Field(0, ge=0)
    ended: TranscriptEnd = "answered"
    persona: str | None = Field(None, max_length=MAX_MESSAGE_CHARS)
    goal: str | None = Field(None, max_length=MAX_MESSAGE_CHARS)

    @model_validator(mode="after")
    def _turns_counted(self) -> Transcript:
        replies = sum(1 for m in self.messages if m.role == "assistant")
        if self.turns > replies:
            raise ValueError(f"turns {self.turns} is more than the transcript's {replies} assistant messages")
        return self

    def as_text(self) -> str:
        """The transcript for a judge: the simulated user's persona and goal first, then the messages
        (:func:`conversation_text`, per-turn references included)."""
        head = []
        if self.simulated:
            head.append(f"[Simulated user] persona: {self.persona or '-'}; goal: {self.goal or '-'}")
            head.append(f"[Conversation: {self.turns} assistant turn(s), ended: {self.ended}]")
        return "\n".join(head + [""] if head else []) + conversation_text(self.messages, references=True)


def input_text(fields: dict[str, Any], name: str) -> str | None:
    """The input field ``name`` as stripped text, or None when absent or not a non-empty string."""
    value = fields.get(name)
    return value.strip() if isinstance(value, str) and value.strip() else None
