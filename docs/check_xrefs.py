"""Check the Sphinx-style cross-references of the docstrings and the docs: every ``:mod:``, ``:func:``,
``:class:``, ``:meth:``, ``:attr:``, ``:data:``, ``:exc:``, ``:obj:`` and ``:const:`` role must name
something that exists.

A target is resolved the way a reader (and Sphinx's Python domain) would: a leading ``~`` is dropped, a
``title <target>`` form is read for its target, a trailing ``()`` is dropped and a ``!target`` (a reference
that asks for no link) is skipped. A relative target (``.base``, ``..events.Foo``) is resolved against the
module the reference appears in, as a relative import would be; then as a name of that module (Sphinx's
``.name`` search). An unqualified or partly qualified one (``StackConfig.instances``) is looked up in the module
it appears in first, then as an absolute dotted path: the longest prefix that imports as a module, then its
attributes one by one (a field declared only by annotation, as a dataclass's or a pydantic model's, counts).
Markdown and reStructuredText files have no module: their targets must be absolute (or builtins).

Run by ``make check`` (``python docs/check_xrefs.py``); exit status 1 with one ``file:line: role target``
line per stale reference, 0 when all resolve. Sphinx's own nitpicky mode would need an autodoc build of every
package (a conf.py, an .rst page per module and a full build); this imports the modules instead.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import importlib
import importlib.util
import inspect
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

# Source roots: the folder a file's module name is relative to (the first that contains it wins).
SOURCE_ROOTS = [
    *sorted(ROOT.glob("libs/*/src")),
    *sorted(ROOT.glob("services/*/src")),
    *sorted(ROOT.glob("clients/*/src")),
    ROOT / "deploy" / "model-server" / "src",
    ROOT / "deploy" / "local",
    ROOT / "deploy" / "k8s",
    ROOT / "tests",
]
# Scripts run by path, whose module names are generic (bench/scheduler.py): loaded by path, never put on sys.path.
SCRIPT_ROOTS = [ROOT / "bench", ROOT / "docs"]
SKIP_PARTS = {".venv", ".tools", ".run", ".cache", "node_modules", "__pycache__", ".git"}
DOC_SUFFIXES = {".md", ".rst"}

ROLE = re.compile(r":(?:py:)?(mod|func|class|meth|attr|data|exc|obj|const):`([^`]+)`")


def _in_scripts(path: Path) -> bool:
    return any(path.is_relative_to(root) for root in SCRIPT_ROOTS)


def _files() -> Iterator[Path]:
    """The files to check; the scripts last, so that no module they import shadows a package's."""
    for path in sorted(ROOT.rglob("*"), key=lambda path: (_in_scripts(path), path)):
        rel = path.relative_to(ROOT)
        if SKIP_PARTS.intersection(rel.parts) or not path.is_file():
            continue
        if path.suffix == ".py" or path.suffix in DOC_SUFFIXES:
            yield path


def _module_name(path: Path) -> str | None:
    """The dotted module name of ``path`` as it is imported, or None for a file outside every source root."""
    for root in [*SOURCE_ROOTS, *SCRIPT_ROOTS]:
        if path.is_relative_to(root):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            return ".".join(parts) if parts else None
    return None


_modules: dict[str, ModuleType | None] = {}


def _import(name: str) -> ModuleType | None:
    """The module ``name`` imported, or None where it does not import (not a module, or it fails)."""
    if name not in _modules:
        try:
            _modules[name] = importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a module that does not import is a target that does not resolve
            _modules[name] = None
    return _modules[name]


def _load(path: Path, name: str) -> ModuleType | None:
    """The module of ``path``: imported by ``name`` where it is a package's; a script (bench/, docs/) by path."""
    if not any(path.is_relative_to(root) for root in SCRIPT_ROOTS):
        return _import(name)
    key = f"_xref_{name.replace('.', '_')}"
    if key not in _modules:
        sys.path.insert(0, str(path.parent))  # as when the script runs: its folder first on the path
        spec = importlib.util.spec_from_file_location(key, path)
        module = importlib.util.module_from_spec(spec) if spec and spec.loader else None
        try:
            if spec and spec.loader and module is not None:
                spec.loader.exec_module(module)
        except Exception:  # noqa: BLE001 - a script that does not load (it needs a server, say): its top-level names
            module = _outline(path, key)
        finally:
            sys.path.remove(str(path.parent))
            for name_, loaded in list(sys.modules.items()):  # a sibling script (bench/scheduler.py) must not
                file = getattr(loaded, "__file__", None) or ""  # shadow a package of the same name later
                if any(Path(file).is_relative_to(root) for root in SCRIPT_ROOTS):
                    del sys.modules[name_]
        _modules[key] = module
    return _modules[key]


def _outline(path: Path, key: str) -> ModuleType:
    """A stand-in module holding the names ``path`` defines or imports at top level (each None: not walked)."""
    module = ModuleType(key)
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        targets: list[ast.expr] = []
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            setattr(module, node.name, None)
        elif isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                setattr(module, (alias.asname or alias.name).partition(".")[0], None)
        for target in targets:
            if isinstance(target, ast.Name):
                setattr(module, target.id, None)
    return module


def _member(obj: Any, name: str) -> tuple[bool, Any]:
    """``(found, value)`` of attribute ``name`` of ``obj``; a field declared only by annotation counts."""
    try:
        return True, getattr(obj, name)
    except AttributeError:
        pass
    if isinstance(obj, type):
        for klass in obj.__mro__:
            if name in getattr(klass, "__annotations__", {}) or name in (getattr(klass, "model_fields", None) or {}):
                return True, None
            if _assigned_on_self(klass, name):  # an instance attribute: ``self.name = ...`` in a method
                return True, None
    elif isinstance(obj, ModuleType) and name in getattr(obj, "__annotations__", {}):
        return True, None
    return False, None


def _assigned_on_self(klass: type, name: str) -> bool:
    try:
        source = inspect.getsource(klass)
    except (OSError, TypeError):
        return False
    return re.search(rf"\bself\.{re.escape(name)}\s*(?::[^=\n]+)?=[^=]", source) is not None


def _walk(obj: Any, names: list[str]) -> bool:
    for name in names:
        if obj is None:  # an annotated field's own attributes cannot be walked: accept the path
            return True
        found, obj = _member(obj, name)
        if not found:
            return False
    return True


def _absolute(target: str) -> bool:
    """Whether dotted ``target`` resolves: its longest importable prefix, then attributes."""
    parts = target.split(".")
    for cut in range(len(parts), 0, -1):
        module = _import(".".join(parts[:cut]))
        if module is not None:
            return _walk(module, parts[cut:])
    return hasattr(builtins, parts[0]) and _walk(getattr(builtins, parts[0]), parts[1:])


def _classes(source: str) -> list[tuple[int, int, list[str]]]:
    """``(first line, last line, qualified name parts)`` of every class of ``source``, outer ones first."""
    found: list[tuple[int, int, list[str]]] = []

    def visit(node: ast.AST, outer: list[str]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                found.append((child.lineno, child.end_lineno or child.lineno, [*outer, child.name]))
                visit(child, [*outer, child.name])
            elif not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(child, outer)

    with contextlib.suppress(SyntaxError):
        visit(ast.parse(source), [])
    return found


def resolves(
    target: str, here: str | None, module: ModuleType | None, is_package: bool, scopes: Sequence[list[str]] = ()
) -> bool:
    """Whether ``target`` (a role's target, cleaned) resolves from module ``here`` (None: a document), written
    inside the classes ``scopes`` (qualified name parts, innermost first: a method's docstring names its class's
    other members unqualified)."""
    if target.startswith("."):
        if here is None:
            return False
        dots = len(target) - len(target.lstrip("."))
        rest = target[dots:]
        package = here if is_package else here.rpartition(".")[0]
        for _ in range(dots - 1):
            package = package.rpartition(".")[0]
        if package and rest and _absolute(f"{package}.{rest}"):
            return True
        return module is not None and bool(rest) and _walk(module, rest.split("."))
    if module is not None and any(_walk(module, [*scope, *target.split(".")]) for scope in [*scopes, []]):
        return True
    return _absolute(target)


def _clean(raw: str) -> str | None:
    """The target of a role's text, or None where the role asks for no link (``!target``)."""
    text = raw.strip()
    if text.endswith(">") and "<" in text:
        text = text[text.rindex("<") + 1 : -1].strip()
    if text.startswith("!"):
        return None
    text = text.lstrip("~")
    if text.endswith("."):  # a role broken over two lines of a table: no target to check
        return None
    if text.endswith("()"):
        text = text[:-2]
    return text


def stale_references() -> list[str]:
    """``file:line: :role:`target``` for each reference that does not resolve, in file order."""
    for root in SOURCE_ROOTS:  # as the tests and the stack scripts have them on their path
        if str(root) not in sys.path:
            sys.path.append(str(root))
    stale: list[str] = []
    for path in _files():
        text = path.read_text(encoding="utf-8", errors="replace")
        if ":`" not in text:
            continue
        here = _module_name(path) if path.suffix == ".py" else None
        module = _load(path, here) if here else None
        if any(path.is_relative_to(root) for root in SCRIPT_ROOTS):
            here = None  # a script is no package: it has no relative targets, but it imports its siblings
            sys.path.append(str(path.parent))
        classes = _classes(text) if path.suffix == ".py" else []
        for number, line in enumerate(text.splitlines(), start=1):
            for match in ROLE.finditer(line):
                target = _clean(match.group(2))
                scopes = [names for first, last, names in reversed(classes) if first <= number <= last]
                if target is None or resolves(target, here, module, path.name == "__init__.py", scopes):
                    continue
                stale.append(f"{path.relative_to(ROOT)}:{number}: :{match.group(1)}:`{match.group(2)}`")
    return stale


def main() -> int:
    """Print each stale reference; 1 if there is any, else 0."""
    stale = stale_references()
    for line in stale:
        print(line)
    if stale:
        print(f"{len(stale)} stale cross-reference(s)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
