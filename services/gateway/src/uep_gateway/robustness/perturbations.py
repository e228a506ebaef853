"""The perturbations of a robustness evaluation: harmless changes to a benchmark item whose verdict should not
change. Each is versioned (``name@version``: a change to what it produces bumps the version, so stored items
stay reproducible) and deterministic: an item's variants depend only on the item, the seed and the ordinal.

=====================  =======  ==================================================================================
name                   seeded   what one original item becomes
=====================  =======  ==================================================================================
``choice_rotation@1``  no       every other cyclic rotation of the options (n - 1 items for n options), the gold
                                answer moved with its option (circular evaluation, as MMBench's CircularEval)
``typos@1``            yes      one item; about 1 word in 10 of 4+ letters (at least one) gets a typo: two
                                adjacent letters swapped, one dropped, one doubled or one replaced by a QWERTY
                                neighbour
``casing@1``           yes      one item; about 1 word in 4 (at least one) upper-cased, lower-cased or title-cased
``distractor@1``       yes      one item; an irrelevant true sentence put before the text
``char_noise@1``       yes      one item; about 1 letter in 20 (at least one) deleted, replaced or followed by a
                                random letter (character-level noise, for classifiers of text)
=====================  =======  ==================================================================================

The text perturbations change the item's text fields (:data:`TEXT_KEYS` present in its input as strings),
never its reference. Randomness: ``random.Random`` seeded with the string ``"<name>@<version>:<seed>:<ordinal>"``
(a string seed is hashed with SHA-512 by :meth:`random.Random.seed`, so the draws are the same in every
process and Python version 3.2+, unlike ``hash()``). A small implementation rather than nlpaug: nlpaug (last
release 2022) draws from the global ``random`` state, so per-item determinism would depend on the order items
are processed, and its outputs change with its own version, which ours would then have to pin.
"""

from __future__ import annotations

import random
import re
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

TEXT_KEYS = ("question", "prompt", "text", "context", "problem", "query", "sentence", "passage")
"""Input fields the text perturbations change, when present as strings."""

LETTERS = string.ascii_uppercase
"""Option letters by position (``A`` = the first option)."""

Item = tuple[dict[str, Any], dict[str, Any]]
"""A sample's ``(input, reference)``."""

_WORD = re.compile(r"[A-Za-z]+")
_QWERTY_ROWS = ("qwertyuiop", "asdfghjkl", "zxcvbnm")
_NEIGHBOURS = {c: "".join(row[j] for j in (i - 1, i + 1) if 0 <= j < len(row)) for row in _QWERTY_ROWS for i, c in enumerate(row)}
DISTRACTORS = (
    "The Pacific is the largest ocean on Earth.",
    "A standard chess board has sixty-four squares.",
    "Honey stored in a sealed jar keeps for a very long time.",
    "The violin has four strings.",
    "Mount Kilimanjaro is in Tanzania.",
    "A leap year has three hundred and sixty-six days.",
    "Penguins live mostly in the Southern Hemisphere.",
    "The Danube flows into the Black Sea.",
    "Copper is a good conductor of electricity.",
    "A haiku has three lines.",
    "The Eiffel Tower is made of wrought iron.",
    "Bees communicate by dancing.",
    "Saturn has many moons.",
    "A marathon is about forty-two kilometres long.",
    "Tea is made from the leaves of Camellia sinensis.",
    "The first modern Olympic Games were held in Athens.",
)
"""Sentences ``distractor@1`` draws from: true, neutral and unrelated to any benchmark's question."""


class NotApplicableError(ValueError):
    """A perturbation cannot change this item (no options to rotate, no text field); the message says why."""


@dataclass(frozen=True)
class Perturbation:
    """One perturbation: ``variants(input, reference, rng)`` → the perturbed ``(input, reference)`` items
    (raises :class:`NotApplicableError`)."""

    name: str
    version: int
    seeded: bool
    variants: Callable[[dict[str, Any], dict[str, Any], random.Random], list[Item]]

    @property
    def ref(self) -> str:
        """``name@version``, as stored."""
        return f"{self.name}@{self.version}"

    def apply(self, input_: dict[str, Any], reference: dict[str, Any], seed: int, ordinal: int) -> list[Item]:
        """The variants of the item of ``ordinal`` (in its source benchmark) with ``seed``; the arguments are
        not changed. Raises :class:`NotApplicableError`."""
        rng = random.Random(f"{self.ref}:{seed}:{ordinal}")
        return self.variants(input_, reference, rng)


def gold_index(input_: dict[str, Any], reference: dict[str, Any]) -> int:
    """The 0-based position of the gold option: ``reference["gold"]`` when an integer, else the position of the
    letter ``reference["answer"]``. Raises :class:`NotApplicableError` when the item has no ``choices`` list or no
    gold within it."""
    choices = input_.get("choices")
    if not isinstance(choices, list) or len(choices) < 2:
        raise NotApplicableError("its input has no list of two or more choices")
    n = len(choices)
    gold = reference.get("gold")
    if isinstance(gold, int) and not isinstance(gold, bool) and 0 <= gold < n:
        return gold
    answer = reference.get("answer")
    if isinstance(answer, str) and len(answer.strip()) == 1 and answer.strip().upper() in LETTERS[:n]:
        return LETTERS.index(answer.strip().upper())
    raise NotApplicableError(f"its reference has no gold option among its {n} choices (an answer letter or a gold index)")


def rotate(input_: dict[str, Any], reference: dict[str, Any], shift: int) -> Item:
    """The item with its options rotated left by ``shift``: option ``i`` becomes ``choices[(i + shift) % n]``,
    so the gold at ``g`` moves to ``(g - shift) % n``; ``answer`` (a letter) and ``gold`` (an index) follow it,
    and a reference ``choices`` list as long as the input's (text continuations) is rotated with it."""
    choices = list(input_["choices"])
    n = len(choices)
    new_gold = (gold_index(input_, reference) - shift) % n
    new_input = {**input_, "choices": [choices[(i + shift) % n] for i in range(n)]}
    new_ref = dict(reference)
    if "answer" in reference:
        new_ref["answer"] = LETTERS[new_gold]
    if "gold" in reference:
        new_ref["gold"] = new_gold
    ref_choices = reference.get("choices")
    if isinstance(ref_choices, list) and len(ref_choices) == n and ref_choices != list(LETTERS[:n]):
        new_ref["choices"] = [ref_choices[(i + shift) % n] for i in range(n)]
    return new_input, new_ref


def _rotations(input_: dict[str, Any], reference: dict[str, Any], _rng: random.Random) -> list[Item]:
    gold_index(input_, reference)  # refuses an item without options
    return [rotate(input_, reference, s) for s in range(1, len(input_["choices"]))]


def _text_fields(input_: dict[str, Any]) -> list[str]:
    keys = [k for k in TEXT_KEYS if isinstance(input_.get(k), str) and input_[k].strip()]
    if not keys:
        raise NotApplicableError(f"its input has no text field ({', '.join(TEXT_KEYS)})")
    return keys


def _per_text(
    change: Callable[[str, random.Random], str],
) -> Callable[[dict[str, Any], dict[str, Any], random.Random], list[Item]]:
    def variants(input_: dict[str, Any], reference: dict[str, Any], rng: random.Random) -> list[Item]:
        return [({**input_, **{k: change(input_[k], rng) for k in _text_fields(input_)}}, dict(reference))]

    return variants


def _change_words(text: str, rng: random.Random, rate: float, change: Callable[[str, random.Random], str], min_len: int) -> str:
    """``text`` with each word of ``min_len``+ letters changed by ``change`` with probability ``rate``; at least one
    such word (drawn at random) when none was."""
    words = [m for m in _WORD.finditer(text) if len(m.group()) >= min_len]
    if not words:
        return text
    chosen = {i for i in range(len(words)) if rng.random() < rate} or {rng.randrange(len(words))}
    out, last = [], 0
    for i, m in enumerate(words):
        if i in chosen:
            out += [text[last : m.start()], change(m.group(), rng)]
            last = m.end()
    return "".join([*out, text[last:]])


def typo(word: str, rng: random.Random) -> str:
    """``word`` (2+ letters) with one typo: two adjacent letters swapped, one dropped, one doubled, or one replaced
    by a neighbour on a QWERTY keyboard (case kept)."""
    i = rng.randrange(len(word) - 1)
    op = rng.choice(("swap", "drop", "double", "neighbour"))
    if op == "swap" and word[i] != word[i + 1]:
        return word[:i] + word[i + 1] + word[i] + word[i + 2 :]
    if op == "drop":
        return word[:i] + word[i + 1 :]
    if op == "double":
        return word[: i + 1] + word[i] + word[i + 1 :]
    near = rng.choice(_NEIGHBOURS.get(word[i].lower(), "e"))
    return word[:i] + (near.upper() if word[i].isupper() else near) + word[i + 1 :]


def _recase(word: str, rng: random.Random) -> str:
    options = [w for w in (word.upper(), word.lower(), word.title()) if w != word]
    return rng.choice(options) if options else word


def _noise(text: str, rng: random.Random) -> str:
    """``text`` with about 1 letter in 20 (at least one) deleted, replaced or followed by a random lowercase letter."""
    positions = [i for i, c in enumerate(text) if c.isalpha()]
    if not positions:
        return text
    chosen = {i for i in positions if rng.random() < 0.05} or {rng.choice(positions)}
    out = []
    for i, c in enumerate(text):
        if i not in chosen:
            out.append(c)
            continue
        op = rng.choice(("delete", "replace", "insert"))
        letter = rng.choice(string.ascii_lowercase)
        out.append("" if op == "delete" else letter if op == "replace" else c + letter)
    return "".join(out)


PERTURBATIONS: dict[str, Perturbation] = {
    p.name: p
    for p in (
        Perturbation("choice_rotation", 1, False, _rotations),
        Perturbation("typos", 1, True, _per_text(lambda t, r: _change_words(t, r, 0.1, typo, 4))),
        Perturbation("casing", 1, True, _per_text(lambda t, r: _change_words(t, r, 0.25, _recase, 2))),
        Perturbation("distractor", 1, True, _per_text(lambda t, r: f"{r.choice(DISTRACTORS)} {t}")),
        Perturbation("char_noise", 1, True, _per_text(_noise)),
    )
}
"""Every perturbation, by name (one current version each)."""


def perturbation(ref: str) -> Perturbation:
    """The perturbation ``ref`` names: ``name`` (its current version) or ``name@version``. Raises ValueError
    naming the known ones (or the version available) otherwise."""
    name, _, version = ref.partition("@")
    found = PERTURBATIONS.get(name)
    if found is None:
        raise ValueError(f"unknown perturbation {name!r}; known: {', '.join(sorted(PERTURBATIONS))}")
    if version and version != str(found.version):
        raise ValueError(f"perturbation {name!r} has version {found.version}, not {version!r}")
    return found
