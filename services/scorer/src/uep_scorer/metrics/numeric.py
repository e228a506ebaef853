"""Finding numbers in free text and comparing them exactly (used by the GSM8K metric).

Rules (each one a deliberate, documented refinement of lm-evaluation-harness's GSM8K handling, whose
flexible regex is ``(-?[$0-9.,]{2,})|(-?[0-9]+)`` followed by deleting ``,``, ``$`` and a trailing
``.`` and comparing *strings*):

* Digits: every Unicode decimal digit (category ``Nd``: full-width ``１８``, Arabic-Indic, ...) is
  mapped to ASCII, and the full-width ASCII block U+FF01-U+FF5E (``＄``, ``，``, ``．``, ``－``) is
  NFKC-folded. NFKC is *not* applied to the whole text, because it turns superscripts into digits
  (``"25 m²"`` would end in the number 2).
* Minus: ASCII ``-``, U+2212 MINUS SIGN, U+FE63 and U+FF0D all count. A minus is a sign only when it
  is not glued to a preceding letter or digit, so ``"pages 10-12"`` yields 10 and 12, not -12.
* Thousands separators: a comma counts only inside a well-formed group, ``\\d{1,3}(,\\d{3})+`` not
  followed by another digit; ``"1,234"`` is 1234, while ``"1, 2"`` and ``"1,2"`` are two numbers
  (lm-eval would read ``"1,2"`` as 12).
* Typeset thousands separators: LaTeX's ``{,}`` (``12{,}500``, the comma braced so it takes no space),
  the LaTeX thin spaces ``\\,`` / ``\\thinspace`` / ``\\;`` and the Unicode thin and narrow no-break spaces
  (U+2009, U+202F; SI style ``12 500``) between digits are read as that comma when a group of exactly
  three digits follows, so ``"$\\boxed{12{,}500}$"`` is 12500 and ``"3{,}000"`` is 3000; the group rule
  above then still applies (``"3{,}14"``, a braced decimal comma, stays two numbers). LaTeX's ``\\!`` and
  braces inside a number are not separators and are left alone.
* ``$`` before the number (also after a sign), ``%`` after it, and a trailing ``.`` are not part of
  the number; ``".5"`` is 0.5.
* Values are :class:`decimal.Decimal`, so ``"18.0" == "18"`` and ``"1,234.00" == "1234"`` (lm-eval's
  string comparison would call those different).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from decimal import Decimal

_MINUS_SIGNS = {"\u2212": "-", "\ufe63": "-", "\uff0d": "-"}

# A typeset thousands separator between a digit and a group of exactly three digits.
_TYPESET_SEPARATOR = re.compile(r"(?<=[0-9])(?:\{,\}|\\,|\\thinspace(?:\{\})?|\\;|[\u2009\u202f])(?=[0-9]{3}(?![0-9]))")
_SEPARATOR_HINTS = ("{,}", "\\", "\u2009", "\u202f")

# re.ASCII keeps [0-9] and \w ASCII-only; non-ASCII digits were already mapped by normalize_digits.
_NUMBER = re.compile(
    r"""
    (?P<sign>(?<![0-9A-Za-z])-)?       # a sign, unless glued to a preceding word or number
    \$?                                 # currency symbol, dropped
    (?:
        (?P<int>[0-9]{1,3}(?:,[0-9]{3})+(?![0-9])|[0-9]+)(?P<frac>\.[0-9]+)?
      | (?P<bare_frac>\.[0-9]+)         # ".5"
    )
    """,
    re.VERBOSE | re.ASCII,
)


@dataclass(frozen=True)
class FoundNumber:
    """One number found in a text: ``raw`` as written (after digit folding), its exact ``value``."""

    raw: str
    value: Decimal
    start: int


def normalize_digits(text: str) -> str:
    """Fold non-ASCII digits, full-width ASCII and Unicode minus signs to ASCII, and typeset thousands
    separators (``{,}``, ``\\,``, thin spaces) to ``,`` (rules in the module docstring)."""
    if any(hint in text for hint in _SEPARATOR_HINTS):
        text = _TYPESET_SEPARATOR.sub(",", text)
    if text.isascii():
        return text
    out = []
    for ch in text:
        if ch.isascii():
            out.append(ch)
        elif ch in _MINUS_SIGNS:
            out.append(_MINUS_SIGNS[ch])
        elif unicodedata.category(ch) == "Nd":
            out.append(str(unicodedata.decimal(ch)))
        elif "\uff01" <= ch <= "\uff5e":
            out.append(unicodedata.normalize("NFKC", ch))
        else:
            out.append(ch)
    return "".join(out)


def _to_number(match: re.Match[str]) -> FoundNumber:
    if match.group("bare_frac") is not None:
        digits = "0" + match.group("bare_frac")
    else:
        digits = match.group("int").replace(",", "") + (match.group("frac") or "")
    sign = "-" if match.group("sign") else ""
    return FoundNumber(raw=match.group(0), value=Decimal(sign + digits), start=match.start())


def find_numbers(text: str) -> list[FoundNumber]:
    """All numbers in ``text`` (already passed through :func:`normalize_digits`), left to right."""
    return [_to_number(m) for m in _NUMBER.finditer(text)]


def canonical(value: Decimal) -> str:
    """Plain decimal string without exponent or trailing zeros: ``Decimal("1234.00")`` -> ``"1234"``."""
    if value == 0:
        return "0"
    text = format(value, "f")  # exact; Decimal.normalize() would round to the context's 28 digits
    return text.rstrip("0").rstrip(".") if "." in text else text


def parse_single_number(text: str) -> Decimal:
    """Parse a reference value such as ``"1,234"`` or ``"−5"``.

    Raises:
        ValueError: when ``text`` does not hold exactly one number.
    """
    found = find_numbers(normalize_digits(text))
    if len(found) != 1:
        raise ValueError(f"expected exactly one number in {text!r}, found {len(found)}")
    return found[0].value
