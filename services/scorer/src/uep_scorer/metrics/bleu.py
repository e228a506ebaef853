"""Sentence-level ``sentence_bleu`` and ``sentence_chrf`` metrics, and corpus-level :func:`corpus_bleu` / :func:`corpus_chrf`.

Everything is computed by sacrebleu (Post 2018, "A Call for Clarity in Reporting BLEU Scores") through
its ``BLEU``/``CHRF`` metric objects, so the numbers equal ``sacrebleu.sentence_bleu`` /
``sacrebleu.sentence_chrf`` / ``sacrebleu.corpus_bleu`` with the same settings; every result carries
sacrebleu's signature string (``nrefs:1|case:mixed|eff:no|tok:zh|smooth:exp|version:2.6.0``), which
states those settings.

**Scale**: scores stay on sacrebleu's 0-100 scale (``score=100.0`` for a perfect match), unlike the
0-1 binary metrics.

**Graded, not binary**: ``is_correct`` is ``None`` (there is no right/wrong, and no error either)
unless a ``threshold`` param is given, in which case ``is_correct = score >= threshold``. Note that
:class:`~uep_scorer.metrics.base.MetricResult` otherwise uses ``is_correct=None`` for "undecidable";
for these metrics ``score`` is always set, which tells the two apart.

**Tokenizer** (BLEU only; chrF works on characters and needs none): param ``tokenize`` (any tokenizer
of sacrebleu 2.6: ``13a``, ``intl``, ``zh``, ``char``, ``none``, and, if their extra dependencies are
installed, ``ja-mecab``, ``ko-mecab``, ``spm``/``flores101``/``flores200``). Without it the tokenizer
follows param ``language`` (ISO 639-1, region subtags ignored: ``zh-CN`` -> ``zh``):

* ``zh`` -> ``zh`` (sacrebleu's Chinese tokenizer: each CJK character a token);
* ``ja``, ``ko``, ``th``, ``lo``, ``km``, ``my`` -> ``char``. sacrebleu's own choice for ``ja``/``ko``
  is ``ja-mecab``/``ko-mecab``, but those need ``mecab-python3``/``ipadic``/``mecab-ko`` which uep does
  not install; the default is ``char`` **always** (never "mecab if importable"), so one config gives
  the same score on every machine. Ask for ``tokenize: ja-mecab`` explicitly where it is installed;
  where it is not, that is a :class:`MetricInputError`.
* anything else, or no language -> ``13a`` (sacrebleu's default, mteval-v13a).

Why it matters: ``"今天天气很好我们去公园散步"`` against itself scores 100.0 with ``zh`` but 0.0 with
``13a``: ``13a`` splits on spaces and punctuation only, so the sentence is one token, there are no 2-,
3- or 4-grams, and without effective order their precisions are 0 -> BLEU 0.

**Defaults are sacrebleu.sentence_bleu's.** The metric is named after ``sacrebleu.sentence_bleu`` and
takes that function's defaults: ``tokenize`` 13a (see the language rule above), ``lowercase`` false,
smoothing ``exp``, and ``effective_order`` **true** (orders with no n-grams in the hypothesis are left out
of the geometric mean), so ``"Blue Lake"`` against ``"Blue Lake"`` scores 100.0, as
``sacrebleu.sentence_bleu("Blue Lake", ["Blue Lake"])`` does (without effective order a two-token
sentence has no 3- or 4-grams and scores 0), and so does the one-token Chinese example above even with
``13a``. ``effective_order: false`` (the default of sacrebleu's ``BLEU`` object and of corpus BLEU) is the
named deviation; the signature says which was used (``eff:yes``/``eff:no``).

**Sentence vs corpus**: corpus BLEU pools n-gram counts over all segments before computing
precisions and the brevity penalty; it is **not** the mean of sentence BLEU scores (the mean of the
per-item ``bleu`` scores that the reporter shows is a different, usually lower, number). Use
:func:`corpus_bleu`/:func:`corpus_chrf` for the corpus figure.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from sacrebleu.metrics.base import Metric as SacreMetric
from sacrebleu.metrics.bleu import BLEU
from sacrebleu.metrics.chrf import CHRF

from .base import TEXT_REFERENCE, MetricInputError, MetricResult
from .normalize import reference_answers

_CHAR_LANGUAGES = frozenset({"ja", "ko", "th", "lo", "km", "my"})
TOKENIZERS: tuple[str, ...] = tuple(BLEU.TOKENIZERS)
"""Tokenizer names sacrebleu knows (some need extra packages)."""


def primary_language(language: Any) -> str | None:
    """``"zh-CN"``/``"ZH_hans"`` -> ``"zh"``; ``None``/``""`` -> ``None``.

    Raises:
        MetricInputError: ``language`` is not a string.
    """
    if language is None or language == "":
        return None
    if not isinstance(language, str):
        raise MetricInputError(f"param 'language' must be a language code such as 'zh'; got {language!r}")
    return language.replace("_", "-").split("-", 1)[0].strip().lower() or None


def default_tokenizer(language: str | None) -> str:
    """The BLEU tokenizer used for ``language`` when ``tokenize`` is not given (rules in the module doc)."""
    lang = primary_language(language)
    if lang == "zh":
        return "zh"
    if lang in _CHAR_LANGUAGES:
        return "char"
    return "13a"


def _tokenizer(tokenize: Any, language: Any) -> str:
    if tokenize is None:
        return default_tokenizer(language)
    if not isinstance(tokenize, str) or tokenize not in TOKENIZERS:
        raise MetricInputError(f"param 'tokenize' must be one of {list(TOKENIZERS)}; got {tokenize!r}")
    primary_language(language)  # validate it even when unused
    return tokenize


def _flag(params: dict[str, Any], name: str, default: bool) -> bool:
    value = params.get(name, default)
    if not isinstance(value, bool):
        raise MetricInputError(f"param {name!r} must be true or false; got {value!r}")
    return value


def _int(params: dict[str, Any], name: str, default: int, low: int, high: int) -> int:
    value = params.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise MetricInputError(f"param {name!r} must be an integer in [{low}, {high}]; got {value!r}")
    return value


def _threshold(params: dict[str, Any]) -> float | None:
    value = params.get("threshold")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 100:
        raise MetricInputError(f"param 'threshold' must be a number in [0, 100] (sacrebleu scale); got {value!r}")
    return float(value)


def _build(factory: Any, what: str) -> Any:
    try:
        return factory()
    except (ImportError, RuntimeError) as exc:  # a tokenizer whose extra dependency is missing
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise MetricInputError(f"{what} is not available here: {first_line}") from exc


# sacrebleu metric objects record the number of references of their last call (it goes into the
# signature), so one object is cached per (settings, number of references): concurrent calls on a
# shared object then always write the same value. Scoring itself keeps no other state.
@lru_cache(maxsize=64)
def _sentence_bleu_object(tokenize: str, lowercase: bool, effective_order: bool, nrefs: int) -> tuple[BLEU, str]:
    bleu = _build(
        lambda: BLEU(tokenize=tokenize, lowercase=lowercase, effective_order=effective_order),
        f"BLEU tokenizer {tokenize!r}",
    )
    SacreMetric.sentence_score(bleu, "", [""] * nrefs)  # fixes num_refs for the signature
    return bleu, bleu.get_signature().format()


@lru_cache(maxsize=64)
def _sentence_chrf_object(char_order: int, word_order: int, beta: int, lowercase: bool, nrefs: int) -> tuple[CHRF, str]:
    chrf = CHRF(char_order=char_order, word_order=word_order, beta=beta, lowercase=lowercase)
    chrf.sentence_score("", [""] * nrefs)
    return chrf, chrf.get_signature().format()


def _graded(metric: Any, score: float, threshold: float | None, details: dict[str, Any]) -> MetricResult:
    details["threshold"] = threshold
    correct = None if threshold is None else score >= threshold
    return MetricResult(metric.name, metric.version, correct, score, None, details)


class SentenceBleu:
    """``sentence_bleu``: sentence-level BLEU (sacrebleu), on sacrebleu's 0-100 scale.

    Reference: ``{"answer": str}`` or ``{"answers": [str, ...]}`` (multi-reference BLEU: n-gram
    matches are clipped by the maximum count over the references, the closest reference length is
    used for the brevity penalty). Params: ``tokenize``, ``language`` (picks the tokenizer when
    ``tokenize`` is absent), ``lowercase`` (default false), ``effective_order`` (default true, as
    ``sacrebleu.sentence_bleu``),
    ``threshold`` (optional, 0-100). See the module docstring for the tokenizer rules.

    Result: ``score`` = BLEU in 0-100; ``is_correct`` = ``None`` (graded metric) unless ``threshold``
    is given; ``extracted`` = ``None``. ``details``: ``signature`` (sacrebleu's), ``tokenize``,
    ``precisions`` (1- to 4-gram, 0-100), ``bp``, ``sys_len``, ``ref_len``, ``threshold``.

    Raises:
        MetricInputError: missing/non-text references, an unknown or unavailable tokenizer, or a
            malformed param (the message names it).
    """

    name = "sentence_bleu"
    version = "2"
    params = {
        "tokenize": f"sacrebleu tokenizer, one of {', '.join(TOKENIZERS)} (default: from language)",
        "language": "target language code; zh -> tokenizer zh, ja/ko/th/lo/km/my -> char, else 13a (default none)",
        "lowercase": "lower-case before scoring (default false)",
        "effective_order": "leave n-gram orders absent from the hypothesis out of the mean (default true, as sacrebleu.sentence_bleu)",
        "threshold": "if set, is_correct = BLEU >= threshold on the 0-100 scale (default none: is_correct None)",
    }
    param_types = {
        "tokenize": "string",
        "language": "string",
        "lowercase": "bool",
        "effective_order": "bool",
        "threshold": "number",
    }
    required_params: tuple[str, ...] = ()
    reference_schema: dict[str, Any] = TEXT_REFERENCE
    source = "sacrebleu BLEU(...).sentence_score (Post 2018); Papineni et al. 2002"

    def score(self, output: str, reference: dict[str, Any], params: dict[str, Any]) -> MetricResult:
        """Score one model output; see the class docstring for shapes."""
        tokenize = _tokenizer(params.get("tokenize"), params.get("language"))
        lowercase = _flag(params, "lowercase", False)
        effective_order = _flag(params, "effective_order", True)
        threshold = _threshold(params)
        refs = reference_answers(reference)
        bleu, signature = _sentence_bleu_object(tokenize, lowercase, effective_order, len(refs))
        # The base-class method: BLEU.sentence_score only adds a log warning about effective_order
        # on every call.
        result = SacreMetric.sentence_score(bleu, output or "", refs)
        details = {
            "signature": signature,
            "tokenize": tokenize,
            "precisions": list(result.precisions),
            "bp": result.bp,
            "sys_len": result.sys_len,
            "ref_len": result.ref_len,
        }
        return _graded(self, result.score, threshold, details)

    def corpus(self, outputs: Sequence[str], references: Sequence[dict[str, Any]], params: dict[str, Any]) -> dict[str, Any]:
        """Corpus-level BLEU over all items (``corpus_bleu``; not the mean of sentence BLEU) and its signature."""
        value, signature = corpus_bleu(
            list(outputs),
            [reference_answers(r) for r in references],
            language=params.get("language"),
            tokenize=params.get("tokenize"),
            lowercase=_flag(params, "lowercase", False),
        )
        return {"corpus_bleu": value, "signature": signature}


class SentenceChrf:
    """``sentence_chrf``: sentence-level chrF (sacrebleu ``CHRF``; Popović 2015), on the 0-100 scale.

    Reference: as ``bleu``. Params: ``word_order`` (default 0; 2 = chrF++), ``char_order`` (default
    6), ``beta`` (default 2), ``lowercase`` (default false), ``threshold`` (optional, 0-100); a
    ``language`` param is accepted and ignored (chrF compares character n-grams, whitespace removed,
    and needs no tokenizer). With several references the best-scoring one counts (sacrebleu).

    Result: ``score`` = chrF 0-100; ``is_correct`` ``None`` unless ``threshold``; ``details``:
    ``signature``, ``threshold``.

    Raises:
        MetricInputError: missing/non-text references or a malformed param.
    """

    name = "sentence_chrf"
    version = "1"
    params = {
        "word_order": "word n-gram order, 0 = chrF, 2 = chrF++ (default 0)",
        "char_order": "character n-gram order (default 6)",
        "beta": "recall weight of the F-score (default 2)",
        "lowercase": "lower-case before scoring (default false)",
        "language": "accepted for symmetry with sentence_bleu and ignored (chrF needs no tokenizer)",
        "threshold": "if set, is_correct = chrF >= threshold on the 0-100 scale (default none: is_correct None)",
    }
    param_types = {
        "word_order": "integer",
        "char_order": "integer",
        "beta": "integer",
        "lowercase": "bool",
        "threshold": "number",
        "language": "string",
    }
    required_params: tuple[str, ...] = ()
    reference_schema: dict[str, Any] = TEXT_REFERENCE
    source = "sacrebleu CHRF(...).sentence_score; Popović 2015 (chrF), 2017 (chrF++)"

    def score(self, output: str, reference: dict[str, Any], params: dict[str, Any]) -> MetricResult:
        """Score one model output; see the class docstring for shapes."""
        word_order = _int(params, "word_order", 0, 0, 6)
        char_order = _int(params, "char_order", 6, 1, 12)
        beta = _int(params, "beta", 2, 0, 10)
        lowercase = _flag(params, "lowercase", False)
        threshold = _threshold(params)
        primary_language(params.get("language"))
        refs = reference_answers(reference)
        chrf, signature = _sentence_chrf_object(char_order, word_order, beta, lowercase, len(refs))
        result = chrf.sentence_score(output or "", refs)
        return _graded(self, result.score, threshold, {"signature": signature})

    def corpus(self, outputs: Sequence[str], references: Sequence[dict[str, Any]], params: dict[str, Any]) -> dict[str, Any]:
        """Corpus-level chrF over all items (``corpus_chrf``) and its signature."""
        value, signature = corpus_chrf(list(outputs), [reference_answers(r) for r in references])
        return {"corpus_chrf": value, "signature": signature}


def _reference_streams(hypotheses: Sequence[str], references_lists: Sequence[Sequence[str]]) -> list[list[str | None]]:
    """Per-hypothesis reference lists -> sacrebleu's reference streams (``None`` pads missing ones)."""
    if isinstance(hypotheses, str) or isinstance(references_lists, str):
        raise MetricInputError("hypotheses and references_lists must be sequences, not strings")
    if len(hypotheses) != len(references_lists):
        raise MetricInputError(
            f"{len(hypotheses)} hypotheses but {len(references_lists)} reference lists; one list per hypothesis"
        )
    if not hypotheses:
        raise MetricInputError("corpus scores need at least one hypothesis")
    width = 0
    for i, refs in enumerate(references_lists):
        if isinstance(refs, str) or not refs or not all(isinstance(r, str) for r in refs):
            raise MetricInputError(f"references_lists[{i}] must be a non-empty list of strings")
        width = max(width, len(refs))
    return [[refs[k] if k < len(refs) else None for refs in references_lists] for k in range(width)]


def corpus_bleu(
    hypotheses: Sequence[str],
    references_lists: Sequence[Sequence[str]],
    language: str | None = None,
    tokenize: str | None = None,
    lowercase: bool = False,
) -> tuple[float, str]:
    """Corpus-level BLEU (0-100) and sacrebleu's signature.

    Args:
        hypotheses: one output per segment.
        references_lists: **per segment**, its list of references (``[["ref 1a", "ref 1b"], ["ref 2"]]``);
            this is the transpose of sacrebleu's reference streams. Segments may have different numbers
            of references.
        language: as the ``bleu`` metric's ``language`` param (picks the tokenizer when ``tokenize`` is None).
        tokenize: as the ``bleu`` metric's ``tokenize`` param: a sacrebleu tokenizer name.
        lowercase: lower-case before scoring.

    Equals ``sacrebleu.corpus_bleu(hypotheses, streams, tokenize=...)`` (effective order off). Not the
    mean of sentence BLEU.

    Raises:
        MetricInputError: mismatched lengths, empty reference lists, or a bad tokenizer/language.
    """
    streams = _reference_streams(hypotheses, references_lists)
    tok = _tokenizer(tokenize, language)
    bleu = _build(lambda: BLEU(tokenize=tok, lowercase=lowercase), f"BLEU tokenizer {tok!r}")
    result = bleu.corpus_score(list(hypotheses), streams)
    return result.score, bleu.get_signature().format()


def corpus_chrf(
    hypotheses: Sequence[str],
    references_lists: Sequence[Sequence[str]],
    word_order: int = 0,
    lowercase: bool = False,
) -> tuple[float, str]:
    """Corpus-level chrF (0-100; ``word_order=2`` gives chrF++) and sacrebleu's signature.

    ``references_lists`` is per segment, as in :func:`corpus_bleu`. Equals ``sacrebleu.corpus_chrf``;
    not the mean of sentence chrF.
    """
    streams = _reference_streams(hypotheses, references_lists)
    chrf = CHRF(word_order=word_order, lowercase=lowercase)
    result = chrf.corpus_score(list(hypotheses), streams)  # type: ignore[arg-type]  # sacrebleu takes None pads; its annotation omits them
    return result.score, chrf.get_signature().format()
