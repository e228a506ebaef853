"""Kinds of scoring fault found by running other tools' known extractor failures against uep's metrics.

Each test names its kind and where the right value comes from: "by hand" (worked out from the rule in the
metric's module docstring), sacrebleu.sentence_bleu (called here), or the official SQuAD v1.1
``evaluate-v1.1.py`` / DROP ``drop_eval.py`` functions, transcribed below verbatim from the scripts (as
shipped in lm-evaluation-harness 0.4.13 ``lm_eval/tasks/drop/utils.py``): neither is an installable package.
"""

import asyncio
import random
import re
import string
from collections import Counter

import pytest
import sacrebleu

from uep_common.contract.events import JudgeRequested, ScoreComputed
from uep_scorer.metrics import MetricInputError, available_metrics, get_metric
from uep_scorer.metrics.base import NO_ANSWER
from uep_scorer.scoring import score_output

from .test_fidelity_text import normalize_answer as squad_normalize_answer
from .test_metrics_text import BLEU, CONTAINS, EM, FUZZY, REGEX
from .test_scoring_config import References, output_event

GSM8K = get_metric("gsm8k_numeric_exact_match")
CHOICE = get_metric("multiple_choice_letter")
F1 = get_metric("token_f1")


def letter(output: str, choices: str = "ABCD") -> str | None:
    return CHOICE.score(output, {"answer": "A"}, {"choices": choices}).extracted


# --- 1. LaTeX and typeset thousands separators (by hand: the digits without the separator) -----------


@pytest.mark.parametrize(
    ("output", "value"),
    [
        ("the fund holds $\\boxed{12{,}500}$ dollars", "12500"),
        ("it costs 3{,}000 in all", "3000"),
        ("so $1{,}234{,}567.50$ in total", "1234567.5"),
        ("a distance of 12\\,500 m", "12500"),  # LaTeX thin space
        ("12\\thinspace500 kg", "12500"),
        ("SI style: 12\u202f500", "12500"),  # narrow no-break space
        ("thin: 4\u2009000\u2009000", "4000000"),
        ("#### 3{,}000", "3000"),  # strict variant sees the same text
    ],
)
def test_latex_thousands_separators_join_the_number(output, value):
    result = GSM8K.score(output, {"answer": value}, {})
    assert (result.extracted, result.is_correct) == (value, True)


def test_strict_variant_reads_latex_separators_too():
    result = GSM8K.score("#### 3{,}000", {"answer": "3000"}, {"variant": "strict"})
    assert (result.details["strict_extracted"], result.is_correct) == ("3000", True)


@pytest.mark.parametrize(
    ("output", "last"),
    [
        ("a braced decimal comma 3{,}14", "14"),  # not a group of three: two numbers, as "3,14"
        ("5\\,\\text{m} long", "5"),  # a thin space before a unit is no separator
        ("10{,}5000", "5000"),  # four digits after it: not a thousands group
    ],
)
def test_a_separator_needs_a_group_of_exactly_three_digits(output, last):
    assert GSM8K.score(output, {"answer": "0"}, {}).extracted == last


def test_a_reference_written_with_latex_separators_parses():
    assert GSM8K.score("12500", {"answer": "12{,}500"}, {}).is_correct is True


# --- 2. Letters wrapped in markup (by hand: the letter inside the markup) -----------------------------


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("Final answer: $C$", "C"),
        ("The answer is \\(D\\).", "D"),
        ("Answer: $B", "B"),  # a template's "$LETTER" echoed
        ("The answer is $$\\mathbf{C}$$", "C"),
        ("Answer: \\[B\\]", "B"),
        ("The answer is $\\text{D}$.", "D"),
        ("\\boxed{\\textbf{C}}", "C"),
        ("Answer: <b>C</b>", "C"),
        ("Answer: <strong>D</strong>", "D"),
        ("Answer: __B__", "B"),
        ("Answer: *C*", "C"),
    ],
)
def test_letters_wrapped_in_markup(output, expected):
    assert letter(output) == expected


# --- 3. Answers by elimination: a rejected letter is never returned (by hand) --------------------------


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("Answer: A is eliminated, leaving B", "B"),
        ("C cannot be right, so the answer is A", "A"),
        ("We can rule out A and B. C is incorrect. The answer is D.", "D"),
        ("A is eliminated. B is eliminated. Which leaves D.", "D"),
        ("A can't be the answer. Only C remains.", "C"),
        ("Option A is wrong; option B is correct.", "B"),
        ("The answer is B, not A.", "B"),
        ("A and C are wrong, so the answer is D", "D"),
        # a later answer cue revises an earlier rejection of the same letter
        ("C seems wrong at first, but on reflection the answer is C", "C"),
    ],
)
def test_answers_by_elimination(output, expected):
    assert letter(output) == expected


@pytest.mark.parametrize(
    "output",
    [
        "Answer: A is wrong",
        "The answer is not A.",
        "Answer: B is incorrect, and so is D",
        "A could not be correct",
        "answer: C was ruled out",
    ],
)
def test_a_rejected_letter_gives_no_answer_never_the_letter(output):
    result = CHOICE.score(output, {"answer": "A"}, {})
    assert result.extracted is None and result.details["extraction"] == NO_ANSWER and result.is_correct is False
    assert result.details["rejected"]


def test_an_article_is_not_a_rejected_letter():
    # "not a" is the article; the rejection rule wants an upper-case standalone letter.
    assert letter("It is not a good idea to guess; answer: A") == "A"


# --- 4. Chinese answer cues (by hand) -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("综上，正确答案是D。", "D"),
        ("经过分析，选项C正确。", "C"),
        ("我选B。", "B"),
        ("正确的是A", "A"),
        ("正确选项为C", "C"),
        ("B是正确的", "B"),
        ("A不对，B也不对，所以选C", "C"),
        ("排除A和B，答案是D", "D"),
        ("选项A错误，选项B正确", "B"),
        ("C正确吗？不，答案是A", "A"),  # a question "is C right?" is no cue
    ],
)
def test_chinese_answer_cues(output, expected):
    assert letter(output) == expected


def test_chinese_rejection_alone_gives_no_answer():
    assert letter("A不正确") is None


# --- 5. A gold answer that normalises to nothing (by hand) ---------------------------------------------


@pytest.mark.parametrize(
    ("metric", "output", "score"), [(EM, "An", 1.0), (EM, "B", 0.0), (CONTAINS, "An", 1.0), (CONTAINS, "B", 0.0)]
)
def test_gold_emptied_by_article_removal_is_compared_with_its_article(metric, output, score):
    result = metric.score(output, {"answer": "An"}, {"squad": True})
    assert result.score == score and result.details["relaxed_references"] == ["An"]


@pytest.mark.parametrize("metric", [EM, CONTAINS])
@pytest.mark.parametrize("output", ["", "the", "a", "!!!"])
def test_an_empty_normalised_gold_never_matches_everything(metric, output):
    # Each of these outputs normalises to "" under SQuAD's rule; the gold "An" is compared as "an".
    assert metric.score(output, {"answer": "An"}, {"squad": True}).is_correct is False


def test_relaxation_keeps_punctuation_when_the_gold_is_only_punctuation():
    params = {"ignore_punctuation": True, "ignore_case": True}
    assert EM.score("?", {"answer": "?"}, params).is_correct is True
    assert EM.score("!", {"answer": "?"}, params).is_correct is False
    # the flag-based articles option relaxes the same way
    assert EM.score("the", {"answer": "The"}, {"ignore_articles": True, "ignore_case": True}).is_correct is True


def test_other_references_keep_the_full_normalisation():
    # "the Cat" still normalises to "cat" for the second reference; only "An" is relaxed.
    result = EM.score("The cat!", {"answers": ["An", "the Cat"]}, {"squad": True})
    assert (result.is_correct, result.details["matched_index"]) == (True, 1)


@pytest.mark.parametrize("metric", [EM, CONTAINS, FUZZY])
def test_a_blank_gold_is_a_configuration_error(metric):
    with pytest.raises(MetricInputError, match="empty after normalisation"):
        metric.score("anything", {"answer": "   "}, {"squad": True})


def test_regex_and_fuzzy_use_the_same_relaxation():
    assert REGEX.score("Answer: An", {"answer": "An"}, {"pattern": r"Answer: (\w+)", "squad": True}).is_correct is True
    assert REGEX.score("Answer: the", {"answer": "An"}, {"pattern": r"Answer: (\w+)", "squad": True}).is_correct is False
    # fuzz.ratio("", "") is 100: an emptied gold would pass every emptied output
    assert FUZZY.score("the", {"answer": "An"}, {"squad": True}).is_correct is False
    assert FUZZY.score("An", {"answer": "An"}, {"squad": True}).is_correct is True


# --- 6. Token-level F1 --------------------------------------------------------------------------------


def squad_f1_score(prediction, ground_truth):
    """evaluate-v1.1.py f1_score, verbatim."""
    prediction_tokens = squad_normalize_answer(prediction).split()
    ground_truth_tokens = squad_normalize_answer(ground_truth).split()
    common = Counter(prediction_tokens) & Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    return (2 * precision * recall) / (precision + recall)


def _drop_is_number(text):
    try:
        float(text)
        return True
    except ValueError:
        return False


def drop_normalize(answer, split=" |-"):
    """drop_eval.py _normalize (with _remove_punc, _fix_number, _remove_articles, _white_space_fix), verbatim
    except that the token split pattern is a parameter (the script's is " |-")."""

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude) if not _drop_is_number(text) else text

    def fix_number(text):
        return str(float(text)) if _drop_is_number(text) else text

    tokens = [
        " ".join(re.sub(re.compile(r"\b(a|an|the)\b", re.UNICODE), " ", fix_number(remove_punc(t.lower()))).split())
        for t in re.split(split, answer)
    ]
    return " ".join(t for t in tokens if t.strip()).strip()


def drop_f1(predicted, gold, split=" |-"):
    """drop_eval.py get_metrics for one span each (_align_bags of 1x1 bags, _match_numbers_if_present,
    _compute_f1), without the final round(f1, 2)."""
    p, g = set(drop_normalize(predicted, split).split()), set(drop_normalize(gold, split).split())
    gold_numbers = {w for w in g if _drop_is_number(w)}
    if gold_numbers and not gold_numbers & {w for w in p if _drop_is_number(w)}:
        return 0.0
    inter = len(g & p)
    precision = inter / len(p) if p else 1.0
    recall = inter / len(g) if g else 1.0
    return 0.0 if precision == 0.0 and recall == 0.0 else 2 * precision * recall / (precision + recall)


def test_token_f1_squad_worked_case():
    # by hand: "cat sat" vs "cat sat on mat": 2 common, P 2/2, R 2/4, F1 2/3 (and the script agrees)
    result = F1.score("the cat sat", {"answer": "cat sat on the mat"}, {})
    d = result.details
    assert (d["precision"], d["recall"]) == (1.0, 0.5)
    assert result.score == pytest.approx(2 / 3) == squad_f1_score("the cat sat", "cat sat on the mat")
    assert result.is_correct is None and d["exact_match"] == 0 and d["style"] == "squad"


def test_token_f1_splits_on_every_whitespace_so_the_number_is_recognised():
    out = "12\n\nQuestion: how many…"
    # by hand, DROP style: tokens {12.0, question, how, many…} vs {12.0}: P 1/4, R 1, F1 0.4
    drop = F1.score(out, {"answer": "12"}, {"style": "drop"})
    assert (drop.details["precision"], drop.details["recall"], drop.score) == (0.25, 1.0, pytest.approx(0.4))
    # the script's own split (space and hyphen only) keeps "12\n\nquestion" one token: no number, F1 0
    assert F1.score(out, {"answer": "12"}, {"style": "drop", "split_on": "space"}).score == 0.0 == drop_f1(out, "12")
    # cut at the first blank line (a named parameter): the answer alone, F1 1
    cut = F1.score(out, {"answer": "12"}, {"style": "drop", "stop_at": ["\n\n", "Question:"]})
    assert (cut.score, cut.details["cut"], cut.details["exact_match"]) == (1.0, True, 1)
    # SQuAD style splits on every whitespace already: "12" is one of four tokens
    assert F1.score(out, {"answer": "12"}, {}).score == pytest.approx(0.4) == pytest.approx(squad_f1_score(out, "12"))


def test_token_f1_drop_number_rules():
    # by hand: "12" and "12.0" are the same number; "1,000" is 1000.0; a gold number missing -> 0
    assert F1.score("12.0 apples", {"answer": "12 apples"}, {"style": "drop"}).score == 1.0
    assert F1.score("1,000", {"answer": "1000"}, {"style": "drop"}).score == 1.0
    assert F1.score("13 apples", {"answer": "12 apples"}, {"style": "drop"}).score == 0.0
    # token sets (DROP) vs multisets (SQuAD): "a a b" vs "a b" -> DROP 1.0; SQuAD P 2/3 R 1 F1 0.8
    assert F1.score("x x y", {"answer": "x y"}, {"style": "drop"}).score == 1.0
    assert F1.score("x x y", {"answer": "x y"}, {}).score == pytest.approx(0.8)


def test_token_f1_max_over_references_and_empty_gold():
    result = F1.score("Paris", {"answers": ["London", "paris france"]}, {})
    assert (result.score, result.details["matched_reference"]) == (pytest.approx(2 / 3), "paris france")
    # gold "An" (empty under SQuAD normalisation): compared as "an" -> F1 1 for "An", 0 for "the"
    assert F1.score("An", {"answer": "An"}, {}).score == 1.0
    assert F1.score("the", {"answer": "An"}, {}).score == 0.0
    assert F1.score("the", {"answer": "An"}, {"style": "drop"}).score == 0.0


def test_token_f1_threshold_and_errors():
    assert F1.score("the cat sat", {"answer": "cat sat on the mat"}, {"threshold": 0.6}).is_correct is True
    assert F1.score("the cat sat", {"answer": "cat sat on the mat"}, {"threshold": 0.7}).is_correct is False
    for params in ({"style": "bleu"}, {"threshold": 2}, {"stop_at": [""]}, {"split_on": "tabs"}):
        with pytest.raises(MetricInputError):
            F1.score("x", {"answer": "x"}, params)
    with pytest.raises(MetricInputError):
        F1.score("x", {}, {})


def _texts(n, seed):
    rng = random.Random(seed)
    words = ["the", "a", "an", "Cat", "sat", "on", "mat", "12", "12.0", "1,000", "-5", "well-known", "U.S.", "end.", "x"]
    seps = [" ", " ", " ", "\n", "\t", "-", "  "]
    out = []
    for _ in range(n):
        k = rng.randint(1, 8)
        out.append("".join(rng.choice(words) + rng.choice(seps) for _ in range(k)).strip())
    return out


def test_token_f1_equals_the_reference_scripts_on_many_inputs():
    preds, golds = _texts(400, 1), _texts(400, 2)
    compared = 0
    for p, g in zip(preds, golds, strict=True):
        if squad_normalize_answer(g):
            assert F1.score(p, {"answer": g}, {}).score == pytest.approx(squad_f1_score(p, g), abs=1e-12), (p, g)
            compared += 1
        if drop_normalize(g, r"\s+|-"):
            ours = F1.score(p, {"answer": g}, {"style": "drop"}).score
            assert ours == pytest.approx(drop_f1(p, g, r"\s+|-"), abs=1e-12), (p, g)
        if drop_normalize(g):
            ours = F1.score(p, {"answer": g}, {"style": "drop", "split_on": "space"}).score
            assert ours == pytest.approx(drop_f1(p, g), abs=1e-12), (p, g)
    assert compared > 300


# --- 7. A metric named after a reference function takes its defaults (sacrebleu.sentence_bleu) -------


@pytest.mark.parametrize(
    ("hyp", "ref"), [("Blue Lake", "Blue Lake"), ("Blue", "Blue"), ("Blue Lake", "Blue Lake Park"), ("a b c", "a b d")]
)
def test_sentence_bleu_defaults_are_sacrebleu_sentence_bleus(hyp, ref):
    result = BLEU.score(hyp, {"answer": ref}, {})
    assert result.score == pytest.approx(sacrebleu.sentence_bleu(hyp, [ref]).score, abs=1e-9)
    assert "eff:yes" in result.details["signature"]


def test_blue_lake_is_100_and_the_deviation_is_a_named_parameter():
    assert BLEU.score("Blue Lake", {"answer": "Blue Lake"}, {}).score == pytest.approx(100.0)
    off = BLEU.score("Blue Lake", {"answer": "Blue Lake"}, {"effective_order": False})
    assert off.score == 0.0 == sacrebleu.sentence_bleu("Blue Lake", ["Blue Lake"], use_effective_order=False).score
    assert "eff:no" in off.details["signature"]


# --- One way to say "no answer", and hybrid routing of regex_match (by hand) ---------------------------

EXTRACTING = {
    "gsm8k_numeric_exact_match": ({"answer": "18"}, {}),
    "multiple_choice_letter": ({"answer": "B"}, {}),
    "label_match": ({"label": "yes"}, {}),
    "exact_match": ({"answer": "Paris"}, {}),
    "contains": ({"answer": "Paris"}, {}),
    "regex_match": ({"answer": "Paris"}, {"pattern": r"answer: (\w+)"}),
    "fuzzy_match": ({"answer": "Paris"}, {}),
    "token_f1": ({"answer": "Paris"}, {}),
    "ndcg": ({"relevant": ["Paris"]}, {}),
}
"""Every registered metric that reads an answer from the output, with a valid reference and params."""
GRADED = {"sentence_bleu", "sentence_chrf", "rouge", "pass_at_k", "loglik_multiple_choice", "humaneval_pass_at_1"} | {
    "agent_answer",
    "agent_path",
    "agent_traceable",
}
"""Metrics that read no answer from the output: graded scores, estimates, log-probabilities, programs and agent
runs (the answer an agent submitted is in its trajectory; their own rules)."""


def test_every_metric_is_classified():
    assert set(available_metrics()) == set(EXTRACTING) | GRADED


@pytest.mark.parametrize("name", sorted(EXTRACTING))
@pytest.mark.parametrize("output", ["", "   \n"])
def test_every_extracting_metric_reports_no_answer_the_same_way(name, output):
    reference, params = EXTRACTING[name]
    result = get_metric(name).score(output, reference, params)
    assert result.details["extraction"] == NO_ANSWER and result.no_answer


@pytest.mark.parametrize("name", sorted(EXTRACTING))
def test_every_extracting_metric_reports_an_answer_the_same_way(name):
    reference, params = EXTRACTING[name]
    result = get_metric(name).score("The answer is B: answer: Paris, 18, yes", reference, params)
    assert result.details["extraction"] != NO_ANSWER and not result.no_answer


def test_regex_match_without_a_match_is_no_answer_in_both_modes():
    compare = REGEX.score("I do not know", {"answer": "Paris"}, {"pattern": r"answer: (\w+)"})
    search = REGEX.score("I do not know", {}, {"pattern": r"answer: (\w+)"})
    for result in (compare, search):
        assert (result.is_correct, result.extracted, result.details["extraction"]) == (False, None, NO_ANSWER)
    # a group that took no part in the match extracts nothing either
    optional = REGEX.score("answer:", {"answer": "Paris"}, {"pattern": r"answer:(?: (?P<answer>\w+))?"})
    assert optional.details["extraction"] == NO_ANSWER
    found = REGEX.score("answer: London", {"answer": "Paris"}, {"pattern": r"answer: (\w+)"})
    assert (found.is_correct, found.details["extraction"]) == (False, "ok")


def _score(text: str, evaluation_type: str = "hybrid"):
    config = {"metric": {"name": "regex_match", "params": {"pattern": r"answer: (\w+)", "ignore_case": True}}}
    return asyncio.run(score_output(output_event(text), References(config, evaluation_type, {"answer": "Paris"})))


def test_hybrid_regex_match_without_a_match_goes_to_the_judge_as_no_answer():
    out = _score("I believe it is the city of light.")
    assert isinstance(out, JudgeRequested) and out.route_reason == "no_answer"
    assert out.automatic["metric_name"] == "regex_match" and out.automatic["extraction"] == "no_answer"


def test_hybrid_regex_match_with_a_match_is_decided_automatically():
    right, wrong = _score("answer: paris"), _score("answer: London")
    assert isinstance(right, ScoreComputed) and right.is_correct is True and right.metrics["decided_by"] == "automatic"
    assert isinstance(wrong, ScoreComputed) and wrong.is_correct is False and wrong.metrics["extraction"] == "ok"


def test_automatic_regex_match_records_the_extraction_failure():
    # what the summary's extraction failure rate counts (metrics["extraction"] == "no_answer")
    out = _score("no idea", evaluation_type="automatic")
    assert isinstance(out, ScoreComputed) and out.is_correct is False and out.metrics["extraction"] == "no_answer"
