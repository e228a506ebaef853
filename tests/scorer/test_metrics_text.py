"""Text metrics: exact_match, contains, regex_match, fuzzy_match, bleu, chrf, rouge (stated values)."""

import dataclasses
import json
import math

import pytest

from uep_scorer.metrics import MetricInputError, get_metric
from uep_scorer.metrics.bleu import corpus_bleu, corpus_chrf, default_tokenizer
from uep_scorer.metrics.normalize import NormalizeOptions, normalize_text, reference_answers, squad_normalize
from uep_scorer.metrics.rouge import MultilingualTokenizer, split_sentences

EM = get_metric("exact_match")
CONTAINS = get_metric("contains")
REGEX = get_metric("regex_match")
FUZZY = get_metric("fuzzy_match")
BLEU = get_metric("sentence_bleu")
CHRF = get_metric("sentence_chrf")
ROUGE = get_metric("rouge")

ZH = "今天天气很好我们去公园散步"


# --- worked cases with stated values ---------------------------------------------------------------


def test_bleu_identical_chinese_with_zh_tokenizer_is_100():
    result = BLEU.score(ZH, {"answer": ZH}, {"language": "zh"})
    assert result.score == pytest.approx(100.0, abs=1e-9)
    assert result.is_correct is None
    assert result.details["tokenize"] == "zh"
    assert result.details["signature"] == "nrefs:1|case:mixed|eff:yes|tok:zh|smooth:exp|version:2.6.0"


def test_bleu_identical_chinese_with_13a_tokenizer_is_0_only_without_effective_order():
    # 13a sees one token: no 2/3/4-grams, their precisions are 0 without effective order -> BLEU 0.
    result = BLEU.score(ZH, {"answer": ZH}, {"effective_order": False})
    assert result.score == 0.0
    assert result.details["tokenize"] == "13a"
    assert (result.details["sys_len"], result.details["precisions"]) == (1, [100.0, 0.0, 0.0, 0.0])
    # The default is sacrebleu.sentence_bleu()'s (effective order on), which reports 100 here.
    assert BLEU.score(ZH, {"answer": ZH}, {}).score == pytest.approx(100.0, abs=1e-9)


def test_rouge1_identical_chinese_is_1():
    result = ROUGE.score("今天天气很好", {"answer": "今天天气很好"}, {})
    assert result.score == 1.0
    assert result.details["rouge1"] == {"precision": 1.0, "recall": 1.0, "fmeasure": 1.0}


def test_rouge1_chinese_one_character_differs_is_five_sixths():
    result = ROUGE.score("今天天气不好", {"answer": "今天天气很好"}, {"types": ["rouge1"]})
    assert result.score == pytest.approx(0.8333, abs=1e-4)
    assert result.score == pytest.approx(5 / 6, abs=1e-12)


# --- normalisation ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The  Cat!", "cat"),
        ("an apple, a pear and THE end.", "apple pear and end"),
        ("  Theory of the  atom ", "theory of atom"),  # 'the' only as a whole word
        ("Denver Broncos", "denver broncos"),
        ("don't", "dont"),
        ("", ""),
    ],
)
def test_squad_normalize_examples(text, expected):
    assert squad_normalize(text) == expected


def test_normalize_steps_and_defaults():
    assert normalize_text("  a\t b \n") == "a b"  # whitespace is collapsed by default
    assert normalize_text("  a  b ", NormalizeOptions(ignore_whitespace=False)) == "  a  b "
    assert normalize_text("Hello，世界！", NormalizeOptions(ignore_punctuation=True)) == "Hello世界"
    assert normalize_text("The Answer", NormalizeOptions(ignore_articles=True)) == "Answer"
    opts = NormalizeOptions(regexes_to_ignore=(r"^answer:\s*",), ignore_case=True)
    assert normalize_text("Answer: Paris", opts) == "answer: paris"  # regexes run before lower-casing
    opts = NormalizeOptions(regexes_to_ignore=(r"(?i)^answer:\s*",), ignore_case=True)
    assert normalize_text("Answer: Paris", opts) == "paris"


def test_reference_answers_shapes():
    assert reference_answers({"answer": "x"}) == ["x"]
    assert reference_answers({"answers": ["x", "y", "x"]}) == ["x", "y"]
    assert reference_answers({"answer": 42, "answers": ["y"]}) == ["42", "y"]
    assert reference_answers({}, required=False) == []
    for bad in ({}, {"answers": []}, {"answers": "x"}, {"answer": None}, {"answer": True}):
        with pytest.raises(MetricInputError):
            reference_answers(bad)


# --- exact_match / contains -------------------------------------------------------------------------


def test_exact_match_squad():
    result = EM.score("The  Cat!", {"answer": "cat"}, {"squad": True})
    assert (result.is_correct, result.score, result.extracted) == (True, 1.0, "cat")
    assert result.details["matched_reference"] == "cat"
    assert EM.score("The  Cat!", {"answer": "cat"}, {}).is_correct is False


def test_exact_match_default_only_collapses_whitespace():
    assert EM.score("  Paris \n", {"answer": "Paris"}, {}).is_correct is True
    assert EM.score("paris", {"answer": "Paris"}, {}).is_correct is False
    assert EM.score("paris", {"answer": "Paris"}, {"ignore_case": True}).is_correct is True


def test_exact_match_any_of_several_answers_and_details():
    result = EM.score("the Eiffel tower", {"answers": ["Louvre", "Eiffel Tower"]}, {"ignore_case": True, "ignore_articles": True})
    assert result.is_correct is True
    assert (result.details["matched_reference"], result.details["matched_index"]) == ("Eiffel Tower", 1)
    assert result.details["prediction"] == "eiffel tower"
    json.dumps(dataclasses.asdict(result))


def test_exact_match_regexes_to_ignore():
    params = {"regexes_to_ignore": [r"(?i)the answer is\s*", r"\.$"]}
    assert EM.score("The answer is 42.", {"answer": "42"}, params).is_correct is True


def test_exact_match_bad_params_name_the_param():
    with pytest.raises(MetricInputError, match="ignore_case"):
        EM.score("x", {"answer": "x"}, {"ignore_case": "yes"})
    with pytest.raises(MetricInputError, match="regexes_to_ignore"):
        EM.score("x", {"answer": "x"}, {"regexes_to_ignore": ["("]})
    with pytest.raises(MetricInputError, match="answer"):
        EM.score("x", {}, {})


def test_empty_output_is_an_ordinary_wrong_answer():
    assert EM.score("", {"answer": "x"}, {}).is_correct is False
    assert EM.score(None, {"answer": "x"}, {}).is_correct is False  # type: ignore[arg-type]


def test_contains():
    assert CONTAINS.score("I think it is Paris, France.", {"answer": "paris"}, {"ignore_case": True}).is_correct is True
    assert CONTAINS.score("London", {"answers": ["Paris", "Rome"]}, {}).is_correct is False
    assert CONTAINS.score("答案是北京。", {"answer": "北京"}, {}).is_correct is True
    assert CONTAINS.score("14", {"answer": "4"}, {}).is_correct is True  # plain substring, documented
    # A gold that SQuAD normalisation empties is looked for with its article kept ("the"), by hand:
    # "anything" holds no "the", "then" does (plain substring); a blank gold is malformed data.
    assert CONTAINS.score("anything", {"answer": "The"}, {"squad": True}).is_correct is False
    assert CONTAINS.score("and then", {"answer": "The"}, {"squad": True}).is_correct is True
    with pytest.raises(MetricInputError, match="empty after normalisation"):
        CONTAINS.score("anything", {"answer": "  "}, {"squad": True})


# --- regex_match ------------------------------------------------------------------------------------


def test_regex_match_search_mode_without_answers():
    result = REGEX.score("Final: 42", {}, {"pattern": r"\d+"})
    assert (result.is_correct, result.extracted, result.details["mode"]) == (True, "42", "search")
    assert REGEX.score("no digits", {}, {"pattern": r"\d+"}).is_correct is False


def test_regex_match_compares_first_group_with_answer():
    params = {"pattern": r"answer is (\w+)", "flags": "i", "ignore_case": True}
    result = REGEX.score("The ANSWER IS Paris. The answer is Rome.", {"answer": "paris"}, params)
    assert (result.is_correct, result.extracted, result.details["mode"]) == (True, "Paris", "compare")
    assert REGEX.score("the answer is Rome", {"answer": "Paris"}, params).is_correct is False


def test_regex_match_named_group_and_whole_match():
    assert REGEX.score("x=1, y=2", {"answer": "2"}, {"pattern": r"(x)=\d, y=(?P<answer>\d)"}).extracted == "2"
    assert REGEX.score("id ABC-12", {"answer": "ABC-12"}, {"pattern": r"[A-Z]+-\d+"}).is_correct is True


def test_regex_match_errors_name_the_param():
    with pytest.raises(MetricInputError, match="'pattern'"):
        REGEX.score("x", {}, {})
    with pytest.raises(MetricInputError, match="'pattern'"):
        REGEX.score("x", {}, {"pattern": "(unclosed"})
    with pytest.raises(MetricInputError, match="'flags'"):
        REGEX.score("x", {}, {"pattern": "x", "flags": "q"})


# --- fuzzy_match ------------------------------------------------------------------------------------


def test_fuzzy_threshold_edge_is_inclusive():
    # ratio("abcdefghij", "abcdefghix") = 100 * (1 - 2/20) = 90.0
    result = FUZZY.score("abcdefghix", {"answer": "abcdefghij"}, {})
    assert result.details["ratio"] == pytest.approx(90.0)
    assert (result.is_correct, result.score) == (True, pytest.approx(0.9))
    assert FUZZY.score("abcdefghix", {"answer": "abcdefghij"}, {"threshold": 90.01}).is_correct is False


def test_fuzzy_partial_only_for_long_references():
    long_ref = "the quick brown fox jumps"  # 25 characters
    out = f"Well, {long_ref} over the lazy dog, they say."
    result = FUZZY.score(out, {"answer": long_ref}, {"partial": True})
    assert (result.is_correct, result.details["method"], result.score) == (True, "partial_ratio", 1.0)
    assert result.details["partial_fallback"] is False
    short = FUZZY.score("The answer is 42 of course", {"answer": "42"}, {"partial": True})
    assert short.is_correct is False
    assert (short.details["method"], short.details["partial_fallback"]) == ("ratio", True)
    assert "min_reference_length=20" in short.details["partial_fallback_reason"]


def test_fuzzy_bad_params():
    for params, name in (
        ({"threshold": 101}, "threshold"),
        ({"partial": 1}, "partial"),
        ({"min_reference_length": -1}, "min_reference_length"),
    ):
        with pytest.raises(MetricInputError, match=name):
            FUZZY.score("x", {"answer": "x"}, params)


# --- bleu / chrf ------------------------------------------------------------------------------------


def test_default_tokenizer_by_language():
    assert [default_tokenizer(x) for x in ("zh", "zh-CN", "ja", "ko", "th", "en", None, "de")] == [
        "zh",
        "zh",
        "char",
        "char",
        "char",
        "13a",
        "13a",
        "13a",
    ]


def test_bleu_english_stated_value_and_threshold():
    hyp, ref = "the cat sat on the mat", "the cat sat on a mat"
    # 1-4-gram precisions 5/6, 3/5, 2/4, 1/3; BP 1: (5/6 * 3/5 * 1/2 * 1/3) ** 0.25 = 0.5373...
    result = BLEU.score(hyp, {"answer": ref}, {})
    assert result.score == pytest.approx(100 * (5 / 6 * 3 / 5 * 2 / 4 * 1 / 3) ** 0.25, abs=1e-9)
    assert result.is_correct is None and result.details["threshold"] is None
    assert BLEU.score(hyp, {"answer": ref}, {"threshold": 50}).is_correct is True
    assert BLEU.score(hyp, {"answer": ref}, {"threshold": 60}).is_correct is False


def test_bleu_multi_reference_signature_and_errors():
    result = BLEU.score("a b c d", {"answers": ["a b c d", "x y"]}, {})
    assert result.score == pytest.approx(100.0)
    assert result.details["signature"].startswith("nrefs:2|")
    with pytest.raises(MetricInputError, match="tokenize"):
        BLEU.score("x", {"answer": "x"}, {"tokenize": "nope"})
    with pytest.raises(MetricInputError, match="not available"):
        BLEU.score("x", {"answer": "x"}, {"tokenize": "ja-mecab"})  # mecab is not installed
    with pytest.raises(MetricInputError, match="threshold"):
        BLEU.score("x", {"answer": "x"}, {"threshold": 101})


def test_chrf_values():
    assert CHRF.score("hello world", {"answer": "hello world"}, {}).score == pytest.approx(100.0)
    assert CHRF.score("", {"answer": "hello"}, {}).score == 0.0
    result = CHRF.score("天气很好", {"answer": "今天天气很好"}, {"language": "zh"})
    assert 0 < result.score < 100 and result.is_correct is None
    assert result.details["signature"] == "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0"
    assert CHRF.score("hello", {"answer": "hello"}, {"word_order": 2}).details["signature"].split("|")[4] == "nw:2"


def test_corpus_bleu_is_not_the_mean_of_sentence_bleu():
    hyps = ["the cat sat on the mat", "a b"]
    refs = [["the cat sat on a mat"], ["a b c"]]
    score, signature = corpus_bleu(hyps, refs)
    # Sentence BLEU as corpus BLEU computes it (effective order off): "a b" scores 0 alone.
    mean = sum(BLEU.score(h, {"answers": r}, {"effective_order": False}).score for h, r in zip(hyps, refs, strict=True)) / 2
    assert signature == "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"
    # Pooled counts: 1-4-gram matches 7/8, 4/6, 2/4, 1/3; hyp_len 8 < ref_len 9 -> BP = exp(1 - 9/8).
    expected = 100 * math.exp(1 - 9 / 8) * (7 / 8 * 4 / 6 * 2 / 4 * 1 / 3) ** 0.25
    assert score == pytest.approx(expected, abs=1e-9)  # 49.278...
    assert abs(score - mean) > 10
    chrf, chrf_sig = corpus_chrf(hyps, refs)
    assert 0 < chrf < 100 and chrf_sig.startswith("nrefs:1|")
    with pytest.raises(MetricInputError, match="reference lists"):
        corpus_bleu(hyps, refs[:1])


# --- rouge ------------------------------------------------------------------------------------------


def test_multilingual_tokenizer():
    tok = MultilingualTokenizer()
    assert tok.tokenize("今天天气很好, OK!") == ["今", "天", "天", "气", "很", "好", "ok"]
    assert tok.tokenize("Hello_World 3.14 café") == ["hello", "world", "3", "14", "café"]
    assert tok.tokenize("カタカナです。한국어") == ["カ", "タ", "カ", "ナ", "で", "す", "한", "국", "어"]
    assert tok.tokenize("กินข้าว") == ["กิ", "น", "ข้", "า", "ว"]  # Thai marks stay on their consonant
    assert MultilingualTokenizer(use_stemmer=True).tokenize("running cats") == ["run", "cat"]


def test_split_sentences():
    assert split_sentences("A b. C d!  E\nF 3.14 is pi?") == "A b.\nC d!\nE\nF 3.14 is pi?"
    assert split_sentences("今天好。明天呢？好") == "今天好。\n明天呢？\n好"


def test_rouge_english_values_and_details():
    result = ROUGE.score("the cat sat on the mat", {"answer": "the cat was on the mat"}, {})
    # 5 of 6 unigrams match; bigrams: the-cat, on-the, the-mat = 3 of 5.
    assert result.score == pytest.approx(5 / 6)
    assert result.details["rouge2_f"] == pytest.approx(3 / 5)
    assert set(result.details["types"]) == {"rouge1", "rouge2", "rougeL", "rougeLsum"}
    assert result.is_correct is None
    assert ROUGE.score("a b", {"answer": "a b"}, {"threshold": 0.5}).is_correct is True


def test_rouge_lsum_uses_sentence_split():
    ref = "The cat sat. The dog ran."
    pred = "The dog ran. The cat sat."
    result = ROUGE.score(pred, {"answer": ref}, {"types": ["rougeLsum", "rougeL"]})
    assert result.score == pytest.approx(1.0)  # summary-level LCS: sentence order does not matter
    assert result.details["rougeL_f"] < 1.0


def test_rouge_multiple_references_take_the_best_per_type():
    result = ROUGE.score("今天天气很好", {"answers": ["明天下雨", "今天天气很好"]}, {"types": ["rouge1"]})
    assert result.score == 1.0


def test_rouge_params():
    with pytest.raises(MetricInputError, match="'types.0'"):
        ROUGE.score("x", {"answer": "x"}, {"types": ["rougeX"]})
    with pytest.raises(MetricInputError, match="use_stemmer"):
        ROUGE.score("x", {"answer": "x"}, {"use_stemmer": True, "language": "zh"})
    stemmed = ROUGE.score("cats running", {"answer": "cat runs"}, {"use_stemmer": True, "types": ["rouge1"]})
    assert stemmed.score == 1.0
    assert ROUGE.score("", {"answer": "x"}, {}).score == 0.0
