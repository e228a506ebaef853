"""``uep_judge`` and ``uep_judge_first``: deterministic judge models for the LLM-as-judge tests and demo.

Their answer is a pure function of the prompt. They read the prompts of uep's judge templates
(``services/judge/src/uep_judge/templates``), which wrap the texts in MT-bench's delimiters:
``[The Start of Assistant's Answer]`` … ``[The End of Assistant's Answer]`` (rubric, reference),
``[The Start of Assistant A's Answer]`` / ``B's`` (pairwise), ``[The Start of Reference Answer]``, and list
the rubric dimensions as lines ``- <name> [<min>, <max>]: <description>`` and the overall scale as
``overall [<min>, <max>]``.

Quality of an answer (an integer): a marker ``JUDGE:SCORE=<n>`` in the answer gives ``n``; else, when a
reference answer is shown, 9 if the answer contains the reference (case-insensitive) or ends with the same
last number, else 2; else ``min(10, 2 + words // 3)`` — a deliberately verbosity-biased judge, so the
length-correlation diagnostic has something to find.

Rubric answer: ``{"scores": {<dimension>: quality clamped to its scale}, "overall": quality, "reasoning": …}``.
Pairwise answer: ``{"winner": "A" | "B" | "tie", "reasoning": …}`` — the answer of higher quality (``tie``
when equal). Markers anywhere in the prompt change the FORM of the answer:

=========================  ==========================================================================
``JUDGE:FENCED``           the JSON inside a ```json code fence
``JUDGE:CHATTY``           prose before and after the JSON
``JUDGE:PROSE``            ``I would rate it highly.`` (no JSON at all), every time
``JUDGE:GARBAGE_ONCE``     prose on the first try; valid JSON when the prompt carries the retry
                           feedback (``Your previous reply could not be used``)
``JUDGE:OUT_OF_SCALE``     overall = the scale maximum + 4
=========================  ==========================================================================

Personalities: ``uep_judge`` ("consistent") follows the rules above. ``uep_judge_first`` ("first") always
answers ``"A"`` in pairwise comparisons (position bias: every swapped pair disagrees) and is harsh in rubric
grading: quality − 5, floored at the scale minimum (so a jury of both disagrees).

A prompt that is not a judge prompt (no answer delimiters) is answered as a candidate model would be: the
text of a ``[[say:…]]`` marker if the prompt has one, else ``I do not know.`` — so the judge can also be
evaluated (self-preference diagnostics). Token counts are whitespace word counts.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .io import GenerationRequest, GenerationResult

MODEL_NAMES = {"consistent": "uep_judge", "first": "uep_judge_first"}
RETRY_FEEDBACK = "Your previous reply could not be used"

_SECTION = "[The Start of {0}]"
_END = "[The End of {0}]"
_DIMENSION = re.compile(r"^- ([a-z][a-z0-9_]*) \[(-?[0-9.]+), (-?[0-9.]+)\]:", re.MULTILINE)
_OVERALL = re.compile(r"overall \[(-?[0-9.]+), (-?[0-9.]+)\]")
_MARKER = re.compile(r"JUDGE:([A-Z_]+)(?:=(-?[0-9]+))?")
_SAY = re.compile(r"\[\[say:(.*?)\]\]", re.DOTALL)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def section(prompt: str, name: str) -> str | None:
    """The text between ``[The Start of <name>]`` and ``[The End of <name>]`` (stripped), or None."""
    start, end = _SECTION.format(name), _END.format(name)
    i = prompt.find(start)
    if i < 0:
        return None
    j = prompt.find(end, i + len(start))
    return prompt[i + len(start) : j if j >= 0 else len(prompt)].strip()


def quality(answer: str, reference: str | None) -> int:
    """The quality of ``answer`` (see the module docstring)."""
    for name, value in _MARKER.findall(answer):
        if name == "SCORE" and value:
            return int(value)
    if reference is not None:
        if reference.strip() and reference.strip().lower() in answer.lower():
            return 9
        a, r = _NUMBER.findall(answer), _NUMBER.findall(reference)
        return 9 if a and r and float(a[-1]) == float(r[-1]) else 2
    return min(10, 2 + len(answer.split()) // 3)


def _markers(prompt: str) -> set[str]:
    return {name for name, _ in _MARKER.findall(prompt)}


def _dress(payload: dict[str, Any], markers: set[str], retried: bool) -> str:
    text = json.dumps(payload)
    if "PROSE" in markers or ("GARBAGE_ONCE" in markers and not retried):
        return "I would rate it highly."
    if "FENCED" in markers:
        return f"```json\n{text}\n```"
    if "CHATTY" in markers:
        return f"Here is my verdict: {text} I hope this helps {{with braces}}."
    return text


class DeterministicJudge:
    """A deterministic judge model; ``personality`` is ``"consistent"`` or ``"first"`` (module docstring)."""

    def __init__(self, personality: str = "consistent") -> None:
        if personality not in MODEL_NAMES:
            raise ValueError(f"unknown personality {personality!r}")
        self.personality = personality

    def answer(self, prompt: str) -> str:
        """The model's answer to ``prompt``."""
        retried = RETRY_FEEDBACK in prompt
        original = prompt.split(RETRY_FEEDBACK, 1)[0]
        markers = _markers(original)
        reference = section(original, "Reference Answer")
        a, b = section(original, "Assistant A's Answer"), section(original, "Assistant B's Answer")
        if a is not None and b is not None:
            if self.personality == "first":
                winner = "A"
            else:
                qa, qb = quality(a, reference), quality(b, reference)
                winner = "A" if qa > qb else "B" if qb > qa else "tie"
            return _dress({"winner": winner, "reasoning": f"deterministic {self.personality} judge"}, markers, retried)
        answer = section(original, "Assistant's Answer")
        if answer is None:
            said = _SAY.search(prompt)
            return said.group(1) if said else "I do not know."
        overall_range = _OVERALL.search(original)
        lo, hi = (float(x) for x in (overall_range.groups() if overall_range else (0, 10)))
        q = quality(answer, reference)
        if self.personality == "first":
            q = max(int(lo), q - 5)
        overall = hi + 4 if "OUT_OF_SCALE" in markers else q
        scores = {name: max(float(mn), min(float(mx), q)) for name, mn, mx in _DIMENSION.findall(original)}
        payload = {"scores": scores, "overall": overall, "reasoning": f"deterministic {self.personality} judge: quality {q}"}
        return _dress(payload, markers, retried)

    def __call__(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        """Answer a batch; token counts are whitespace-split word counts."""
        out = []
        for request in requests:
            text = self.answer(request.prompt)
            out.append(GenerationResult(text, len(request.prompt.split()), len(text.split())))
        return out
