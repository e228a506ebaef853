"""Parameter models of the text-comparison metrics: ``exact_match``, ``contains``, ``regex_match``,
``fuzzy_match``, ``sentence_bleu``, ``sentence_chrf``, ``rouge`` and ``token_f1`` (rules in the scorer's
``uep_scorer.metrics`` modules of the same names)."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, StringConstraints, ValidationInfo, field_validator

from .registry import MetricParams, metric_params

MAX_PATTERN_CHARS = 2_000
"""Longest regex a parameter may hold (``pattern``, each of ``regexes_to_ignore``)."""
REGEX_FLAGS = "imsxa"
"""Letters of ``regex_match``'s ``flags``: IGNORECASE, MULTILINE, DOTALL, VERBOSE, ASCII."""
ROUGE_DEFAULT_TYPES = ("rouge1", "rouge2", "rougeL", "rougeLsum")
"""The ROUGE types ``rouge`` reports when ``types`` is not given."""
BLEU_TOKENIZERS = ("none", "zh", "13a", "intl", "char", "ja-mecab", "ko-mecab", "spm", "flores101", "flores200", "spBLEU-1K")
"""The tokenizer names of sacrebleu 2 (``sacrebleu.metrics.bleu.BLEU.TOKENIZERS``; some need extra packages)."""

Threshold100 = Annotated[
    float | None,
    Field(
        None,
        ge=0,
        le=100,
        description="if set, is_correct = score >= threshold (0-100, sacrebleu's scale); unset: is_correct is null",
        json_schema_extra={"unit": "points (0-100)"},
    ),
]
Threshold1 = Annotated[
    float | None,
    Field(
        None,
        ge=0,
        le=1,
        description="if set, is_correct = score >= threshold (0-1); unset: is_correct is null",
        json_schema_extra={"unit": "fraction (0-1)"},
    ),
]


def primary_language(language: str | None) -> str | None:
    """The primary subtag of a language code, lower-cased: ``"zh-CN"``/``"ZH_hans"`` → ``"zh"``; ``None`` or
    ``""`` → ``None``."""
    if not language:
        return None
    return language.replace("_", "-").split("-", 1)[0].strip().lower() or None


def _compiles(pattern: str) -> str:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"not a valid regex ({exc}): {pattern!r}") from None
    return pattern


def _flag_bits(letters: str) -> int:
    bits = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "x": re.VERBOSE, "a": re.ASCII}
    value = 0
    for letter in letters:
        value |= bits.get(letter, 0)
    return value


Regex = Annotated[str, StringConstraints(min_length=1, max_length=MAX_PATTERN_CHARS), AfterValidator(_compiles)]
"""A regex that compiles, of at most :data:`MAX_PATTERN_CHARS` characters."""


@metric_params("exact_match", "contains")
class NormalizationParams(MetricParams):
    """The normalisation applied to output and references before they are compared (``exact_match``,
    ``contains``; ``regex_match`` and ``fuzzy_match`` add their own parameters to these)."""

    ignore_case: bool = Field(False, description="lower-case both sides before comparing")
    ignore_punctuation: bool = Field(False, description="delete ASCII and Unicode punctuation")
    ignore_articles: bool = Field(False, description="delete the English articles a/an/the as whole words")
    ignore_whitespace: bool = Field(True, description="collapse whitespace runs to one space and strip the ends")
    regexes_to_ignore: list[Regex] = Field(
        [],
        max_length=64,
        description="regexes whose matches are deleted first, as lm-evaluation-harness exact_match",
    )
    squad: bool = Field(False, description="use SQuAD v1.1 normalize_answer instead of the flags above")


@metric_params("regex_match")
class RegexMatchParams(NormalizationParams):
    """``regex_match``: a regex searched in the output, and the normalisation of ``exact_match``."""

    pattern: Regex = Field(
        description="regex searched in the output (re.search); its 'answer' group or group 1 is the extracted answer"
    )
    flags: str = Field("", pattern=f"^[{REGEX_FLAGS}]*$", description="regex flags as letters of 'imsxa', e.g. 'i'")

    @field_validator("flags")
    @classmethod
    def _pattern_compiles_with_flags(cls, value: str, info: ValidationInfo) -> str:
        pattern = info.data.get("pattern")
        if pattern is not None:
            try:
                re.compile(pattern, _flag_bits(value))
            except re.error as exc:
                raise ValueError(f"the pattern is not a valid regex under flags {value!r} ({exc})") from None
        return value

    @property
    def regex_flags(self) -> int:
        """``flags`` as the ``re`` module's flag bits."""
        return _flag_bits(self.flags)


@metric_params("fuzzy_match")
class FuzzyMatchParams(NormalizationParams):
    """``fuzzy_match``: rapidfuzz similarity against a threshold, and the normalisation of ``exact_match``."""

    threshold: float = Field(
        90.0,
        ge=0,
        le=100,
        description="minimum similarity for a correct answer, inclusive",
        json_schema_extra={"unit": "points (0-100)"},
    )
    partial: bool = Field(False, description="use fuzz.partial_ratio for references of at least min_reference_length")
    min_reference_length: int = Field(
        20, ge=0, description="shortest reference for which partial applies", json_schema_extra={"unit": "characters"}
    )


@metric_params("sentence_bleu")
class SentenceBleuParams(MetricParams):
    """``sentence_bleu``: sacrebleu's sentence BLEU, with its defaults."""

    tokenize: Literal[BLEU_TOKENIZERS] | None = Field(  # type: ignore[valid-type]
        None, description="sacrebleu tokenizer; unset: from language (zh → zh, ja/ko/th/lo/km/my → char, else 13a)"
    )
    language: str | None = Field(None, max_length=35, description="target language code (BCP 47), e.g. 'zh'")
    lowercase: bool = Field(False, description="lower-case before scoring")
    effective_order: bool = Field(
        True, description="leave n-gram orders absent from the hypothesis out of the mean (as sacrebleu.sentence_bleu)"
    )
    threshold: Threshold100


@metric_params("sentence_chrf")
class SentenceChrfParams(MetricParams):
    """``sentence_chrf``: sacrebleu's sentence chrF (chrF++ with ``word_order`` 2)."""

    word_order: int = Field(0, ge=0, le=6, description="word n-gram order: 0 = chrF, 2 = chrF++")
    char_order: int = Field(6, ge=1, le=12, description="character n-gram order")
    beta: int = Field(2, ge=0, le=10, description="recall weight of the F-score")
    lowercase: bool = Field(False, description="lower-case before scoring")
    language: str | None = Field(
        None, max_length=35, description="accepted for symmetry with sentence_bleu and ignored (chrF needs no tokenizer)"
    )
    threshold: Threshold100


RougeType = Annotated[str, StringConstraints(pattern=r"^(rouge[1-9]|rougeL|rougeLsum)$")]


@metric_params("rouge")
class RougeParams(MetricParams):
    """``rouge``: rouge-score's F-measures, with a script-aware tokenizer."""

    types: list[RougeType] = Field(
        list(ROUGE_DEFAULT_TYPES),
        min_length=1,
        max_length=11,
        description="distinct ROUGE types (rouge1..rouge9, rougeL, rougeLsum); the first gives the score",
    )
    language: str = Field(
        "en", max_length=35, description="language code of the texts; stemming needs 'en'; tokenization handles every script"
    )
    use_stemmer: bool = Field(False, description="Porter-stem English words as rouge-score does")
    threshold: Threshold1

    @field_validator("types")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError(f"ROUGE types must be distinct; got {value!r}")
        return value

    @field_validator("use_stemmer")
    @classmethod
    def _stemmer_is_english(cls, value: bool, info: ValidationInfo) -> bool:
        language = primary_language(info.data.get("language", "en"))
        if value and language not in (None, "en"):
            raise ValueError(f"use_stemmer is for English only (Porter); language is {language!r}")
        return value

    @property
    def primary_language(self) -> str | None:
        """:func:`primary_language` of ``language``."""
        return primary_language(self.language)


@metric_params("token_f1")
class TokenF1Params(MetricParams):
    """``token_f1``: SQuAD's or DROP's token-overlap F1."""

    style: Literal["squad", "drop"] = Field(
        "squad", description="'squad' (SQuAD v1.1 normalisation, token multiset) or 'drop' (DROP number rules, token set)"
    )
    stop_at: list[Annotated[str, StringConstraints(min_length=1, max_length=200)]] = Field(
        [],
        max_length=32,
        description="cut the output at the first occurrence of any of these strings, e.g. ['\\n\\n', 'Question:']",
    )
    split_on: Literal["whitespace", "space"] = Field(
        "whitespace", description="drop style: split tokens on every 'whitespace' or on the 'space' only, as DROP's script"
    )
    threshold: Threshold1
