"""Fidelity: our text metrics equal the reference libraries called directly (to 1e-9).

* sentence BLEU / chrF vs ``sacrebleu.sentence_bleu`` / ``sacrebleu.sentence_chrf`` (same tokenizer);
* corpus BLEU / chrF vs ``sacrebleu.corpus_bleu`` / ``sacrebleu.corpus_chrf``;
* ROUGE vs ``rouge_score.rouge_scorer.RougeScorer`` with its default tokenizer, on English text
  (where that tokenizer is right); our tokenizer gives the same tokens there;
* ``exact_match`` with ``squad: true`` vs SQuAD v1.1's ``normalize_answer`` copied below.
"""

import logging
import re
import string

import pytest
import sacrebleu
from rouge_score import rouge_scorer
from rouge_score import tokenize as rouge_tokenize

from uep_scorer.metrics import get_metric
from uep_scorer.metrics.bleu import corpus_bleu, corpus_chrf
from uep_scorer.metrics.rouge import DEFAULT_TYPES, MultilingualTokenizer, split_sentences

EN = [
    "The cat sat on the mat.",
    "the cat was sitting on the mat",
    "A quick brown fox jumps over the lazy dog!",
    "The quick brown fox jumped over lazy dogs.",
    "It costs $3.50, doesn't it?",
    "It costs 3.50 dollars, does it not?",
    "Paris is the capital of France. It is a large city.",
    "The capital of France is Paris. Paris is big.",
    "Hello, world!!! ... (yes)",
    "hello world yes",
    "Running runners ran quickly; they were running.",
    "The runner runs quickly and ran fast.",
    "In 1969, Apollo 11 landed on the Moon.",
    "Apollo 11 landed on the moon in 1969.",
    "Don't stop -- believe it: \"quotes\" & 'more'.",
    "dont stop believing quotes and more",
    "One. Two! Three? Four",
    "one two three four five",
    "Machine translation quality is often measured with BLEU.",
    "BLEU is often used to measure machine translation quality.",
    "The the the the the.",
    "the",
    "Newlines\nsplit\nsentences here.",
    "Newlines split sentences\nhere.",
]
ZH = [
    "今天天气很好我们去公园散步",
    "今天天气不错，我们去公园散步吧。",
    "我喜欢吃苹果。",
    "我不喜欢吃香蕉！",
    "机器翻译的质量通常用BLEU来衡量。",
    "BLEU常用于衡量机器翻译质量",
    "北京是中国的首都。上海是最大的城市。",
    "中国的首都是北京",
    "你好，世界！",
    "你好世界",
]
OTHER = ["", "", "...", "!!!", "   ", "a", "Hello 世界, 你好 world!", "hello world 你好世界", "123", "1 2 3"]

PAIRS = (
    list(zip(EN[::2], EN[1::2], strict=True))
    + list(zip(ZH[::2], ZH[1::2], strict=True))
    + list(zip(OTHER[::2], OTHER[1::2], strict=True))
)
PAIRS += [(b, a) for a, b in PAIRS]  # both directions
PAIRS += [(a, a) for a in EN[:4] + ZH[:2]] + [("", "The cat."), ("The cat.", "")]
EN_PAIRS = [(h, r) for h, r in PAIRS if h.isascii() and r.isascii()]

BLEU = get_metric("sentence_bleu")
CHRF = get_metric("sentence_chrf")
ROUGE = get_metric("rouge")
EM = get_metric("exact_match")


def test_enough_varied_inputs():
    assert len(PAIRS) >= 50 and len(EN_PAIRS) >= 30


@pytest.fixture(autouse=True)
def quiet_sacrebleu():
    # sacrebleu.sentence_bleu(use_effective_order=False) logs a recommendation on every call.
    logger = logging.getLogger("sacrebleu")
    level = logger.level
    logger.setLevel(logging.ERROR)
    yield
    logger.setLevel(level)


@pytest.mark.parametrize("tokenize", ["13a", "zh", "char", "intl", "none"])
@pytest.mark.parametrize("effective_order", [False, True])
def test_sentence_bleu_equals_sacrebleu(tokenize, effective_order):
    for hyp, ref in PAIRS:
        ours = BLEU.score(hyp, {"answer": ref}, {"tokenize": tokenize, "effective_order": effective_order})
        theirs = sacrebleu.sentence_bleu(hyp, [ref], tokenize=tokenize, use_effective_order=effective_order)
        assert ours.score == pytest.approx(theirs.score, abs=1e-9), (hyp, ref)


def test_sentence_bleu_language_default_and_multi_reference():
    refs = [r for _, r in PAIRS]
    for i, (hyp, ref) in enumerate(PAIRS):
        # The metric's defaults are sacrebleu.sentence_bleu's (effective order on).
        ours = BLEU.score(hyp, {"answer": ref}, {"language": "zh"})
        assert ours.score == pytest.approx(sacrebleu.sentence_bleu(hyp, [ref], tokenize="zh").score, abs=1e-9)
        two = [ref, refs[(i + 3) % len(refs)]]
        ours = BLEU.score(hyp, {"answers": two}, {"tokenize": "13a"})
        theirs = sacrebleu.sentence_bleu(hyp, two, tokenize="13a")
        assert ours.score == pytest.approx(theirs.score, abs=1e-9)


@pytest.mark.parametrize("word_order", [0, 2])
def test_sentence_chrf_equals_sacrebleu(word_order):
    refs = [r for _, r in PAIRS]
    for i, (hyp, ref) in enumerate(PAIRS):
        ours = CHRF.score(hyp, {"answer": ref}, {"word_order": word_order})
        theirs = sacrebleu.sentence_chrf(hyp, [ref], word_order=word_order)
        assert ours.score == pytest.approx(theirs.score, abs=1e-9), (hyp, ref)
        two = [ref, refs[(i + 5) % len(refs)]]
        ours = CHRF.score(hyp, {"answers": two}, {"word_order": word_order})
        assert ours.score == pytest.approx(sacrebleu.sentence_chrf(hyp, two, word_order=word_order).score, abs=1e-9)


@pytest.mark.parametrize("tokenize", ["13a", "zh", "char"])
def test_corpus_bleu_and_chrf_equal_sacrebleu(tokenize):
    hyps = [h for h, _ in PAIRS]
    refs = [r for _, r in PAIRS]
    score, signature = corpus_bleu(hyps, [[r] for r in refs], tokenize=tokenize)
    theirs = sacrebleu.corpus_bleu(hyps, [refs], tokenize=tokenize)
    assert score == pytest.approx(theirs.score, abs=1e-9)
    assert f"tok:{tokenize}" in signature and "nrefs:1" in signature
    # Variable numbers of references per segment (sacrebleu streams padded with None).
    second = [refs[(i + 7) % len(refs)] if i % 2 else None for i in range(len(refs))]
    ours_multi, sig = corpus_bleu(
        hyps, [[r] if s is None else [r, s] for r, s in zip(refs, second, strict=True)], tokenize=tokenize
    )
    assert ours_multi == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs, second], tokenize=tokenize).score, abs=1e-9)
    assert "nrefs:var" in sig
    chrf, _ = corpus_chrf(hyps, [[r] for r in refs])
    assert chrf == pytest.approx(sacrebleu.corpus_chrf(hyps, [refs]).score, abs=1e-9)


def test_language_zh_corpus_uses_zh_tokenizer():
    hyps, refs = ZH[::2], ZH[1::2]
    score, _ = corpus_bleu(hyps, [[r] for r in refs], language="zh")
    assert score == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs], tokenize="zh").score, abs=1e-9)


# --- ROUGE ------------------------------------------------------------------------------------------


def test_our_tokenizer_equals_rouge_score_default_on_english():
    for stem in (False, True):
        ours = MultilingualTokenizer(use_stemmer=stem)
        stemmer = rouge_scorer.tokenizers.DefaultTokenizer(use_stemmer=stem)
        for text in EN + OTHER[:6]:
            assert ours.tokenize(text) == stemmer.tokenize(text) == rouge_tokenize.tokenize(text, stemmer._stemmer), text


@pytest.mark.parametrize("use_stemmer", [False, True])
def test_rouge_equals_rouge_score_on_english(use_stemmer):
    reference = rouge_scorer.RougeScorer(list(DEFAULT_TYPES), use_stemmer=use_stemmer)
    plain = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=use_stemmer)
    for hyp, ref in EN_PAIRS:
        ours = ROUGE.score(hyp, {"answer": ref}, {"use_stemmer": use_stemmer})
        # rougeLsum needs one sentence per line: the reference scorer gets our sentence split.
        theirs = reference.score(split_sentences(ref), split_sentences(hyp))
        # Without rougeLsum the raw texts go in unchanged (splitting changes no token).
        raw = plain.score(ref, hyp)
        for t in DEFAULT_TYPES:
            for field in ("precision", "recall", "fmeasure"):
                assert ours.details[t][field] == pytest.approx(getattr(theirs[t], field), abs=1e-9), (t, hyp, ref)
                if t in raw:
                    assert ours.details[t][field] == pytest.approx(getattr(raw[t], field), abs=1e-9)
        assert ours.score == pytest.approx(theirs["rouge1"].fmeasure, abs=1e-9)


def test_rouge_multi_reference_equals_score_multi():
    reference = rouge_scorer.RougeScorer(["rouge1", "rougeL"])
    for i, (hyp, ref) in enumerate(EN_PAIRS):
        other = EN_PAIRS[(i + 3) % len(EN_PAIRS)][1]
        ours = ROUGE.score(hyp, {"answers": [ref, other]}, {"types": ["rouge1", "rougeL"]})
        theirs = reference.score_multi([ref, other], hyp)
        for t in ("rouge1", "rougeL"):
            assert ours.details[t]["fmeasure"] == pytest.approx(theirs[t].fmeasure, abs=1e-9)


# --- exact_match vs SQuAD ---------------------------------------------------------------------------
# Reference copy of SQuAD v1.1's official evaluation script (evaluate-v1.1.py, Rajpurkar et al. 2016,
# https://rajpurkar.github.io/SQuAD-explorer/; mirrored in allenai/bi-att-flow squad/evaluate-v1.1.py).


def normalize_answer(s):
    """Lower text and remove punctuation, articles and extra whitespace."""

    def remove_articles(text):
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    def lower(text):
        return text.lower()

    return white_space_fix(remove_articles(remove_punc(lower(s))))


def exact_match_score(prediction, ground_truth):
    return normalize_answer(prediction) == normalize_answer(ground_truth)


def metric_max_over_ground_truths(metric_fn, prediction, ground_truths):
    return max(metric_fn(prediction, gt) for gt in ground_truths)


SQUAD_EXTRA = [
    ("The  Cat!", "cat"),
    ("an Apple.", "apple"),
    ("Theatre", "atre"),
    ("THE END", "end"),
    ("U.S.A.", "usa"),
    ("Denver Broncos", "Denver  Broncos "),
    ("l'été", "lété"),
    ("Ａ cat", "cat"),
]


def test_exact_match_squad_equals_squad_script():
    # Golds whose official normal form is empty are left out: uep compares them in a relaxed form
    # (tests/scorer/test_extraction_faults.py), where the script would match every empty prediction.
    texts = [t for pair in PAIRS + SQUAD_EXTRA for t in pair if normalize_answer(t)]
    for i, (hyp, ref) in enumerate(PAIRS + SQUAD_EXTRA):
        if not normalize_answer(ref):
            continue
        ours = EM.score(hyp, {"answer": ref}, {"squad": True})
        assert ours.is_correct == exact_match_score(hyp, ref), (hyp, ref)
        assert ours.extracted == normalize_answer(hyp)
        golds = [ref, texts[(i * 7) % len(texts)]]
        ours = EM.score(hyp, {"answers": golds}, {"squad": True})
        assert ours.is_correct == metric_max_over_ground_truths(exact_match_score, hyp, golds)
    assert sum(exact_match_score(h, r) for h, r in SQUAD_EXTRA) == 6
