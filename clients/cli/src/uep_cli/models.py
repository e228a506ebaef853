"""``uep models``: the model registry — ``list``, ``show``, ``add``, ``disable``, ``enable`` (docs/models.md).

``add`` registers a model of the caller's tenant through ``POST /v1/models``; the gateway probes its
endpoint first (``--no-probe``: tenant admins only) and answers a mismatch with the tensor it concerns.
"""

from __future__ import annotations

import json as jsonlib
import os
from typing import Annotated, Any

import typer

app = typer.Typer(help="The model registry.", no_args_is_help=True, rich_markup_mode=None)

Json = Annotated[bool, typer.Option("--json", help="Print the API's JSON instead of tables.")]
Url = Annotated[str | None, typer.Option("--url", help="Gateway base URL (default: UEP_URL, then the stored login).")]


def _cli() -> Any:
    """The command-line plumbing of :mod:`uep_cli.main` (imported when a command runs: main imports this module)."""
    from uep_cli import main

    return main


def model_body(
    name: str,
    endpoint: str,
    *,
    version: str = "1",
    kind: str = "generation",
    backend: str = "triton",
    contract: str | None = None,
    triton_name: str | None = None,
    triton_version: str | None = None,
    class_names: str | None = None,
    n_features: int | None = None,
    dimension: int | None = None,
    capacity: int | None = None,
    description: str = "",
    shared: bool = False,
    api_key: str | None = None,
) -> dict[str, Any]:
    """The ``POST /v1/models`` body of ``uep models add``'s options (``class_names``: comma-separated; unset
    options are left out, so the gateway's defaults apply)."""
    spec: dict[str, Any] = {}
    if class_names:
        spec["class_names"] = [c.strip() for c in class_names.split(",") if c.strip()]
    if n_features is not None:
        spec["n_features"] = n_features
    if dimension is not None:
        spec["dimension"] = dimension
    body: dict[str, Any] = {
        "name": name,
        "version": version,
        "kind": kind,
        "backend": backend,
        "endpoint": endpoint,
        "description": description,
        "visibility": "shared" if shared else "private",
        "contract": contract,
        "triton_model_name": triton_name,
        "triton_model_version": triton_version,
        "max_in_flight": capacity,
        "api_key": api_key,
    }
    return {k: v for k, v in body.items() if v is not None} | ({"spec": spec} if spec else {})


def _row(m: dict[str, Any]) -> list[Any]:
    return [
        f"{m['name']}@{m['version']}",
        f"{m.get('kind', 'generation')}/{m.get('contract', 'uep')}",
        m["backend"],
        m.get("triton_model_name"),
        m["endpoint"],
        m.get("visibility"),
        "yes" if m.get("active", True) else "no",
    ]


@app.command("list")
def models_list(url: Url = None, json: Json = False) -> None:
    """Every model the caller sees (site, shared, its tenant's own)."""
    cli = _cli()
    with cli._api(url) as api:
        rows = cli._call(api.get, "/v1/models")
    if json:
        cli._print_json(rows)
        return
    cli._table(
        "models", ["model", "kind/contract", "backend", "served as", "endpoint", "visibility", "active"], [_row(m) for m in rows]
    )


@app.command("show")
def models_show(
    name: Annotated[str, typer.Argument(help="Model name (every version) or name@version.")], url: Url = None, json: Json = False
) -> None:
    """One model's registry entries (every version the caller sees, or the one named)."""
    cli = _cli()
    base, _, version = name.partition("@")
    with cli._api(url) as api:
        rows = [m for m in cli._call(api.get, "/v1/models") if m["name"] == base and (not version or m["version"] == version)]
    if not rows:
        cli._fail(f"404 path.model_ref: unknown model {name!r}")
    if json:
        cli._print_json(rows)
        return
    for m in rows:
        typer.echo("\n".join(f"{k}: {jsonlib.dumps(v) if isinstance(v, dict | list) else v}" for k, v in m.items()) + "\n")


@app.command("add")
def models_add(
    name: Annotated[str, typer.Argument(help="Model name: 1..200 of A-Z a-z 0-9 . _ -")],
    endpoint: Annotated[str, typer.Option("--endpoint", help="Triton http://host:port, or an OpenAI-compatible base URL.")],
    kind: Annotated[str, typer.Option("--kind", help="generation | classification | ranking | embedding")] = "generation",
    backend: Annotated[str, typer.Option("--backend", help="triton | openai_compatible")] = "triton",
    contract: Annotated[str | None, typer.Option("--contract", help="Default by kind: uep, openai, text …")] = None,
    triton_name: Annotated[str | None, typer.Option("--triton-name", help="The served model's name (default: NAME).")] = None,
    triton_version: Annotated[str | None, typer.Option("--triton-version", help="Triton model version.")] = None,
    class_names: Annotated[str | None, typer.Option("--class-names", help="Classification: a,b,c in output order.")] = None,
    n_features: Annotated[int | None, typer.Option("--n-features", help="classification/features: vector length.")] = None,
    dimension: Annotated[int | None, typer.Option("--dimension", help="Embedding: vector length.")] = None,
    capacity: Annotated[int | None, typer.Option("--capacity", help="Calls in flight per inference replica (1..1024).")] = None,
    version: Annotated[str, typer.Option("--version", help="Model version.")] = "1",
    description: Annotated[str, typer.Option("--description")] = "",
    shared: Annotated[bool, typer.Option("--shared", help="Every tenant may see and evaluate it.")] = False,
    api_key_env: Annotated[
        str | None, typer.Option("--api-key-env", help="OpenAI-compatible: read the endpoint's API key from this variable.")
    ] = None,
    no_probe: Annotated[bool, typer.Option("--no-probe", help="Skip the endpoint check (tenant admins only).")] = False,
    url: Url = None,
    json: Json = False,
) -> None:
    """Register a model of the caller's tenant (the gateway probes the endpoint unless --no-probe)."""
    cli = _cli()
    api_key = None
    if api_key_env:
        api_key = os.environ.get(api_key_env)
        if not api_key:
            cli._fail(f"--api-key-env: the variable {api_key_env} is not set", 2)
    body = model_body(
        name,
        endpoint,
        version=version,
        kind=kind,
        backend=backend,
        contract=contract,
        triton_name=triton_name,
        triton_version=triton_version,
        class_names=class_names,
        n_features=n_features,
        dimension=dimension,
        capacity=capacity,
        description=description,
        shared=shared,
        api_key=api_key,
    )
    with cli._api(url) as api:
        m = cli._call(api.post, "/v1/models" + ("?probe=false" if no_probe else ""), json=body)
    cli._print_json(m) if json else typer.echo(f"registered {m['name']}@{m['version']} ({m['kind']}/{m['contract']})")


def _toggle(action: str, ref: str, url: str | None, json: bool) -> None:
    cli = _cli()
    with cli._api(url) as api:
        m = cli._call(api.post, f"/v1/models/{ref}/{action}")
    cli._print_json(m) if json else typer.echo(f"{m['name']}@{m['version']}: {'active' if m['active'] else 'deactivated'}")


@app.command("disable")
def models_disable(ref: Annotated[str, typer.Argument(help="name@version")], url: Url = None, json: Json = False) -> None:
    """Deactivate a model of the caller's tenant: no new evaluations of it."""
    _toggle("deactivate", ref, url, json)


@app.command("enable")
def models_enable(ref: Annotated[str, typer.Argument(help="name@version")], url: Url = None, json: Json = False) -> None:
    """Reactivate a deactivated model of the caller's tenant."""
    _toggle("reactivate", ref, url, json)
