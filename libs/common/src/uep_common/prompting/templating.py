"""The one sandboxed Jinja2 environment for every template a user can send: benchmark prompts, A/B arm
prompts and judge templates (the inference service, the judge service and the gateway's checks all use it).

Isolation: :class:`jinja2.sandbox.ImmutableSandboxedEnvironment` (Jinja2's own sandbox, see
https://jinja.palletsprojects.com/en/3.1.x/sandbox/): no attribute or item whose name starts with ``_``
(so ``cycler.__init__.__globals__``, ``''.__class__.__mro__``, ``__subclasses__`` and
``self._TemplateReference__context`` are refused), no calls of unsafe callables, no mutation of lists,
dicts and sets (``xs.extend(xs)`` would double a list per step). ``str.format``/``format_map`` are refused
too (their field widths cannot be bounded before formatting); use ``~`` or the ``format`` filter. Global
``lipsum`` is removed (its ``n`` is an unbounded amount of text); ``range`` is replaced by a bounded one.

Work and size limits (:class:`TemplateLimits`), enforced while rendering, each raising
:class:`TemplateLimitError` (a :class:`jinja2.TemplateError`):

* source length, checked before parsing;
* steps: every loop iteration (each ``{% for %}`` iterable is wrapped at parse time), every call and every
  filter counts one; the render stops past ``max_steps`` or past ``max_seconds`` of wall time (checked
  every 64 steps), so neither nested loops nor recursive macros can run away;
* sizes, checked *before* the result is built where Python would build it in one go: ``str``/``list`` times
  an integer, ``%`` formatting widths, ``**`` and ``*`` on integers (result bits), ``~`` and ``+``
  concatenation, the width/count arguments of ``center``, ``ljust``, ``rjust``, ``zfill``, ``expandtabs``,
  ``replace`` and of every filter (an integer argument above ``max_output_chars``), and every call's or
  filter's result after it returns;
* output: the rendered text is accumulated chunk by chunk and the render stops past ``max_output_chars``.

A source nested too deeply for the parser or Python's compiler (thousands of parentheses) is refused as a
:class:`jinja2.TemplateSyntaxError` when it is compiled.

Any other exception raised while rendering (``OverflowError``, ``RecursionError``, ``ValueError`` from an
over-long integer conversion, ...) comes out as :class:`TemplateRenderFailure`, also a
:class:`jinja2.TemplateError`, so callers catch one type.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import wraps
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.visitor import NodeTransformer
from markupsafe import soft_str


@dataclass(frozen=True)
class TemplateLimits:
    """Bounds of one template and one render of it.

    Attributes:
        max_source_chars: longest template source, characters.
        max_output_chars: longest rendered text, and longest string/sequence built on the way, characters
            (or items).
        max_steps: loop iterations + calls + filter applications per render.
        max_seconds: wall-clock seconds per render.
        max_range: most items one ``range()`` may have.
        max_int_bits: largest integer a ``*`` or ``**`` may produce, bits.
    """

    max_source_chars: int = 65_536
    max_output_chars: int = 262_144
    max_steps: int = 200_000
    max_seconds: float = 2.0
    max_range: int = 100_000
    max_int_bits: int = 65_536


DEFAULT_LIMITS = TemplateLimits()


class TemplateLimitError(jinja2.TemplateRuntimeError):
    """A template exceeded one of its :class:`TemplateLimits` (the message says which and by how much)."""


class TemplateRenderFailure(jinja2.TemplateRuntimeError):
    """Rendering raised a non-Jinja exception (e.g. ``OverflowError``); the message names its type."""


class _Budget:
    """Steps and deadline of the render running in this thread."""

    __slots__ = ("limits", "steps", "deadline")

    def __init__(self, limits: TemplateLimits) -> None:
        self.limits = limits
        self.steps = 0
        self.deadline = time.monotonic() + limits.max_seconds

    def tick(self) -> None:
        self.steps += 1
        if self.steps > self.limits.max_steps:
            raise TemplateLimitError(f"template takes more than {self.limits.max_steps} steps (loop iterations, calls, filters)")
        if not self.steps & 63 and time.monotonic() > self.deadline:
            raise TemplateLimitError(f"template takes longer than {self.limits.max_seconds} s to render")


_current = threading.local()


def _tick() -> None:
    budget = getattr(_current, "budget", None)
    if budget is not None:
        budget.tick()


_SIZED = (str, bytes, list, tuple, dict, set, frozenset)
_FORMAT_WIDTH = re.compile(r"%[-+ #0]*(\*|\d+)?(?:\.(\*|\d+))?")
_WIDTH_METHODS = {"center": 0, "ljust": 0, "rjust": 0, "zfill": 0}


def _count(haystack: str | bytes, needle: str | bytes) -> int:
    """``haystack.count(needle)`` for a ``needle`` of the same type as ``haystack``."""
    if isinstance(haystack, str):
        if not isinstance(needle, str):
            raise TypeError("str.count() needs a str argument")
        return haystack.count(needle)
    if isinstance(needle, str):
        raise TypeError("bytes.count() needs a bytes-like argument")
    return haystack.count(needle)


class _Bounds:
    """The size checks, bound to one :class:`TemplateLimits`."""

    def __init__(self, limits: TemplateLimits) -> None:
        self.limits = limits
        self.max_len = limits.max_output_chars

    def too_long(self, what: str, n: int | float) -> TemplateLimitError:
        return TemplateLimitError(f"{what} would have {n:.0f} characters/items, more than {self.max_len}")

    def check_size(self, value: Any, what: str) -> Any:
        if isinstance(value, _SIZED) and len(value) > self.max_len:
            raise self.too_long(what, len(value))
        if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > self.limits.max_int_bits:
            raise TemplateLimitError(
                f"{what} would be an integer of {value.bit_length()} bits, more than {self.limits.max_int_bits}"
            )
        return value

    def check_int_arg(self, value: Any, what: str) -> None:
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > self.max_len:
            raise TemplateLimitError(f"{what}: argument {value} is larger than {self.max_len}")

    def check_percent(self, fmt: str) -> None:
        for m in _FORMAT_WIDTH.finditer(fmt):
            for part in m.groups():
                if part == "*":
                    raise TemplateLimitError("'%' formatting with '*' widths is not allowed in templates")
                if part is not None and int(part) > self.max_len:
                    raise TemplateLimitError(f"'%' formatting width {part} is larger than {self.max_len}")

    def binop(self, op: str, left: Any, right: Any) -> None:
        """Refuse ``left op right`` if its result would exceed the limits (checked before computing it)."""

        def is_int(v: Any) -> bool:
            return isinstance(v, int) and not isinstance(v, bool)

        if op == "*":
            for seq, n in ((left, right), (right, left)):
                if isinstance(seq, (str, bytes, list, tuple)) and is_int(n) and len(seq) * max(n, 0) > self.max_len:
                    raise self.too_long("sequence repetition", len(seq) * n)
            if is_int(left) and is_int(right) and left.bit_length() + right.bit_length() > self.limits.max_int_bits:
                raise TemplateLimitError(f"integer product larger than {self.limits.max_int_bits} bits")
        elif op == "**":
            if (
                is_int(left)
                and is_int(right)
                and abs(left) > 1
                and right > 0
                and right * math.log2(abs(left)) > self.limits.max_int_bits
            ):
                raise TemplateLimitError(f"integer power larger than {self.limits.max_int_bits} bits")
        elif op == "+":
            if isinstance(left, _SIZED) and isinstance(right, _SIZED) and len(left) + len(right) > self.max_len:
                raise self.too_long("concatenation", len(left) + len(right))
        elif op == "%" and isinstance(left, str):
            self.check_percent(left)

    def method_call(self, obj: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Refuse a call of a ``str``/``bytes`` method whose result would exceed the limits."""
        owner = getattr(obj, "__self__", None)
        name = getattr(obj, "__name__", "")
        if not isinstance(owner, (str, bytes)):
            return
        if name in _WIDTH_METHODS and args:
            self.check_int_arg(args[0], f"str.{name}")
        elif name == "expandtabs":
            size = args[0] if args else kwargs.get("tabsize", 8)
            tabs = owner.count("\t") if isinstance(owner, str) else owner.count(b"\t")
            if isinstance(size, int) and tabs * size > self.max_len:
                raise self.too_long("str.expandtabs", tabs * size)
        elif name == "replace" and len(args) >= 2:
            old, new = args[0], args[1]
            if isinstance(old, type(owner)) and isinstance(new, type(owner)):
                hits = len(owner) + 1 if not old else _count(owner, old)
                if len(args) > 2 and isinstance(args[2], int) and args[2] >= 0:
                    hits = min(hits, args[2])
                if len(owner) + hits * max(0, len(new) - len(old)) > self.max_len:
                    raise self.too_long("str.replace", len(owner) + hits * (len(new) - len(old)))


class _InstrumentLoops(NodeTransformer):
    """Wraps every ``{% for %}`` iterable in ``environment.uep_bounded_iter`` and every ``~`` concatenation in
    ``environment.uep_concat``: environment attributes, which a template cannot name or shadow."""

    def visit_For(self, node: nodes.For) -> nodes.Node:
        self.generic_visit(node)
        node.iter = nodes.Call(nodes.EnvironmentAttribute("uep_bounded_iter"), [node.iter], [], None, None, lineno=node.lineno)
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        self.generic_visit(node)
        return nodes.Call(nodes.EnvironmentAttribute("uep_concat"), list(node.nodes), [], None, None, lineno=node.lineno)


class BoundedSandboxedEnvironment(ImmutableSandboxedEnvironment):
    """Jinja2's immutable sandbox with the work and size limits of the module docstring.

    Render its templates with :func:`render`, which sets up the per-render budget and caps the output;
    ``Template.render`` still applies the size checks but neither the step nor the time budget.
    """

    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def __init__(self, limits: TemplateLimits = DEFAULT_LIMITS, **options: Any) -> None:
        super().__init__(**options)
        self.limits = limits
        self._bounds = _Bounds(limits)
        self.globals.pop("lipsum", None)
        self.globals["range"] = self._range
        self.filters = {name: self._bounded_filter(name, fn) for name, fn in self.filters.items()}

    # -- limits applied from compiled template code ------------------------------------------------
    def _range(self, *args: int) -> range:
        try:
            rng = range(*args)
            n: float = len(rng)
        except OverflowError:
            n = math.inf
        if n > self.limits.max_range:
            raise TemplateLimitError(f"range() of more than {self.limits.max_range} items")
        return rng

    def uep_bounded_iter(self, iterable: Iterable[Any]) -> Iterator[Any]:
        """``iterable``, counting one step per item (wrapped around every loop at parse time)."""
        for item in iterable:
            _tick()
            yield item

    def uep_concat(self, *values: Any) -> str:
        """``a ~ b ~ ...`` with its length checked before joining (wrapped around ``~`` at parse time)."""
        parts = [soft_str(v) if not isinstance(v, str) else v for v in values]
        total = sum(map(len, parts))
        if total > self.limits.max_output_chars:
            raise self._bounds.too_long("concatenation", total)
        return "".join(parts)

    def call_binop(self, context: jinja2.runtime.Context, operator: str, left: Any, right: Any) -> Any:
        """Intercepted ``* ** + %``: refused before computing when the result would exceed the limits."""
        self._bounds.binop(operator, left, right)
        return self._bounds.check_size(super().call_binop(context, operator, left, right), f"{operator!r}")

    def call(__self, __context: jinja2.runtime.Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        """Every call in a template: one step, size checks on the arguments of width methods and on the result."""
        _tick()
        __self._bounds.method_call(__obj, args, kwargs)
        return __self._bounds.check_size(super().call(__context, __obj, *args, **kwargs), "call result")

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        """Jinja2's rules, and no ``str.format``/``format_map`` (widths cannot be bounded beforehand)."""
        if isinstance(obj, str) and attr in ("format", "format_map"):
            return False
        return super().is_safe_attribute(obj, attr, value)

    def wrap_str_format(self, value: Any) -> None:
        """Never wraps: ``str.format`` is refused by :meth:`is_safe_attribute` instead."""
        return None

    def _bounded_filter(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        bounds = self._bounds
        passes_first = getattr(fn, "jinja_pass_arg", None) is not None

        @wraps(fn)
        def bounded(*args: Any, **kwargs: Any) -> Any:
            _tick()
            data_args = args[2:] if passes_first else args[1:]  # skip the context/environment and the value
            for value in (*data_args, *kwargs.values()):
                bounds.check_int_arg(value, f"filter {name!r}")
            if name == "format" and (args[1:2] if passes_first else args[:1]):
                bounds.check_percent(str(args[1] if passes_first else args[0]))
            if name == "replace":
                value = args[1] if passes_first else args[0]
                rest = args[2:] if passes_first else args[1:]
                if isinstance(value, str):
                    bounds.method_call(value.replace, tuple(rest), kwargs)
            result = fn(*args, **kwargs)
            return bounds.check_size(result, f"filter {name!r}")

        return bounded

    # -- parsing ----------------------------------------------------------------------------------
    def compile(
        self,
        source: str | nodes.Template,
        name: str | None = None,
        filename: str | None = None,
        raw: bool = False,
        defer_init: bool = False,
    ) -> Any:
        """Jinja2's ``compile``, with a source nested past what the parser, the code generator or Python's
        compiler can take (``((((…))))``, ``[[[[…]]]]``, ``----1``, long ``+`` chains) refused as a
        :class:`jinja2.TemplateSyntaxError` instead of escaping as ``RecursionError``, ``MemoryError`` or
        Python's own ``SyntaxError`` ("too many nested parentheses")."""
        try:
            return super().compile(source, name, filename, raw, defer_init)  # type: ignore[call-overload]
        except jinja2.TemplateSyntaxError:
            raise
        except (RecursionError, MemoryError, SyntaxError) as exc:
            reason = exc.msg if isinstance(exc, SyntaxError) else type(exc).__name__
            raise jinja2.TemplateSyntaxError(
                f"template is nested too deeply to compile ({reason}): flatten its expressions", 1, name, filename
            ) from None

    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        if len(source) > self.limits.max_source_chars:
            raise jinja2.TemplateSyntaxError(
                f"template is {len(source)} characters long, more than {self.limits.max_source_chars}", 1, name, filename
            )
        tree = super()._parse(source, name, filename)
        instrumented: nodes.Template = _InstrumentLoops().visit(tree)
        return instrumented


def make_environment(
    limits: TemplateLimits = DEFAULT_LIMITS,
    *,
    loader: jinja2.BaseLoader | None = None,
    filters: Mapping[str, Callable[..., Any]] | None = None,
    keep_trailing_newline: bool = True,
) -> BoundedSandboxedEnvironment:
    """A :class:`BoundedSandboxedEnvironment` with ``StrictUndefined`` (a missing variable fails loudly) and
    no autoescaping (templates produce model prompts, not HTML). ``filters`` are added bounded like the
    built-in ones."""
    env = BoundedSandboxedEnvironment(
        limits, loader=loader, undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=keep_trailing_newline
    )
    for name, fn in (filters or {}).items():
        env.filters[name] = env._bounded_filter(name, fn)
    return env


def render(template: jinja2.Template, variables: Mapping[str, Any]) -> str:
    """Render ``template`` (compiled by a :class:`BoundedSandboxedEnvironment`) within its limits.

    Returns:
        The rendered text, at most ``limits.max_output_chars`` characters.

    Raises:
        TemplateLimitError: a step, time, size or output limit was exceeded.
        TemplateRenderFailure: a non-Jinja exception escaped the template (message names its type).
        jinja2.TemplateError: any other template error (undefined variable, security error, ...).
    """
    env = template.environment
    if not isinstance(env, BoundedSandboxedEnvironment):
        raise TypeError("render() takes templates of a BoundedSandboxedEnvironment")
    limits = env.limits
    outer = getattr(_current, "budget", None)
    _current.budget = _Budget(limits)
    try:
        out: list[str] = []
        size = 0
        for chunk in template.generate(**variables):
            size += len(chunk)
            if size > limits.max_output_chars:
                raise TemplateLimitError(f"rendered text longer than {limits.max_output_chars} characters")
            out.append(chunk)
        return "".join(out)
    except jinja2.TemplateError:
        raise
    except (MemoryError, Exception) as exc:  # noqa: BLE001 - anything a template triggers is its error
        raise TemplateRenderFailure(f"template raised {type(exc).__name__}: {str(exc)[:300]}") from None
    finally:
        _current.budget = outer


def trial_render(env: BoundedSandboxedEnvironment, source: str, variables: Mapping[str, Any]) -> None:
    """Compile ``source`` in ``env`` and render it once with placeholder ``variables`` (every variable the real
    render passes), to refuse a template at the door rather than when the first item is rendered.

    Raises:
        jinja2.TemplateSyntaxError: syntax error or source over the length limit.
        jinja2.UndefinedError: the template uses a variable that the real render does not pass.
        jinja2.exceptions.SecurityError: the template reaches for something the sandbox refuses.
        TemplateLimitError, TemplateRenderFailure: see :func:`render`.
    """
    render(env.from_string(source), variables)
