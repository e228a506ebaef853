"""A robustness evaluation's figures per perturbation, from its stored results: accuracy with Wilson's interval,
the consistency rate (same verdict as the original item), flips and McNemar's exact test against the originals
(:func:`uep_common.analytics.stats.mcnemar_exact`), and the position bias of multiple-choice answers under
``choice_rotation``. Definitions: :class:`uep_common.contract.events.PerturbationFigures`.

An item's kind comes from its sample's ``metadata["robustness"]`` (written when the robustness benchmark was
derived: ``perturbation`` = ``original`` or ``name@version``, ``original_ordinal``, ``variant``, ``seed``); a
perturbed item is paired with the original of the same ``original_ordinal`` and repeat.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.analytics.stats import WILSON, mcnemar_exact, wilson_interval
from uep_common.contract.configs import ORIGINAL, RobustnessConfig, parse_evaluation_config
from uep_common.contract.events import PerturbationFigures, PositionBias, RobustnessSummary
from uep_common.tables.models import Benchmark, Evaluation, Sample, SampleResult

SCORE_TYPE = "robustness"
"""The leaderboard score type of robustness evaluations: the pooled consistency rate (:func:`board_score`)."""
ROTATION = "choice_rotation"
"""The perturbation whose items (with the originals) give the position bias."""
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


@dataclass(frozen=True)
class RobustItem:
    """One stored item of a robustness evaluation.

    Attributes:
        original: the ordinal, in the source benchmark, of the original item it is (a variant of).
        perturbation: ``original`` or ``name@version``.
        repeat: the item's repeat (a variant pairs with its original's same repeat).
        correct: its verdict; None without one (an error, a graded metric).
        chosen: the answer extracted from the output (an option letter for multiple choice), or None.
        gold: the gold option letter of a multiple-choice item, or None.
        seed: the seed its perturbation drew from.
    """

    original: int
    perturbation: str
    repeat: int
    correct: bool | None
    chosen: str | None = None
    gold: str | None = None
    seed: int | None = None


def gold_letter(reference: dict[str, Any]) -> str | None:
    """The gold option letter of a multiple-choice reference: ``answer`` when one letter, else the letter of the
    integer ``gold``; None otherwise."""
    answer = reference.get("answer")
    if isinstance(answer, str) and len(answer.strip()) == 1 and answer.strip().upper() in LETTERS:
        return answer.strip().upper()
    gold = reference.get("gold")
    if isinstance(gold, int) and not isinstance(gold, bool) and 0 <= gold < len(LETTERS):
        return LETTERS[gold]
    return None


def position_bias(items: Iterable[RobustItem]) -> PositionBias | None:
    """Chosen and gold letters of the multiple-choice ``items`` (those with a gold letter); None when there is none."""
    mc = [it for it in items if it.gold is not None]
    if not mc:
        return None
    chosen = Counter(it.chosen.strip().upper() for it in mc if it.chosen and len(it.chosen.strip()) == 1)
    gold = Counter(it.gold for it in mc if it.gold is not None)
    answered = sum(chosen.values())
    letters = sorted(set(chosen) | set(gold))
    return PositionBias(
        chosen={k: chosen[k] for k in letters},
        gold={k: gold[k] for k in letters},
        share={k: chosen[k] / answered for k in letters} if answered else {},
        no_answer=len(mc) - answered,
    )


def figures(name: str, items: Sequence[RobustItem], originals: dict[tuple[int, int], bool | None]) -> PerturbationFigures:
    """The figures of one perturbation's ``items``, paired with ``originals`` ((original ordinal, repeat) →
    verdict of the original item)."""
    scored = [it.correct for it in items if it.correct is not None]
    correct = sum(scored)
    ci = wilson_interval(correct, len(scored))
    pairs = [
        (orig, it.correct)
        for it in items
        if it.correct is not None and (orig := originals.get((it.original, it.repeat))) is not None
    ]
    to_wrong = sum(o and not v for o, v in pairs)
    to_right = sum(v and not o for o, v in pairs)
    test = mcnemar_exact(to_wrong, to_right) if pairs else None
    return PerturbationFigures(
        perturbation=name,
        seed=items[0].seed if items else None,
        items=len(items),
        scored=len(scored),
        correct=correct,
        accuracy=correct / len(scored) if scored else None,
        ci_low=ci[0] if ci else None,
        ci_high=ci[1] if ci else None,
        pairs=len(pairs),
        consistent=len(pairs) - to_wrong - to_right,
        consistency_rate=(len(pairs) - to_wrong - to_right) / len(pairs) if pairs else None,
        to_wrong=to_wrong,
        to_right=to_right,
        flip_rate=(to_wrong + to_right) / len(pairs) if pairs else None,
        mcnemar_p=test.p_value if test else None,
    )


def robustness_summary(items: Sequence[RobustItem]) -> RobustnessSummary:
    """Every perturbation's figures (in the order each first appears in ``items``) against the originals, the
    position bias of ``choice_rotation`` over the originals and their rotations, and the pooled consistency."""
    originals = [it for it in items if it.perturbation == ORIGINAL]
    verdicts = {(it.original, it.repeat): it.correct for it in originals}
    names = list(dict.fromkeys(it.perturbation for it in items if it.perturbation != ORIGINAL))
    per = []
    for name in names:
        mine = [it for it in items if it.perturbation == name]
        fig = figures(name, mine, verdicts)
        if name.partition("@")[0] == ROTATION:
            fig = fig.model_copy(update={"position_bias": position_bias([*originals, *mine])})
        per.append(fig)
    pairs = sum(f.pairs for f in per)
    original = figures(ORIGINAL, originals, {}).model_copy(update={"position_bias": position_bias(originals)})
    return RobustnessSummary(
        original=original,
        perturbations=per,
        consistency_rate=sum(f.consistent for f in per) / pairs if pairs else None,
    )


async def load_items(session: AsyncSession, evaluation_id: uuid.UUID) -> list[RobustItem]:
    """The stored items of a robustness evaluation whose sample says what it is (``metadata["robustness"]``),
    in sample order."""
    rows = await session.execute(
        select(SampleResult.repeat, SampleResult.is_correct, SampleResult.extracted, Sample.meta["robustness"], Sample.reference)
        .join(Sample, Sample.id == SampleResult.sample_id)
        .where(SampleResult.evaluation_id == evaluation_id, Sample.meta.has_key("robustness"))
        .order_by(Sample.ordinal, SampleResult.repeat)
    )
    return [
        RobustItem(
            original=int(meta["original_ordinal"]),
            perturbation=str(meta["perturbation"]),
            repeat=repeat,
            correct=correct,
            chosen=extracted,
            gold=gold_letter(reference),
            seed=meta.get("seed"),
        )
        for repeat, correct, extracted, meta, reference in rows
    ]


async def compute_robustness(session: AsyncSession, evaluation_id: uuid.UUID) -> RobustnessSummary | None:
    """:func:`robustness_summary` of a robustness evaluation (its config has ``robustness``); None for any other."""
    flagged = await session.scalar(select(Evaluation.config.has_key("robustness")).where(Evaluation.id == evaluation_id))
    if not flagged:
        return None
    return robustness_summary(await load_items(session, evaluation_id))


def item_set_version(config: RobustnessConfig) -> str:
    """What a robustness evaluation's leaderboard row records as its benchmark version: the SHA-256 hex of the
    canonical JSON of its source version, perturbations, seed, number of originals and how they were chosen.
    Two tenants' runs of the same request share it (their robustness benchmarks differ only by owner), so the
    board ranks them on one item set."""
    key = {
        "source_version": config.source_version,
        "perturbations": config.perturbations,
        "seed": config.seed,
        "originals": config.originals,
        "sampling": config.sampling,
        "sampling_seed": config.sampling_seed,
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


async def board_score(session: AsyncSession, ev: Evaluation) -> tuple[str, str, dict[str, Any]] | None:
    """Where and with what a completed robustness evaluation enters the leaderboards: ``(source benchmark slug,
    item-set version, {score, ci_low, ci_high, n, method, method_detail})``, the score being the pooled
    consistency rate of its summary (consistent pairs / pairs over every perturbation) with Wilson's 95 %
    interval, ``n`` the pairs. None for any other evaluation."""
    config = parse_evaluation_config(ev.config).robustness
    if config is None:
        return None
    source = await session.get(Benchmark, config.source_benchmark_id)
    slug = source.slug if source is not None else str(config.source_benchmark_id)
    per = ((ev.summary or {}).get("robustness") or {}).get("perturbations") or []
    consistent, pairs = sum(int(p.get("consistent") or 0) for p in per), sum(int(p.get("pairs") or 0) for p in per)
    ci = wilson_interval(consistent, pairs)
    values: dict[str, Any] = (
        {"score": consistent / pairs, "ci_low": ci[0], "ci_high": ci[1], "n": pairs, "method": "wilson", "method_detail": WILSON}
        if ci is not None
        else {"score": None, "ci_low": None, "ci_high": None, "n": 0, "method": "none", "method_detail": "no pair"}
    )
    return slug, item_set_version(config), values
