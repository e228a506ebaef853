"""``uep``: evaluate models on the platform from a terminal or a CI pipeline.

Commands (each takes ``--json`` for scripts, and ``--url`` to name another gateway):
``login``, ``logout``, ``whoami``; ``benchmarks list|show|upload``; ``models list|show|add|disable|enable``
(:mod:`uep_cli.models`);
``run`` (``--follow`` draws a progress bar; ``--fail-under X`` gates on the score); ``status``, ``list``,
``results`` (every item, JSON Lines or CSV), ``report``, ``compare``, ``leaderboard``; ``cancel``,
``stop``, ``retry``.

Exit codes (:data:`EXIT_CODES`): 0 done; 1 the API refused the request or could not be reached (one
line names the status, the field and the reason); 2 bad usage (an unknown option, a missing argument);
3 an evaluation followed by ``run --follow`` ended other than ``completed``; 4 ``--fail-under`` not met;
130 interrupted (the evaluations go on). Heavy modules (httpx, rich) are imported by the commands that use
them, so ``uep --help`` starts fast.
"""

from __future__ import annotations

import contextlib
import json as jsonlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from typer.core import TyperGroup

from uep_cli import models

if TYPE_CHECKING:
    from uep_cli.api import Api

EXIT_CODES = {
    0: "done",
    1: "the API refused the request, or the gateway could not be reached",
    2: "bad usage",
    3: "a followed evaluation ended other than completed",
    4: "--fail-under not met",
    130: "interrupted",
}


def _runtime_params_without_pydantic(build: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Typer's builder of a parameter's value coercion (``build``), but without pydantic for ``str`` and ``bool``.

    typer coerces each parameter's value through a pydantic ``TypeAdapter``, and the first one imports pydantic
    (about a third of ``uep status ID``'s start-up, more without a bytecode cache) although click has already
    parsed a string option's value into a ``str``, and a flag's (``--json``, ``--help``) into a ``bool`` or None.
    For those two types, without a ``parser`` and not a file, this builder returns typer's own pass-through
    coercion (which only checks the value's type); every other type (int, float, Path, lists) keeps typer's.
    ``uep`` has no ``bool`` argument and no option read from an environment variable, whose strings ("true")
    only pydantic's coercion would accept."""
    from typer._coercion import PassThroughRuntimeParam

    def build_without_pydantic(descriptor: Any) -> Any:
        if (
            descriptor.annotation in (str, bool)
            and descriptor.file_annotation is None
            and descriptor.parameter_info.parser is None
        ):
            return PassThroughRuntimeParam(parameter_info=descriptor.parameter_info, annotation=descriptor.annotation)
        return build(descriptor)

    return build_without_pydantic


class _Group(TyperGroup):
    """The root command group: typer's, run with :func:`_runtime_params_without_pydantic` in place."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        """Run the command line (click's ``main``: parse the arguments, dispatch, exit)."""
        from typer import core as typer_core

        core: Any = typer_core  # the module whose parameters call its global build_runtime_param
        build = getattr(core, "build_runtime_param", None)
        try:
            fast = _runtime_params_without_pydantic(build) if build is not None else None
        except ImportError:  # a typer without the pass-through coercion: its own throughout
            fast = None
        if fast is None:
            return super().main(*args, **kwargs)
        core.build_runtime_param = fast
        try:
            return super().main(*args, **kwargs)
        finally:
            core.build_runtime_param = build


app = typer.Typer(
    cls=_Group,
    name="uep",
    help="Evaluate models on the uep platform. Exit codes: "
    + "; ".join(f"{k} {v}" for k, v in EXIT_CODES.items())
    + ". Credentials: `uep login`, or UEP_URL / UEP_API_KEY / UEP_TENANT.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: rendering it with rich would import rich (~0.3 s) for every --help
)
benchmarks_app = typer.Typer(help="The benchmark catalogue.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(benchmarks_app, name="benchmarks")
app.add_typer(models.app, name="models")

Json = Annotated[bool, typer.Option("--json", help="Print the API's JSON instead of tables.")]
Url = Annotated[str | None, typer.Option("--url", help="Gateway base URL (default: UEP_URL, then the stored login).")]


# ---------------------------------------------------------------- plumbing


def _fail(message: str, code: int = 1) -> NoReturn:
    typer.echo(f"uep: {message}", err=True)
    raise typer.Exit(code)


def _api(url: str | None, timeout: float = 30.0) -> Api:
    from uep_cli.api import Api
    from uep_cli.config import ConfigError, credentials

    try:
        return Api(credentials(url), timeout=timeout)
    except ConfigError as exc:
        _fail(str(exc))


def _call(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Run one API call; an :class:`~uep_cli.api.ApiError` becomes one line on stderr and exit code 1."""
    from uep_cli.api import ApiError

    try:
        return fn(*args, **kwargs)
    except ApiError as exc:
        _fail(str(exc))


def _print_json(data: Any) -> None:
    typer.echo(jsonlib.dumps(data, indent=2, default=str))


def _table(title: str, columns: list[str], rows: list[list[Any]], whole: tuple[str, ...] = ()) -> None:
    """Print ``rows`` as a rich table under ``title`` (None cells empty), as wide as the terminal.

    The columns named in ``whole`` are never cut: at least as wide as their longest cell, never wrapped. Where the
    table is too wide, the other columns shrink (their text wraps at spaces; a word longer than its column ends
    in "…"), and where even that is not enough the lines run past the terminal's width instead of being cropped."""
    from rich.console import Console
    from rich.table import Table

    cells = [["" if v is None else str(v) for v in r] for r in rows]
    t = Table(title=title)
    for i, c in enumerate(columns):
        if c in whole:
            t.add_column(c, no_wrap=True, min_width=max([len(c), *(len(r[i]) for r in cells)]))
        else:
            t.add_column(c)
    for r in cells:
        t.add_row(*r)
    Console().print(t, crop=not whole)


def _pct(x: float | None) -> str:
    return "" if x is None else f"{x:.3f}"


def _interval(lo: float | None, hi: float | None) -> str:
    return "" if lo is None or hi is None else f"[{lo:.3f}, {hi:.3f}]"


def headline_cells(e: dict[str, Any]) -> tuple[str, str]:
    """The ``headline`` column and its interval of an evaluation of ``GET /v1/evaluations``: the metric's name
    and value (``ndcg@10 0.935`` for a ranker, ``accuracy 66.7 %`` for an LLM; the API's ``headline``, else the
    ``accuracy`` of a gateway without it), and the interval with its method (``[0.901–0.962] bootstrap``,
    ``[30.0–95.0] Wilson``; :mod:`uep_cli.figures`); ``""`` for what is missing."""
    from uep_cli.figures import headline_text

    return headline_text(e)


# ---------------------------------------------------------------- identity


@app.command()
def login(
    url: Annotated[str, typer.Option("--url", prompt="Gateway URL", help="The gateway's base URL.")],
    api_key: Annotated[str | None, typer.Option("--api-key", help="An API key (uep_…); else --username.")] = None,
    username: Annotated[str | None, typer.Option("--username", help="Sign in as this user (a session).")] = None,
    password: Annotated[str | None, typer.Option("--password", help="The user's password (prompted when omitted).")] = None,
    tenant: Annotated[str | None, typer.Option("--tenant", help="Tenant slug to act in (X-UEP-Tenant).")] = None,
    json: Json = False,
) -> None:
    """Check credentials against the gateway and store them (mode 0600) for the other commands."""
    from uep_cli.api import Api
    from uep_cli.config import Credentials, write_file

    url = url.rstrip("/")
    if not api_key and not username:
        api_key = typer.prompt("API key", hide_input=True)
    stored: dict[str, str] = {"url": url}
    if api_key:
        creds = Credentials(url=url, api_key=api_key, tenant=tenant)
        stored["api_key"] = api_key
    else:
        if password is None:
            password = typer.prompt("Password", hide_input=True)
        with Api(Credentials(url=url, tenant=tenant)) as anon:
            r = _call(anon.request, "POST", "/v1/auth/login", json={"username": username, "password": password})
        session, csrf = r.cookies.get("uep_session"), r.cookies.get("uep_csrf")
        if not session:
            _fail("the gateway set no session cookie")
        creds = Credentials(url=url, session=session, csrf=csrf, tenant=tenant, username=username)
        stored |= {"session": session, "csrf": csrf or "", "username": username or ""}
    with Api(creds) as api:
        me = _call(api.get, "/v1/auth/me")
    if tenant:
        stored["tenant"] = tenant
    path = write_file(stored)
    if json:
        _print_json(me)
    else:
        typer.echo(f"signed in to {url} as {_who(me)}; credentials stored in {path} (mode 0600)")


def _who(me: dict[str, Any]) -> str:
    tenant = me.get("tenant")
    slug = tenant.get("slug") if isinstance(tenant, dict) else tenant
    return f"{me.get('name', '?')} ({me.get('kind', '?')}; {me.get('role', '?')} of {slug or '?'})"


@app.command()
def logout(url: Url = None) -> None:
    """End the stored session (if any) and delete the stored credentials."""
    from uep_cli.api import ApiError
    from uep_cli.config import read_file, remove_file

    if read_file().get("session"):
        with _api(url) as api, contextlib.suppress(ApiError):  # an expired session needs no logout
            api.request("POST", "/v1/auth/logout")
    typer.echo("credentials removed" if remove_file() else "no stored credentials")


@app.command()
def whoami(url: Url = None, json: Json = False) -> None:
    """Who the stored credentials are: user or key, tenant, role."""
    with _api(url) as api:
        me = _call(api.get, "/v1/auth/me")
    _print_json(me) if json else typer.echo(_who(me))


# ---------------------------------------------------------------- catalogue


@benchmarks_app.command("list")
def benchmarks_list(url: Url = None, json: Json = False) -> None:
    """Every benchmark the caller sees."""
    with _api(url) as api:
        rows = _call(api.get, "/v1/benchmarks")
    if json:
        return _print_json(rows)
    _table(
        "benchmarks",
        ["slug", "name", "category", "type", "metric", "samples", "version", "status"],
        [
            [
                b["slug"],
                b["name"],
                b["category"],
                b["evaluation_type"],
                b.get("metric"),
                b["sample_count"],
                b["version"][:12],
                b["status"],
            ]
            for b in rows
        ],
        whole=("slug",),
    )


@benchmarks_app.command("show")
def benchmarks_show(
    ref: Annotated[str, typer.Argument(help="Benchmark slug or id.")],
    samples: Annotated[int, typer.Option(help="Samples to preview.")] = 3,
    url: Url = None,
    json: Json = False,
) -> None:
    """One benchmark: its catalogue entry and a preview of its first samples."""
    with _api(url) as api:
        rows = [b for b in _call(api.get, "/v1/benchmarks") if ref in (b["slug"], b["id"])]
        if not rows:
            _fail(f"404 path.ref: unknown benchmark {ref!r}")
        preview = _call(api.get, f"/v1/benchmarks/{ref}/samples", limit=samples)
    if json:
        return _print_json({"versions": rows, "samples": preview})
    for b in rows:
        typer.echo(f"{b['slug']} {b['version'][:12]} — {b['name']}: {b['description']}")
        typer.echo(
            f"  category {b['category']}, {b['evaluation_type']}, metric {b.get('metric')}, {b['sample_count']} samples, "
            f"licence {b.get('license')}, dimensions {', '.join(b['capability_dimensions']) or '–'}"
        )
    for s in preview[:samples]:
        typer.echo(f"--- sample {s.get('ordinal')}\n{str(s.get('prompt', ''))[:500]}")


@benchmarks_app.command("upload")
def benchmarks_upload(
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="JSONL, CSV or Parquet rows.")],
    spec: Annotated[Path, typer.Option("--spec", exists=True, dir_okay=False, help="The benchmark spec (JSON file).")],
    visibility: Annotated[str, typer.Option(help="private (this tenant) or shared (every tenant).")] = "private",
    url: Url = None,
    json: Json = False,
) -> None:
    """Upload a benchmark version (rows are checked; a bad row is named by line and field)."""
    with _api(url, timeout=300) as api, file.open("rb") as f:
        r = _call(
            api.request,
            "POST",
            "/v1/benchmarks",
            data={"spec": spec.read_text(), "visibility": visibility},
            files={"file": (file.name, f)},
        )
    body = r.json()
    _print_json(body) if json else typer.echo(
        f"uploaded {body['slug']} version {body['version'][:12]} ({body['sample_count']} samples)"
    )


# ---------------------------------------------------------------- evaluations


def _arm(spec: str) -> dict[str, Any]:
    """``NAME`` or ``NAME:key=value,…`` (keys model, model_version, template=@FILE, fewshot, chat) → an arm."""
    name, _, rest = spec.partition(":")
    arm: dict[str, Any] = {"name": name}
    for pair in filter(None, rest.split(",")):
        key, sep, value = pair.partition("=")
        if not sep:
            raise typer.BadParameter(f"{pair!r} is not key=value", param_hint="--arm")
        if key == "template":
            if not value.startswith("@"):
                raise typer.BadParameter("template takes @FILE (the template's text is read from FILE)", param_hint="--arm")
            arm["prompt_template"] = Path(value[1:]).read_text()
        elif key == "fewshot":
            arm["fewshot_k"] = int(value)
        elif key == "chat":
            arm["chat_template"] = value.lower() in ("1", "true", "yes")
        elif key in ("model", "model_version"):
            arm[key] = value
        else:
            raise typer.BadParameter(
                f"unknown arm key {key!r} (model, model_version, template, fewshot, chat)", param_hint="--arm"
            )
    return arm


@app.command()
def run(
    benchmark: Annotated[str, typer.Option("--benchmark", "-b", help="Benchmark slug or id.")],
    model: Annotated[list[str] | None, typer.Option("--model", "-m", help="Model name; repeat for a batch.")] = None,
    limit: Annotated[int | None, typer.Option("--limit", "-n", help="Evaluate N samples.")] = None,
    sampling: Annotated[str | None, typer.Option(help="first | random | stratified: which N samples.")] = None,
    seed: Annotated[int | None, typer.Option(help="Seed of --sampling random/stratified.")] = None,
    repeats: Annotated[int | None, typer.Option(help="Attempts per sample.")] = None,
    fewshot: Annotated[int | None, typer.Option(help="Demonstrations per prompt.")] = None,
    priority: Annotated[str | None, typer.Option(help="low | normal | high | critical.")] = None,
    max_cost: Annotated[float | None, typer.Option(help="Cost cap of each evaluation (site currency).")] = None,
    arm: Annotated[
        list[str] | None, typer.Option("--arm", help="A/B arm NAME[:model=M,template=@FILE,fewshot=K,chat=true]; repeat.")
    ] = None,
    follow_: Annotated[bool, typer.Option("--follow", "-f", help="Draw live progress until every evaluation ends.")] = False,
    fail_under: Annotated[
        float | None, typer.Option(help="Exit 4 unless each score's bound is ≥ this (implies --follow).")
    ] = None,
    gate_on: Annotated[str, typer.Option(help="lower (95 % interval's lower bound) | point (the estimate).")] = "lower",
    interval: Annotated[float, typer.Option(help="Seconds between progress polls.")] = 1.0,
    url: Url = None,
    json: Json = False,
) -> None:
    """Create an evaluation (or a batch with several --model, or an A/B experiment with --arm)."""
    from uep_cli.follow import ENDED, follow, gate

    if gate_on not in ("lower", "point"):
        raise typer.BadParameter("lower or point", param_hint="--gate-on")
    body: dict[str, Any] = {"benchmark": benchmark}
    models = model or []
    if len(models) == 1:
        body["model"] = models[0]
    elif models:
        body["models"] = models
    if arm:
        body["arms"] = [_arm(a) for a in arm]
    options = {
        "sample_limit": limit,
        "sampling": sampling,
        "sampling_seed": seed,
        "repeats": repeats,
        "fewshot_k": fewshot,
        "priority": priority,
        "max_cost": max_cost,
    }
    body |= {k: v for k, v in options.items() if v is not None}
    with _api(url) as api:
        accepted = _call(api.post, "/v1/evaluations", body)
        ids = [str(e["id"]) for e in accepted.get("evaluations") or []] or [str(accepted["id"])]
        if not json:
            typer.echo(
                f"created {', '.join(ids)}"
                + (f" (experiment {accepted['experiment_id']})" if accepted.get("experiment_id") else "")
            )
        if not (follow_ or fail_under is not None):
            if json:
                _print_json(accepted)
            return
        try:
            views = _call(follow, api, ids, interval, quiet=json)
        except KeyboardInterrupt:
            typer.echo("stopped following; the evaluations go on", err=True)
            raise typer.Exit(130) from None
    verdicts = [gate(v, fail_under, gate_on) for v in views] if fail_under is not None else []
    if json:
        _print_json({"accepted": accepted, "evaluations": views, "gate": [v.__dict__ for v in verdicts]})
    else:
        for v in views:
            _summary_line(v)
        for g in verdicts:
            typer.echo(f"{'PASS' if g.passed else 'FAIL'} {g.evaluation_id}: {g.reason}")
    if any(v["status"] != "completed" for v in views):
        raise typer.Exit(3)
    if any(not g.passed for g in verdicts):
        raise typer.Exit(4)
    assert all(v["status"] in ENDED for v in views)


def _summary_line(v: dict[str, Any]) -> None:
    from uep_cli.figures import headline_text

    name, ci = headline_text(v)
    s = v.get("summary") or {}
    typer.echo(
        f"{v['id']} {_status_text(v)}: {name or 'no score'} {ci} "
        f"n={s.get('n', v['progress']['completed'])} errors={v['progress']['errors']}"
        + (f" — {v['error']}" if v.get("error") else "")
    )


def _status_text(v: dict[str, Any]) -> str:
    """``completed`` or, when the headline leaves items out, ``completed · 7 errors, excluded from the headline``."""
    note = (v.get("headline") or {}).get("note")
    return f"{v['status']} · {note}" if note else str(v["status"])


@app.command()
def status(evaluation_id: Annotated[str, typer.Argument(help="Evaluation id.")], url: Url = None, json: Json = False) -> None:
    """One evaluation: status, progress and score."""
    with _api(url) as api:
        v = _call(api.get, f"/v1/evaluations/{evaluation_id}")
    if json:
        return _print_json(v)
    p = v["progress"]
    typer.echo(
        f"{v['benchmark'].get('slug')} × {v['model'].get('name')} {v['model'].get('version')} [{v['arm']}] "
        f"{v['status']} {p['completed']}/{p['total']} errors {p['errors']}"
    )
    _summary_line(v)


@app.command("list")
def list_(
    status_: Annotated[list[str] | None, typer.Option("--status", help="Only these statuses; repeat.")] = None,
    benchmark: Annotated[str | None, typer.Option(help="Only this benchmark slug.")] = None,
    model: Annotated[str | None, typer.Option(help="Only this model name.")] = None,
    limit: Annotated[int, typer.Option(help="Newest N.")] = 20,
    url: Url = None,
    json: Json = False,
) -> None:
    """The tenant's evaluations, newest first."""
    with _api(url) as api:
        page = _call(api.get, "/v1/evaluations", status=status_, benchmark=benchmark, model=model, limit=min(limit, 200))
    items = page["items"][:limit]
    if json:
        return _print_json(items)
    _table(
        "evaluations",
        ["id", "created", "benchmark", "model", "arm", "status", "done", "headline", "95 % CI"],
        [
            [
                e["id"],
                str(e["created_at"])[:19],
                e["benchmark"].get("slug"),
                e["model"].get("name"),
                e["arm"],
                _status_text(e),
                f"{e['progress']['completed']}/{e['progress']['total']}",
                *headline_cells(e),
            ]
            for e in items
        ],
    )


@app.command()
def results(
    evaluation_id: Annotated[str, typer.Argument(help="Evaluation id.")],
    format: Annotated[str, typer.Option("--format", help="jsonl | csv.")] = "jsonl",
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write here instead of stdout.")] = None,
    url: Url = None,
) -> None:
    """Every stored item of an evaluation, streamed page by page (benchmark order)."""
    import csv

    if format not in ("jsonl", "csv"):
        raise typer.BadParameter("jsonl or csv", param_hint="--format")
    from uep_cli.api import ApiError

    out = output.open("w", newline="") if output else sys.stdout
    try:
        with _api(url) as api:
            writer: Any = None
            for item in api.pages(f"/v1/evaluations/{evaluation_id}/results", limit=1000):
                if format == "jsonl":
                    out.write(jsonlib.dumps(item, default=str) + "\n")
                    continue
                row = {k: jsonlib.dumps(v) if isinstance(v, dict | list) else v for k, v in item.items()}
                if writer is None:
                    writer = csv.DictWriter(out, fieldnames=list(row))
                    writer.writeheader()
                writer.writerow(row)
    except ApiError as exc:
        _fail(str(exc))
    finally:
        if output:
            out.close()


@app.command()
def report(
    evaluation_id: Annotated[str, typer.Argument(help="Evaluation id.")],
    open_: Annotated[bool, typer.Option("--open", help="Open the HTML report in a browser.")] = False,
    pdf: Annotated[Path | None, typer.Option("--pdf", help="Save the PDF here.")] = None,
    html: Annotated[Path | None, typer.Option("--html", help="Save the HTML here (default report-<id>.html).")] = None,
    wait: Annotated[float, typer.Option(help="Seconds to wait for a report being written.")] = 120.0,
    url: Url = None,
) -> None:
    """Save (and optionally open) an evaluation's newest report; builds one when there is none yet."""
    import time
    import webbrowser

    from uep_cli.api import ApiError

    with _api(url, timeout=120) as api:
        deadline = time.monotonic() + wait
        requested = False
        while True:
            try:
                r = api.request("GET", f"/v1/evaluations/{evaluation_id}/report.html")
                break
            except ApiError as exc:
                kind = (exc.body or {}).get("detail", [{}])[0].get("type") if isinstance(exc.body, dict) else None
                if kind != "no_report" or time.monotonic() > deadline:
                    _fail(str(exc))
                if not requested and "being written" not in str(exc):
                    _call(api.post, f"/v1/evaluations/{evaluation_id}/reports")
                    requested = True
                time.sleep(1.0)
        target = html or Path(f"report-{evaluation_id}.html")
        target.write_bytes(r.content)
        typer.echo(f"saved {target}")
        if pdf:
            pdf.write_bytes(_call(api.request, "GET", f"/v1/evaluations/{evaluation_id}/report.pdf").content)
            typer.echo(f"saved {pdf}")
    if open_:
        webbrowser.open(target.resolve().as_uri())


def pairing_line(c: dict[str, Any]) -> str:
    """The first line of ``uep compare``: the baseline, why it was chosen, and how many items pair of each
    side's (``baseline <id> (previous_same_items): 20 of 20 items pair (20 with verdicts on both sides); 0 only
    in this run, 0 only in the baseline``)."""
    paired, cur, base = c["n_paired"], c["n_current"], c["n_baseline"]
    return (
        f"baseline {c['baseline_evaluation_id']} ({c['baseline_reason']}): {paired} of {cur} items pair "
        f"({c['n_paired_with_verdicts']} with verdicts on both sides); {cur - paired} only in this run, "
        f"{base - paired} only in the baseline"
    )


@app.command()
def compare(
    evaluation_id: Annotated[str, typer.Argument(help="Evaluation id (the current one).")],
    baseline: Annotated[
        str | None,
        typer.Option(help="Baseline evaluation id (default: pinned, else the last earlier completed one on the same items)."),
    ] = None,
    url: Url = None,
    json: Json = False,
) -> None:
    """Paired comparison with a baseline: 2×2 table, McNemar test, bootstrap difference, what changed."""
    with _api(url) as api:
        c = _call(api.get, f"/v1/evaluations/{evaluation_id}/compare", baseline=baseline, limit=20)
    if json:
        return _print_json(c)
    a, m, t = c["accuracy"], c["mcnemar"], c["table"]
    typer.echo(pairing_line(c))
    if a.get("difference") is not None:
        typer.echo(
            f"accuracy {a['baseline_mean']:.3f} → {a['current_mean']:.3f}: difference {a['difference']:+.3f} "
            f"{_interval(a.get('ci_low'), a.get('ci_high'))} (paired bootstrap)"
        )
    typer.echo(
        f"both right {t['both_correct']}, only baseline {t['baseline_only_correct']}, only current "
        f"{t['current_only_correct']}, both wrong {t['both_wrong']}; McNemar p = {m['p_value']:.4g}"
        + (" (significant)" if m["significant"] else "")
    )
    diff = c.get("fingerprint_diff") or {}
    changes = diff.get("changes") or []
    typer.echo(
        "changed: " + (", ".join(str(ch.get("field", ch)) for ch in changes) if changes else "changed: nothing but the model")
    )


@app.command()
def leaderboard(
    benchmark: Annotated[str, typer.Argument(help="Benchmark slug.")],
    score_type: Annotated[str | None, typer.Option(help="Which board (default: the busiest).")] = None,
    item_set: Annotated[str | None, typer.Option(help="Which item set ('<version>:<samples>'; default: the largest).")] = None,
    top: Annotated[int | None, typer.Option(help="First N entries.")] = None,
    url: Url = None,
    json: Json = False,
) -> None:
    """A benchmark's ranked board (one item set: entries on other items are never ranked together), tie groups shown."""
    from uep_cli.figures import figure, interval

    with _api(url) as api:
        b = _call(api.get, f"/v1/leaderboards/{benchmark}", score_type=score_type, item_set=item_set, top=top)
    if json:
        return _print_json(b)
    others = [s["key"] for s in b.get("item_sets", []) if s["key"] != b.get("item_set")]
    _table(
        f"{b['benchmark']} — {b['score_type']}, item set {b.get('item_set')} ({b['tie_rule']})"
        + (f"; other item sets: {', '.join(others)}" if others else ""),
        ["rank", "tie group", "model", "version", "score", "95 % CI", "n", "evaluations"],
        [
            [
                e["rank"],
                e["tie_group"],
                e["model"],
                e["model_version"],
                figure(e["score"], e.get("method") == "wilson"),
                interval(e["ci_low"], e["ci_high"], e.get("method") == "wilson", e.get("method")),
                e["n"],
                e["evaluations"],
            ]
            for e in b["entries"]
        ],
    )


def _lifecycle(action: str, evaluation_id: str, url: str | None, json: bool) -> None:
    with _api(url) as api:
        r = _call(api.post, f"/v1/evaluations/{evaluation_id}/{action}")
    _print_json(r) if json else typer.echo(f"{action}: {evaluation_id} {(r or {}).get('status', '')}".rstrip())


@app.command()
def cancel(evaluation_id: Annotated[str, typer.Argument()], url: Url = None, json: Json = False) -> None:
    """Cancel an evaluation: nothing more runs, results still in flight are discarded."""
    _lifecycle("cancel", evaluation_id, url, json)


@app.command()
def stop(evaluation_id: Annotated[str, typer.Argument()], url: Url = None, json: Json = False) -> None:
    """Stop an evaluation: nothing more starts; what is in flight is kept and summarised."""
    _lifecycle("stop", evaluation_id, url, json)


@app.command()
def retry(evaluation_id: Annotated[str, typer.Argument()], url: Url = None, json: Json = False) -> None:
    """Run an evaluation's failed items again."""
    _lifecycle("retry", evaluation_id, url, json)


def main() -> None:
    """Console entry point (``uep``)."""
    app()


if __name__ == "__main__":
    main()
