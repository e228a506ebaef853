"""Multiple-choice letter extraction (MMLU-style generative answers).

Rule, in order (source: the cue families of lm-eval's ``multi_choice_regex`` / mmlu_pro
``answer is \\(?([A-J])\\)?`` filters and simple-evals' ``Answer\\s*:\\s*([A-D])``, tightened so that
ordinary words never count):

0. The text is NFKC-normalised (full-width ``Ｂ``, ``（``, ``：`` become ASCII) and markdown emphasis
   characters ``*`` and `````` are removed, so ``"Answer: **B**"`` reads ``"Answer: B"``.
1. **Bare**: if the whole response, with every non-alphanumeric character removed, is a single
   letter of the choice set, that letter is the answer. Only here is case ignored (``"b"`` -> B):
   the response cannot mean anything else.
2. **Explicit cues** (strongest tier): ``answer is/:/= X`` (also ``would/should/will/must be``,
   ``the correct answer is option X``), ``option/choice is X``, ``I choose/pick/select/go with X``,
   ``答案是X`` / ``答案为X`` / ``答案：X``, ``选项是X``, ``选X`` (not ``不选X``), ``\\boxed{X}``. The letter may
   be parenthesised. It must be a standalone token (not followed by a letter or digit, so
   ``"answer: Because"`` gives nothing). Upper case is required, except that a lower-case letter is
   accepted when parenthesised or followed by punctuation/end (``"the answer is b."``), which keeps
   ``"the answer is a cat"`` from reading as A.
3. **Format cues** (weaker tier, upper case only): a standalone ``(X)``, or a line that starts with
   ``X.`` / ``X)`` followed by whitespace, or a line holding just ``X``.
4. Within the strongest tier that has any valid cue, the **last** cue wins ("I think (B) ...
   Final answer: D" -> D). Tiers exist because chain-of-thought answers often restate the options
   (``"A. ...\\nB. ...\\nC. ...\\nD. ..."``) after stating their answer; a plain "last cue" rule would
   then always pick the last listed option.

Only letters of the choice set count; a cue naming another letter ("answer is E" with ABCD) is
ignored and the search goes on. No cue -> ``is_correct=False``, ``extracted=None``,
``details={"extraction": "no_answer"}``.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from .base import MetricInputError, MetricResult, binary_result

_LETTER_TAIL = r"[(\[]?\s*(?P<L>[a-z])(?![a-z0-9])[)\]]?"
_BE = r"(?:is|would\s+be|should\s+be|will\s+be|must\s+be)"

_EXPLICIT = [
    re.compile(p + _LETTER_TAIL, re.IGNORECASE)
    for p in (
        r"\banswer\s*(?:" + _BE + r"|[:=])\s*:?\s*(?:(?:option|choice|letter)\s*)?",
        r"\b(?:option|choice)\s*(?:" + _BE + r"|:)\s*:?\s*",
        r"\bI\s*(?:'d|'ll|\s+would|\s+will)?\s+(?:choose|pick|select|go\s+with)\s+(?:(?:option|choice)\s*)?",
        r"答案\s*(?:应该是|应为|应是|是|为|為|:)?\s*:?\s*(?:选项)?\s*",
        r"选项\s*(?:是|为|:)\s*",
        r"(?<!不)选(?:择)?\s*",
        r"\\boxed\s*\{\s*(?:\\text(?:bf)?\s*\{)?\s*",
    )
]
_LOWERCASE_OK_AFTER = re.compile(r"\s*(?:$|[.,;:!?)\]}。、])")

_FORMAT = [
    re.compile(r"(?<![A-Za-z0-9])\((?P<L>[A-Z])\)"),
    re.compile(r"^[ \t>#\-]*(?P<L>[A-Z])(?:[.)](?=\s|$)|[ \t]*$)", re.MULTILINE),
]


def _choices(params: dict[str, Any]) -> str:
    raw = params.get("choices", "ABCD")
    letters = "".join(raw) if isinstance(raw, (list, tuple)) else str(raw)
    letters = letters.upper()
    if not letters or not all("A" <= c <= "Z" for c in letters) or len(set(letters)) != len(letters):
        raise MetricInputError(f"choices must be distinct letters A-Z, e.g. 'ABCD'; got {raw!r}")
    return letters


def _reference_letter(reference: dict[str, Any], choices: str) -> str:
    if "answer" not in reference:
        raise MetricInputError("multiple-choice reference needs an 'answer' key, e.g. {'answer': 'B'}")
    answer = reference["answer"]
    if isinstance(answer, int) and not isinstance(answer, bool):  # 0-based index, as in MMLU datasets
        if not 0 <= answer < len(choices):
            raise MetricInputError(f"answer index {answer} outside choices {choices!r}")
        return choices[answer]
    letter = str(answer).strip().strip("()[]").strip().upper()
    if len(letter) != 1 or letter not in choices:
        raise MetricInputError(f"reference answer {answer!r} is not one of the choices {choices!r}")
    return letter


_WS_RUN = re.compile(r"\s+")


def _prepare(text: str) -> str:
    """NFKC, drop markdown emphasis, collapse whitespace runs to one character.

    Collapsing keeps lines (a run containing a newline becomes one newline) and, with every
    ``\\s*`` in the cue patterns matching at most one character, keeps the regexes linear on
    degenerate outputs such as ``"answer is" + " " * 10000``.
    """
    text = unicodedata.normalize("NFKC", text).replace("*", "").replace("`", "")
    return _WS_RUN.sub(lambda m: "\n" if "\n" in m.group() else " ", text)


def _last_cue(text: str, patterns: list[re.Pattern[str]], choices: str) -> tuple[int, str, str] | None:
    """(position, letter, cue text) of the last valid cue among ``patterns``, or None."""
    best: tuple[int, str, str] | None = None
    for pattern in patterns:
        for m in pattern.finditer(text):
            letter = m.group("L")
            if letter.upper() not in choices:
                continue
            # Only explicit cues match lower case (re.IGNORECASE); accept it before punctuation/end.
            if letter.islower() and not _LOWERCASE_OK_AFTER.match(text, m.end("L")):
                continue
            if best is None or m.start("L") > best[0]:
                best = (m.start("L"), letter.upper(), m.group(0).strip()[-80:])
    return best


def extract_choice(output: str, choices: str = "ABCD") -> tuple[str | None, dict[str, Any]]:
    """Extract the chosen letter from ``output`` under the module's rules.

    Args:
        output: the model response.
        choices: the valid letters, upper case, e.g. ``"ABCD"``.

    Returns:
        ``(letter, details)``; ``letter`` is ``None`` when no valid cue exists. ``details`` has
        ``extraction`` (``"bare"``, ``"explicit"``, ``"format"`` or ``"no_answer"``) and, when a cue
        was found, ``cue`` (the matched text, at most 80 characters).
    """
    text = _prepare(output or "")
    bare = re.sub(r"[\W_]+", "", text)
    if len(bare) == 1 and bare.upper() in choices:
        return bare.upper(), {"extraction": "bare", "cue": text.strip()[:80]}
    for tier, patterns in (("explicit", _EXPLICIT), ("format", _FORMAT)):
        found = _last_cue(text, patterns, choices)
        if found is not None:
            return found[1], {"extraction": tier, "cue": found[2]}
    return None, {"extraction": "no_answer"}


class MultipleChoiceLetter:
    """``multiple_choice_letter``: the extracted option letter equals the reference letter.

    Reference: ``{"answer": "B"}`` (case-insensitive, ``"(B)"`` accepted) or ``{"answer": 1}`` as a
    0-based index into the choices. Params: ``{"choices": "ABCD"}`` (default ``"ABCD"``; a list of
    letters also works, e.g. ``list("ABCDEFGHIJ")`` for MMLU-Pro). ``details`` carries the
    extraction tier, the cue text, the choices and the reference letter.

    Raises:
        MetricInputError: malformed choices, or a reference that is not one of the choices.
    """

    name = "multiple_choice_letter"
    version = "1"
    params = {"choices": "the option letters, as a string or list (default 'ABCD')"}
    param_types = {"choices": "letters"}
    required_params: tuple[str, ...] = ()
    source = "cue-aware letter extraction in the spirit of OpenCompass first_option_postprocess and lm-eval mmlu_generative"

    def score(self, output: str, reference: dict[str, Any], params: dict[str, Any]) -> MetricResult:
        """Score one model output; see the class docstring for shapes."""
        choices = _choices(params)
        expected = _reference_letter(reference, choices)
        letter, details = extract_choice(output, choices)
        details.update(choices=choices, reference=expected)
        return binary_result(self, correct=letter == expected, extracted=letter, details=details)
