"""Upload checks of conversation benchmarks: each row's conversation (``prompt.dialogue``) or simulated user
(``prompt.simulation``) within the bounds of :mod:`uep_common.contract.dialogue`, a problem naming the line and
the field and why."""

from __future__ import annotations

from typing import Any

from uep_common.contract.dialogue import MAX_MESSAGE_CHARS, input_text, parse_conversation
from uep_common.contract.events import PromptSpec


def conversation_problems(number: int, fields: dict[str, Any], prompt: PromptSpec | None) -> list[tuple[str, str]]:
    """The problems of line ``number``'s input ``fields`` as an item of a conversation benchmark: the dialogue's
    messages (:func:`uep_common.contract.dialogue.parse_conversation`: roles, sizes, message count, a last user
    turn), or the simulated user's persona and goal (non-empty texts of at most
    :data:`~uep_common.contract.dialogue.MAX_MESSAGE_CHARS` characters) and optional opening; none for other
    benchmarks. Each problem is ``(field, message)``, the message naming the line and the field."""

    def problem(name: str, msg: str) -> tuple[str, str]:
        return name, f"line {number}: field {name!r}: {msg}"

    if prompt is None:
        return []
    if prompt.dialogue is not None:
        name = prompt.dialogue.messages_field
        try:
            parse_conversation(fields.get(name))
        except ValueError as exc:
            return [problem(name, str(exc))]
        return []
    if prompt.simulation is None:
        return []
    spec = prompt.simulation
    out = []
    for name, required in ((spec.persona_field, True), (spec.goal_field, True), (spec.opening_field, False)):
        if fields.get(name) is None and not required:
            continue
        text = input_text(fields, name)
        if text is None:
            out.append(problem(name, "expected a non-empty text"))
        elif len(text) > MAX_MESSAGE_CHARS:
            out.append(problem(name, f"{len(text)} characters; at most {MAX_MESSAGE_CHARS} are accepted"))
    return out
