"""Multiple-choice letter extraction (MMLU-style generative answers).

Rule, in order (source: the cue families of lm-eval's ``multi_choice_regex`` / mmlu_pro
``answer is \\(?([A-J])\\)?`` filters and simple-evals' ``Answer\\s*:\\s*([A-D])``, tightened so that
ordinary words never count):

0. **Markup is read through** (:func:`prepare_text`): the text is NFKC-normalised (full-width ``Ｂ``,
   ``（``, ``：`` become ASCII); markdown emphasis ``*``, ````` and ``_X_``/``__X__`` around a letter, LaTeX
   math delimiters (``$``, ``$$``, ``\\(`` ``\\)``, ``\\[`` ``\\]``), LaTeX text/font commands around their
   argument (``\\text{X}``, ``\\textbf{X}``, ``\\mathrm{X}``, ``\\mathbf{X}``, ``\\emph{X}``, ...) and
   inline HTML tags (``<b>``, ``</strong>``, ...) are removed, so ``"Answer: **B**"``, ``"Final answer: $C$"``,
   ``"The answer is \\(D\\)."`` and a template's echoed ``"Answer: $B"`` all read as a plain letter.
1. **Bare**: if the whole response, with every non-alphanumeric character removed, is a single
   letter of the choice set, that letter is the answer. Only here is case ignored (``"b"`` -> B):
   the response cannot mean anything else.
2. **Explicit cues** (strongest tier): ``answer is/:/= X`` (also ``would/should/will/must be``,
   ``the correct answer is option X``), ``option/choice is X``, ``I choose/pick/select/go with X``,
   ``X is correct`` / ``X is the correct answer``, answers by elimination (``leaving X``, ``which leaves
   (only) X``, ``only X remains``, ``X is (the only one) left``), ``\\boxed{X}``, and the Chinese cues
   ``答案是X`` / ``答案为X`` / ``答案：X`` (also ``正确答案是X``), ``正确的是X`` / ``正确选项是X``, ``选项是X``,
   ``选X`` / ``我选X`` / ``故选X`` (not ``不选X``), ``选项X正确`` / ``X正确`` / ``X是正确的`` / ``X项正确``. The
   letter may be parenthesised. It must be a standalone token (not followed by a letter or digit, so
   ``"answer: Because"`` gives nothing). Upper case is required, except that a lower-case letter is
   accepted after a prefix cue when parenthesised or followed by punctuation/end (``"the answer is b."``),
   which keeps ``"the answer is a cat"`` from reading as A.
3. **Format cues** (weaker tier, upper case only): a standalone ``(X)``, or a line that starts with
   ``X.`` / ``X)`` followed by whitespace, or a line holding just ``X``.
4. Within the strongest tier that has any valid cue, the **last** cue wins ("I think (B) ...
   Final answer: D" -> D). Tiers exist because chain-of-thought answers often restate the options
   (``"A. ...\\nB. ...\\nC. ...\\nD. ..."``) after stating their answer; a plain "last cue" rule would
   then always pick the last listed option.
5. **Rejected letters are never returned.** A letter the text rejects (upper case, standalone, alone or
   in a list such as ``"A and C"``): ``X is/was/seems wrong|incorrect|false|eliminated|ruled out|not correct|
   not the answer``, ``X cannot/can't/couldn't/must not be right|correct|the answer``, ``X can be
   eliminated/ruled out``, ``X, Y are wrong``, ``eliminate/rule out/exclude/discard/reject/not X``, and
   ``排除X`` / ``不选X`` / ``不是X`` / ``X错误`` / ``X不正确`` / ``X不对`` / ``X是错的``. A cue naming a rejected letter
   counts only if it comes **after** the letter's last rejection (the text revised itself: "C seems wrong
   at first, ... so the answer is C"); the rejection in ``"Answer: A is eliminated, leaving B"`` names
   the cue's own letter, so that cue is void and ``leaving B`` decides. When every cue is void the
   result is "no answer", never the rejected letter.

Only letters of the choice set count; a cue naming another letter ("answer is E" with ABCD) is
ignored and the search goes on. No cue -> ``is_correct=False``, ``extracted=None``,
``details={"extraction": "no_answer"}``.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from uep_common.contract.metric_params.answers import MultipleChoiceParams

from .base import NO_ANSWER, MetricInputError, MetricResult, Params, binary_result, read_params
from .registry import register_metric

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
        r"正确\s*(?:的)?\s*(?:选项|答案)?\s*(?:是|为|為|:)\s*:?\s*(?:选项)?\s*",
        r"(?<!不)选(?:择)?\s*",
        r"\\boxed\s*\{\s*",
    )
]
# Explicit cues that run only when the lower-cased text holds one of their hints (they would otherwise try
# every position of long outputs): answers by elimination, and the cues whose letter comes first (upper
# case only: the letter is [A-Z], the words case-insensitive).
_GATED_EXPLICIT: list[tuple[tuple[str, ...], re.Pattern[str]]] = [
    (
        ("leav",),
        re.compile(
            r"\b(?:leaving|leaves|leave)\s+(?:us\s+with\s+|me\s+with\s+)?(?:only\s+|just\s+)?(?:(?:option|choice)\s*)?"
            + _LETTER_TAIL,
            re.IGNORECASE,
        ),
    ),
    (
        ("correct", "right"),
        re.compile(
            r"(?<![A-Za-z0-9])[(\[]?(?P<L>[A-Z])[)\]]?(?![A-Za-z0-9])\s*(?i:(?:is|would\s+be|must\s+be)\s+"
            r"(?:the\s+)?(?:correct|right)(?:\s+(?:answer|option|choice|one))?)(?![A-Za-z])"
        ),
    ),
    (
        ("remain", "left", "surviv"),
        re.compile(
            r"(?<![A-Za-z0-9])(?i:only\s+(?:(?:option|choice)\s+)?)[(\[]?(?P<L>[A-Z])[)\]]?(?![A-Za-z0-9])\s*"
            r"(?i:remains|is\s+left|survives)"
        ),
    ),
    (
        ("remain", "left"),
        re.compile(
            r"(?<![A-Za-z0-9])[(\[]?(?P<L>[A-Z])[)\]]?(?![A-Za-z0-9])\s*"
            r"(?i:remains|is\s+(?:the\s+only\s+(?:one|option|choice)\s+)?left)(?![A-Za-z])"
        ),
    ),
    (
        ("正确", "对"),
        re.compile(
            r"(?<![A-Za-z0-9])(?:选项)?\s*[(\[]?(?P<L>[A-Z])[)\]]?(?![A-Za-z0-9])\s*(?:选项|项)?\s*(?:是|为)?\s*"
            r"(?:正确|对)(?!吗|么|嗎)"
        ),
    ),
]
_LOWERCASE_OK_AFTER = re.compile(r"\s*(?:$|[.,;:!?)\]}。、])")

_FORMAT = [
    re.compile(r"(?<![A-Za-z0-9])\((?P<L>[A-Z])\)"),
    re.compile(r"^[ \t>#\-]*(?P<L>[A-Z])(?:[.)](?=\s|$)|[ \t]*$)", re.MULTILINE),
]


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
_LATEX_WRAPPER = re.compile(
    r"\\(?:text(?:bf|it|tt|rm|sf|up|normal)?|math(?:rm|bf|it|sf|tt|bb|normal)?|emph|underline|bm|boldsymbol|textsc)"
    r"\s*\{([^{}]{0,40})\}"
)
_MATH_DELIMITER = re.compile(r"\\[()\[\]]|\$")
_HTML_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9]{0,9}(?:\s[^<>]{0,200})?/?>")
_UNDERSCORE_EMPHASIS = re.compile(r"(?<![A-Za-z0-9_])_{1,2}([A-Za-z])_{1,2}(?![A-Za-z0-9_])")

_LETTERS = r"[(\[]?[A-Z][)\]]?(?:\s*(?:,|/|&|\band\b|\bor\b|\bnor\b|、|和|与|及|或)\s*[(\[]?[A-Z][)\]]?){0,9}+(?![A-Za-z0-9])"
_ENGLISH_REJECTION_WORDS = (
    "elim", "rul", "exclud", "discard", "reject", "wrong", "incorrect", "false", "invalid", "impossible", "out",
    "not", "'t", "never",
)  # fmt: skip
# (hints, pattern): a pattern runs only when the lower-cased text holds one of its hints.
_REJECTIONS: list[tuple[tuple[str, ...], re.Pattern[str]]] = [
    (
        _ENGLISH_REJECTION_WORDS,
        re.compile(
            # X is wrong / A and C are incorrect / X was ruled out / X is not the answer
            r"(?<![A-Za-z0-9])(?P<Ls>" + _LETTERS + r")\s*(?i:"
            r"(?:is|are|was|were|seems|seem|looks|look|appears|appear|would\s+be|must\s+be)"
            r"\s+(?:also\s+|clearly\s+|definitely\s+|therefore\s+|thus\s+|both\s+|all\s+)?"
            r"(?:eliminated|ruled\s+out|excluded|discarded|rejected|wrong|incorrect|false|invalid|impossible|out"
            r"|not\s+(?:correct|right|true|valid|it|the\s+(?:correct\s+|right\s+)?(?:answer|one|option|choice)))"
            # X cannot be right / X can't be the answer / X couldn't be correct
            r"|(?:can|could|must|should|would|is|are)\s*(?:not|'t|n't|never)\s+(?:be\s+)?"
            r"(?:right|correct|true|valid|it|the\s+(?:correct\s+|right\s+)?(?:answer|one|option|choice))"
            # X can be eliminated
            r"|(?:can|could|should|must)\s+be\s+(?:eliminated|ruled\s+out|excluded|discarded|rejected)"
            r")(?![A-Za-z])"
        ),
    ),
    (
        _ENGLISH_REJECTION_WORDS,
        # eliminate X / rule out A and C / not B
        re.compile(
            r"(?i:\b(?:eliminat(?:e|es|ed|ing)|rul(?:e|es|ed|ing)\s+out|exclud(?:e|es|ed|ing)|discard(?:s|ed|ing)?"
            r"|reject(?:s|ed|ing)?|cross(?:es|ed|ing)?\s+out|not)\s+(?:(?:option|choice)s?\s+)?)(?P<Ls>" + _LETTERS + r")"
        ),
    ),
    (
        ("排除", "不选", "不是", "不应选", "不能选"),
        re.compile(r"(?:排除|不选|不是|不应选|不能选)\s*(?:选项)?\s*(?P<Ls>" + _LETTERS + r")"),
    ),
    (
        ("错", "不正确", "不对", "排除"),
        re.compile(
            r"(?<![A-Za-z0-9])(?P<Ls>" + _LETTERS + r")\s*(?:选项|项)?\s*(?:也|都|亦)?\s*(?:是|为)?\s*"
            r"(?:错误|错的|错|不正确|不对|不是正确|被排除|可以排除|排除)"
        ),
    ),
]
_REJECTED_LETTER = re.compile(r"[A-Z]")


def prepare_text(text: str) -> str:
    """NFKC, read through markup (rule 0 of the module docstring), collapse whitespace runs to one character.

    Collapsing keeps lines (a run containing a newline becomes one newline) and, with every
    ``\\s*`` in the cue patterns matching at most one character, keeps the regexes linear on
    degenerate outputs such as ``"answer is" + " " * 10000``.
    """
    text = unicodedata.normalize("NFKC", text).replace("*", "").replace("`", "")
    if "\\" in text:
        text = _LATEX_WRAPPER.sub(r"\1", _LATEX_WRAPPER.sub(r"\1", text))  # twice: \textbf{\text{B}}
    if "\\" in text or "$" in text:
        text = _MATH_DELIMITER.sub("", text)
    if "<" in text:
        text = _HTML_TAG.sub("", text)
    if "_" in text:
        text = _UNDERSCORE_EMPHASIS.sub(r"\1", text)
    return _WS_RUN.sub(lambda m: "\n" if "\n" in m.group() else " ", text)


def rejected_letters(text: str, lowered: str | None = None) -> dict[str, int]:
    """Letters the (prepared) ``text`` rejects (rule 5), each with the position of its last rejection.
    ``lowered`` is ``text.lower()`` when the caller has it."""
    last: dict[str, int] = {}
    lowered = text.lower() if lowered is None else lowered
    for hints, pattern in _REJECTIONS:
        if not any(hint in lowered for hint in hints):
            continue
        for m in pattern.finditer(text):
            base = m.start("Ls")
            for letter in _REJECTED_LETTER.finditer(m.group("Ls")):
                pos = base + letter.start()
                if pos > last.get(letter.group(), -1):
                    last[letter.group()] = pos
    return last


def _last_cue(text: str, patterns: list[re.Pattern[str]], choices: str, rejected: dict[str, int]) -> tuple[int, str, str] | None:
    """(position, letter, cue text) of the last valid cue among ``patterns``, or None."""
    best: tuple[int, str, str] | None = None
    for pattern in patterns:
        for m in pattern.finditer(text):
            letter = m.group("L")
            if letter.upper() not in choices:
                continue
            if rejected.get(letter.upper(), -1) >= m.start("L"):  # rejected at or after this cue
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
        ``extraction`` (``"bare"``, ``"explicit"``, ``"format"`` or ``"no_answer"``), when a cue
        was found ``cue`` (the matched text, at most 80 characters), and when the text rejects
        letters ``rejected`` (sorted).
    """
    text = prepare_text(output or "")
    bare = re.sub(r"[\W_]+", "", text)
    if len(bare) == 1 and bare.upper() in choices:
        return bare.upper(), {"extraction": "bare", "cue": text.strip()[:80]}
    lowered = text.lower()
    rejected = rejected_letters(text, lowered)
    extra = {"rejected": sorted(rejected)} if rejected else {}
    explicit = _EXPLICIT + [p for hints, p in _GATED_EXPLICIT if any(h in lowered for h in hints)]
    for tier, patterns in (("explicit", explicit), ("format", _FORMAT)):
        found = _last_cue(text, patterns, choices, rejected)
        if found is not None:
            return found[1], {"extraction": tier, "cue": found[2], **extra}
    return None, {"extraction": NO_ANSWER, **extra}


@register_metric
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
    version = "2"
    params_model = MultipleChoiceParams
    reference_schema: dict[str, Any] = {
        "type": "object",
        "properties": {"answer": {"type": ["string", "integer"]}},
        "required": ["answer"],
    }
    source = "cue-aware letter extraction in the spirit of OpenCompass first_option_postprocess and lm-eval mmlu_generative"

    def score(self, output: str, reference: dict[str, Any], params: Params) -> MetricResult:
        """Score one model output; see the class docstring for shapes."""
        choices = read_params(MultipleChoiceParams, params).letters
        expected = _reference_letter(reference, choices)
        letter, details = extract_choice(output, choices)
        details.update(choices=choices, reference=expected)
        return binary_result(self, correct=letter == expected, extracted=letter, details=details)
