"""``rouge``: ROUGE-N / ROUGE-L / ROUGE-Lsum F-measure via Google's ``rouge_score`` package, for any script.

Scoring is ``rouge_score.rouge_scorer.RougeScorer`` (Lin 2004; google-research/rouge), with two
changes of input handling:

1. **Tokenizer** (:class:`MultilingualTokenizer`). rouge-score's default tokenizer lower-cases, then
   replaces every character outside ``[a-z0-9]`` by a space, so Chinese, Japanese, Thai... text
   vanishes (every CJK output scores 0 against every CJK reference). Ours lower-cases too, then:

   * scripts written **without spaces** (Han ideographs, Hiragana, Katakana, Hangul, Thai, Lao, Khmer,
     Myanmar, Bopomofo, and the ideographic ``々〆〇``) give **one token per character**, together
     with any combining marks that follow it (a Thai vowel sign stays on its consonant). Korean is
     included: the "CJK" choice gives one token per syllable block;
   * every other letter or digit run (Latin, Greek, Cyrillic, Arabic, Devanagari with its combining
     vowel signs, ...) is **one word token**; anything else (punctuation, symbols, ``_``, spaces)
     separates tokens;
   * with ``use_stemmer: true`` (English only), tokens of more than 3 characters made of ``[a-z0-9]``
     are Porter-stemmed, exactly as rouge-score does.

   On ASCII text this gives exactly rouge-score's default tokens, hence the same scores. Deliberate
   difference: non-ASCII letters in spaced scripts are kept (``"café"`` is one token; rouge-score
   makes it ``"caf"``) and non-Latin words are kept rather than dropped.

2. **Sentences for rougeLsum.** rougeLsum (summary-level LCS) needs one sentence per line; rouge-score
   only splits on ``"\\n"`` (its ``split_summaries`` needs nltk's punkt data). When ``rougeLsum`` is
   requested both texts are first split into sentences by :func:`split_sentences`: after ``. ! ?``
   followed by whitespace, after ``。！？`` (and the half-width ``｡``) anywhere, and at
   line breaks. This changes no token, so the other types are unaffected.

Params: ``types`` (default ``["rouge1", "rouge2", "rougeL", "rougeLsum"]``; ``rouge1``-``rouge9``,
``rougeL``, ``rougeLsum``), ``language`` (default ``"en"``; only gates stemming),
``use_stemmer`` (default false), ``threshold`` (optional, 0-1). ``score`` is the F-measure (0-1) of
the **first** type; ``is_correct`` is ``None`` (graded metric) unless ``threshold`` is given
(``is_correct = score >= threshold``). With several references each type takes the reference with
the best F-measure for that type (rouge-score's ``score_multi``).
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from typing import Any

from uep_common.contract.metric_params.text import ROUGE_DEFAULT_TYPES, RougeParams

from .base import TEXT_REFERENCE, MetricResult, Params, read_params
from .normalize import reference_answers
from .registry import register_metric

DEFAULT_TYPES = ROUGE_DEFAULT_TYPES

# Blocks whose text is written without spaces between words: one token per character.
_UNSPACED_RANGES = (
    (0x0E00, 0x0EFF),  # Thai, Lao
    (0x1000, 0x109F),  # Myanmar
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x1780, 0x17FF),  # Khmer
    (0x2E80, 0x2FDF),  # CJK radicals, Kangxi radicals
    (0x3005, 0x3007),  # 々 〆 〇
    (0x3021, 0x3029),  # Hangzhou numerals
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x3100, 0x312F),  # Bopomofo
    (0x3130, 0x318F),  # Hangul compatibility Jamo
    (0x31A0, 0x31FF),  # Bopomofo extended, Katakana phonetic extensions
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xA960, 0xA97F),  # Hangul Jamo extended-A
    (0xAC00, 0xD7FF),  # Hangul syllables, Jamo extended-B
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0xFF66, 0xFFDC),  # half-width Katakana and Hangul
    (0x1B000, 0x1B16F),  # Kana supplement/extended
    (0x20000, 0x3134F),  # CJK extensions B-G, compatibility supplement
)


def _char_class(codepoints: list[int]) -> str:
    """A regex character class body for ``codepoints`` (sorted), as ranges."""
    parts: list[str] = []
    start: int | None = None
    prev: int | None = None
    for cp in codepoints + [-1]:
        if prev is not None and cp == prev + 1:
            prev = cp
            continue
        if start is not None:
            assert prev is not None  # set together with start
            parts.append(re.escape(chr(start)) + ("" if prev == start else "-" + re.escape(chr(prev))))
        start = prev = cp
    return "".join(parts)


def _build_token_regex() -> re.Pattern[str]:
    unspaced_letters: list[int] = []
    for low, high in _UNSPACED_RANGES:
        unspaced_letters.extend(cp for cp in range(low, high + 1) if unicodedata.category(chr(cp))[0] in "LN")
    marks = [cp for cp in range(0x10000) if unicodedata.category(chr(cp))[0] == "M"]  # BMP marks
    unspaced = _char_class(unspaced_letters)
    unspaced_all = "".join(re.escape(chr(low)) + "-" + re.escape(chr(high)) for low, high in _UNSPACED_RANGES)
    mark = _char_class(marks)
    # A spaced-script word starts with a letter/digit (not "_") outside the unspaced blocks and
    # continues with such characters or combining marks.
    word_char = rf"[^\W_{unspaced_all}]"
    return re.compile(rf"{word_char}(?:{word_char}|[{mark}])*|[{unspaced}][{mark}]*")


_TOKEN = _build_token_regex()
_ASCII_WORD = re.compile(r"[a-z0-9]+")


class MultilingualTokenizer:
    """Tokenizer object for ``RougeScorer(tokenizer=...)``; rules in the module docstring.

    ``MultilingualTokenizer().tokenize("今天天气很好, OK")`` -> ``["今", "天", "天", "气", "很", "好", "ok"]``.
    Stateless apart from the (thread-safe) stemmer; safe to share.
    """

    def __init__(self, use_stemmer: bool = False) -> None:
        if use_stemmer:
            from nltk.stem import porter  # rouge-score's own stemmer dependency; imported on use (nltk is slow to import)

            self._stemmer = porter.PorterStemmer()
        else:
            self._stemmer = None

    def tokenize(self, text: str) -> list[str]:
        """Lower-case ``text`` and split it into word / character tokens."""
        tokens = _TOKEN.findall(text.lower())
        if self._stemmer is not None:
            stem = self._stemmer.stem
            tokens = [stem(t) if len(t) > 3 and _ASCII_WORD.fullmatch(t) else t for t in tokens]
        return tokens


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？｡])\s*|\s*\n\s*")
_MAY_END = re.compile(r"[.!?。！？｡\n]")


def split_sentences(text: str) -> str:
    """``text`` with one sentence per line (the form rougeLsum needs); rules in the module docstring.

    ``split_sentences("A b. C d!  E")`` -> ``"A b.\\nC d!\\nE"``; ``"今天好。明天"`` -> ``"今天好。\\n明天"``.
    """
    if not _MAY_END.search(text):  # one sentence: unchanged (no token changes either way)
        return text
    return "\n".join(s for s in (part.strip() for part in _SENTENCE_END.split(text)) if s)


@lru_cache(maxsize=32)
def _scorer(types: tuple[str, ...], use_stemmer: bool) -> Any:
    # imported on first use: rouge-score pulls in nltk (~3 s), which every scorer start-up would pay
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(list(types), tokenizer=MultilingualTokenizer(use_stemmer))


@register_metric
class Rouge:
    """``rouge``: ROUGE F-measure (0-1) of the first requested type; all types in ``details``.

    Reference: ``{"answer": str}`` or ``{"answers": [...]}``. Params: ``types``, ``language``,
    ``use_stemmer``, ``threshold`` (see the module docstring). Result: ``score`` = F of
    ``types[0]``; ``is_correct`` ``None`` unless ``threshold``; ``extracted`` ``None``. ``details``:
    for each type ``{"precision", "recall", "fmeasure"}`` under its name, flat ``<type>_f`` values
    (reported as sub-metrics for the default types), ``types``, ``tokenizer``, ``use_stemmer``,
    ``threshold``.

    Raises:
        MetricInputError: missing/non-text references, bad ``types``/``threshold``, a non-bool
            ``use_stemmer``, or ``use_stemmer`` with a language other than English.
    """

    name = "rouge"
    version = "1"
    params_model = RougeParams
    reference_schema: dict[str, Any] = TEXT_REFERENCE
    source = "google-research rouge_score RougeScorer (Lin 2004), with a script-aware tokenizer and sentence split"
    submetrics = tuple(f"{t}_f" for t in DEFAULT_TYPES)
    """Detail keys reported as metrics of their own (``None`` for a type that was not requested)."""

    def score(self, output: str, reference: dict[str, Any], params: Params) -> MetricResult:
        """Score one model output; see the class docstring for shapes."""
        p = read_params(RougeParams, params)
        types, use_stemmer, threshold = tuple(p.types), p.use_stemmer, p.threshold
        refs = reference_answers(reference)

        prediction = output or ""
        if "rougeLsum" in types:
            prediction = split_sentences(prediction)
            refs = [split_sentences(r) for r in refs]
        scorer = _scorer(types, use_stemmer)
        scores = scorer.score(refs[0], prediction) if len(refs) == 1 else scorer.score_multi(refs, prediction)

        details: dict[str, Any] = {}
        for t in types:
            s = scores[t]
            details[t] = {"precision": s.precision, "recall": s.recall, "fmeasure": s.fmeasure}
            details[f"{t}_f"] = s.fmeasure
        details.update(types=list(types), tokenizer="multilingual-v1", use_stemmer=use_stemmer, threshold=threshold)
        value = scores[types[0]].fmeasure
        correct = None if threshold is None else value >= threshold
        return MetricResult(self.name, self.version, correct, value, None, details)
