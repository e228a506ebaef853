"""The model registry: ``/v1/models`` (register, list, show, change, deactivate, reactivate, delete).

A tenant sees site models (no owner), models other tenants share and its own — row-level security enforces
it and :func:`uep_common.registry.model_registry.visible_models` says the same in the query. Another tenant's private
model is a 404 on every route, the same answer as for a name that does not exist; a model the caller sees but
does not own (a site model, another tenant's shared one) is a 403 on the writes. A model is addressed as
``name`` (its newest active version) or ``name@version``; writes need ``name@version``.

The rules of a registration (fields, kind/contract combinations, spec, API keys, refused addresses, the
probe of the endpoint) are :mod:`uep_common.registry.model_registry`'s, shared with ``uep-admin models``. A model
with evaluations is never deleted (``DELETE`` answers 409; deactivate it instead). Writes are audit-logged
(the role matrix marks them, :mod:`uep_gateway.audit`).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Coroutine
from decimal import Decimal
from typing import Any

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from sqlalchemy import ColumnElement, exists, select, true
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.contract.events import ModelKind
from uep_common.registry.model_registry import (
    COST_FIELDS,
    MAX_TENANT_MODELS,
    EgressPolicy,
    ModelCreate,
    ModelUpdate,
    RegistryError,
    check_endpoint,
    check_endpoint_address,
    check_key_fields,
    check_registration,
    encrypt_api_key,
    model_query,
    owned_count,
    preference,
    probe,
    registration_values,
    shared_name_taken,
    site_name_taken,
    split_ref,
    visible_models,
)
from uep_common.tables.models import MODEL_KINDS, Evaluation, Model
from uep_gateway.auth import Principal
from uep_gateway.deps import db_session, unscoped_session
from uep_gateway.errors import FieldError, registry_error
from uep_gateway.schemas import ModelCostView, ModelView
from uep_gateway.tenancy import principal_of_session
from uep_gateway.validation import NUL_CHECK


class InputFreeRoute(APIRoute):
    """A route whose 422 validation answers leave out the rejected value (FastAPI's ``input``): a
    registration's input may hold an API key, which the answer would repeat (the whole body, for a missing
    field; the key itself, for one too long). ``loc``, ``msg`` and ``type`` still name the field."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        """FastAPI's handler of the route, re-raising its validation errors without their ``input``."""
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            try:
                return await handler(request)
            except RequestValidationError as exc:
                raise RequestValidationError([{k: v for k, v in e.items() if k != "input"} for e in exc.errors()]) from None

        return route


router = APIRouter(prefix="/v1", tags=["models"], dependencies=NUL_CHECK, route_class=InputFreeRoute)

REF = Path(
    pattern=r"^[A-Za-z0-9._-]{1,200}(@[A-Za-z0-9._-]{1,100})?$",
    description="name (its newest active version) or name@version",
)
REF_LOC = ("path", "model_ref")


def model_view(principal: Principal, m: Model) -> ModelView:
    """The view of a model row for ``principal`` (no API key: ``has_api_key`` only)."""
    owned = m.owner_tenant_id is not None and m.owner_tenant_id == principal.tenant.id
    cost = {k: float(v) if isinstance(v, Decimal) else v for k in COST_FIELDS for v in [getattr(m, k)]}
    return ModelView(
        id=m.id,
        name=m.name,
        version=m.version,
        description=m.description,
        kind=m.kind,
        backend=m.backend,
        contract=m.contract,
        endpoint=m.endpoint,
        triton_model_name=m.triton_model_name,
        triton_model_version=m.triton_model_version,
        spec=m.spec or {},
        decoding_defaults=m.decoding_defaults or {},
        supports_logprobs=m.supports_logprobs,
        max_in_flight=m.max_in_flight,
        visibility="site" if m.owner_tenant_id is None else m.visibility,
        owned=owned,
        active=m.active,
        has_api_key=m.api_key_encrypted is not None or m.api_key_ref is not None,
        api_key_ref=m.api_key_ref,
        cost=ModelCostView(**cost),
        created_by=m.created_by if owned or principal.site_act else None,
        created_at=m.created_at,
    )


def _seen_by(principal: Principal) -> ColumnElement[bool]:
    """The models ``principal`` may see: site, shared and its tenant's own (every model for a site admin
    acting across tenants, as row-level security lets it)."""
    return true() if principal.site_act else visible_models(principal.tenant.id)


async def _visible(session: AsyncSession, ref: str) -> Model:
    """The model ``ref`` (name or name@version) the caller sees; 404 naming the path otherwise."""
    principal = principal_of_session(session)
    name, version = split_ref(ref)
    model = await session.scalar(model_query(name, version, principal.tenant.id, all_tenants=principal.site_act))
    if model is None:
        raise FieldError("not_found", REF_LOC, f"unknown model {ref!r}", "unknown_model")
    return model


async def _writable(session: AsyncSession, ref: str) -> Model:
    """The model ``name@version`` the caller may change: its tenant's own, or any model
    for a site admin acting across tenants. 422 without a version, 404 for one it cannot see, 403 for a site
    model or another tenant's shared one."""
    principal = principal_of_session(session)
    name, version = split_ref(ref)
    if version is None:
        raise FieldError("invalid", REF_LOC, f"name the version to change: {name}@<version>", "version_required")
    q = select(Model).where(Model.name == name, Model.version == version, _seen_by(principal))
    model = await session.scalar(q.order_by(preference(principal.tenant.id), Model.id).limit(1))
    if model is None:
        raise FieldError("not_found", REF_LOC, f"unknown model {ref!r}", "unknown_model")
    if not principal.site_act and model.owner_tenant_id != principal.tenant.id:
        whose = "a site model" if model.owner_tenant_id is None else "another tenant's shared model"
        raise FieldError("forbidden", REF_LOC, f"{ref} is {whose}: only its owner changes it", "not_owner")
    return model


def _check_probe_flag(principal: Principal, probe_flag: bool) -> None:
    if not probe_flag and not principal.at_least("admin"):
        raise FieldError(
            "forbidden", ("query", "probe"), "probe=false needs the admin role (builders' registrations are probed)", "forbidden"
        )


def _egress(request: Request) -> EgressPolicy:
    """The site's egress allowlist for model endpoints (``UEP_MODEL_EGRESS_*``)."""
    policy: EgressPolicy = request.app.state.settings.egress_policy()
    return policy


def _secret_key(request: Request) -> str | None:
    key = request.app.state.settings.model_secret_key
    return key.get_secret_value() if key is not None else None


async def _probe(
    m: Model | ModelCreate,
    contract: str,
    spec: dict[str, Any],
    api_key: str | None,
    api_key_ref: str | None,
    egress: EgressPolicy,
) -> None:
    served = m.triton_model_name or m.name
    try:
        await probe(
            backend=m.backend,
            endpoint=m.endpoint,
            served_name=served,
            served_version=m.triton_model_version,
            kind=m.kind,
            contract=contract,
            spec=spec,
            api_key=api_key or (os.environ.get(api_key_ref) if api_key_ref else None),
            egress=egress,
        )
    except RegistryError as exc:
        raise registry_error(exc) from None


@router.get("/models", response_model=list[ModelView])
async def list_models(
    kind: str | None = Query(None, pattern="^(" + "|".join(MODEL_KINDS) + ")$"),
    active: bool | None = Query(None, description="true: active models only; false: deactivated ones only"),
    session: AsyncSession = Depends(db_session),
) -> list[ModelView]:
    """Every model the caller may see (site, shared, its tenant's own), by name, newest version first."""
    principal = principal_of_session(session)
    q = select(Model).where(_seen_by(principal)).order_by(Model.name, Model.created_at.desc(), Model.id)
    if kind:
        q = q.where(Model.kind == kind)
    if active is not None:
        q = q.where(Model.active.is_(active))
    return [model_view(principal, m) for m in await session.scalars(q)]


@router.post("/models", status_code=201, response_model=ModelView)
async def register_model(
    body: ModelCreate,
    request: Request,
    response: Response,
    probe_flag: bool = Query(
        True, alias="probe", description="Check the endpoint serves the model as declared (false: tenant admins only)"
    ),
    session: AsyncSession = Depends(db_session),
) -> ModelView:
    """Register a model of the caller's tenant (``owner: site``: a site model, by a site admin acting across
    tenants). The endpoint is probed first (docs/models.md): a Triton model's metadata must match its
    contract (422 naming ``contract`` and each tensor), an unreachable endpoint is 422 naming ``endpoint``.
    A tenant may not take a site model's name, nor share one another tenant shares, in any letter case (409
    ``name``), nor own more than ``MAX_TENANT_MODELS`` models (409 ``too_many_models``); (name, version) is
    unique per owner (409 ``version``). The API key is stored encrypted and
    never returned, nor repeated by an error."""
    principal = principal_of_session(session)
    _check_probe_flag(principal, probe_flag)
    try:
        contract, spec = check_registration(body, site_act=principal.site_act)
        _, host, port = check_endpoint(body.backend, body.endpoint)
        await check_endpoint_address(host, port, egress=_egress(request))
        if body.api_key is not None:
            encrypt_api_key("", _secret_key(request))  # refuse before probing when the site stores no keys
    except RegistryError as exc:
        raise registry_error(exc) from None
    owner = None if body.owner == "site" else principal.tenant.id
    if owner is not None and await session.scalar(site_name_taken(body.name)) is not None:
        raise FieldError("conflict", ("body", "name"), f"{body.name!r} is a site model's name; choose another", "name_taken")
    if owner is not None and (await session.scalar(owned_count(owner)) or 0) >= MAX_TENANT_MODELS:
        raise FieldError(
            "conflict",
            ("body", "name"),
            f"this tenant has {MAX_TENANT_MODELS} models, the most it may own: delete one it never evaluated",
            "too_many_models",
        )
    if owner is not None and body.visibility == "shared" and await session.scalar(shared_name_taken(body.name, owner)):
        raise FieldError(
            "conflict", ("body", "name"), f"another tenant shares a model named {body.name!r}; choose another", "name_taken"
        )
    if probe_flag:
        await _probe(
            body, contract, spec, body.api_key.get_secret_value() if body.api_key else None, body.api_key_ref, _egress(request)
        )
    try:
        values = registration_values(
            body, contract, spec, owner_tenant_id=owner, created_by=principal.name, secret_key=_secret_key(request)
        )
    except RegistryError as exc:
        raise registry_error(exc) from None
    model = Model(**values)
    session.add(model)
    try:
        await session.commit()
    except IntegrityError:
        await session.rollback()
        whose = "the site" if owner is None else "this tenant"
        raise FieldError(
            "conflict",
            ("body", "version"),
            f"{whose} has {body.name}@{body.version} already; give another version",
            "model_exists",
        ) from None
    response.headers["Location"] = f"/v1/models/{model.name}@{model.version}"
    return model_view(principal, model)


@router.get("/models/{model_ref}", response_model=ModelView)
async def get_model(model_ref: str = REF, session: AsyncSession = Depends(db_session)) -> ModelView:
    """One model: ``name`` (its newest active version; the caller's own before a site model before a shared
    one) or ``name@version``. 404 for one the caller cannot see."""
    return model_view(principal_of_session(session), await _visible(session, model_ref))


@router.patch("/models/{model_ref}", response_model=ModelView)
async def update_model(
    body: ModelUpdate,
    request: Request,
    model_ref: str = REF,
    probe_flag: bool = Query(True, alias="probe", description="Probe a new endpoint (false: tenant admins only)"),
    session: AsyncSession = Depends(db_session),
    raw: AsyncSession = Depends(unscoped_session),
) -> ModelView:
    """Change a model's description, capacity, decoding defaults, cost model (the fields given), visibility,
    endpoint (probed as at registration) or API key (``null`` removes it). Its owner only. A stored key is not
    carried to a new endpoint: the change gives ``api_key`` (or ``api_key_ref``) again, or ``null``
    (422 ``key_required`` naming ``api_key`` otherwise), so that nobody who may change the endpoint but does
    not know the key can send it elsewhere."""
    principal = principal_of_session(session)
    model = await _writable(session, model_ref)
    given = body.model_fields_set
    moved = "endpoint" in given and body.endpoint is not None and body.endpoint.strip() != model.endpoint
    if moved:
        _check_probe_flag(principal, probe_flag)
    try:
        if "decoding_defaults" in given and model.kind != ModelKind.generation:
            raise RegistryError(422, ("body", "decoding_defaults"), f"a {model.kind} model generates no text", "not_applicable")
        if "visibility" in given and model.owner_tenant_id is None:
            raise RegistryError(422, ("body", "visibility"), "a site model is visible to every tenant", "not_applicable")
        if "api_key" in given or "api_key_ref" in given:
            check_key_fields(model.backend, body.api_key, body.api_key_ref, owner_site=model.owner_tenant_id is None)
        if "endpoint" in given:
            if body.endpoint is None:
                raise RegistryError(422, ("body", "endpoint"), "a model needs an endpoint", "missing")
            _, host, port = check_endpoint(model.backend, body.endpoint)
            await check_endpoint_address(host, port, egress=_egress(request))
        has_key = model.api_key_encrypted is not None or model.api_key_ref is not None
        if moved and has_key and "api_key" not in given and "api_key_ref" not in given:
            raise RegistryError(
                422,
                ("body", "api_key"),
                "the stored API key is not carried to a new endpoint: give api_key (or api_key_ref) again, or null",
                "key_required",
            )
        new_key = (
            encrypt_api_key(body.api_key.get_secret_value(), _secret_key(request))
            if "api_key" in given and body.api_key is not None
            else None
        )
    except RegistryError as exc:
        raise registry_error(exc) from None
    owner = model.owner_tenant_id
    sharing = body.visibility == "shared" and model.visibility != "shared" and owner is not None
    if sharing and owner is not None and await session.scalar(shared_name_taken(model.name, owner)):
        raise FieldError("conflict", ("body", "visibility"), f"another tenant shares a model named {model.name!r}", "name_taken")
    if body.visibility == "private" and model.visibility == "shared":
        used = await raw.scalar(
            select(exists().where(Evaluation.model_id == model.id, Evaluation.tenant_id != model.owner_tenant_id))
        )
        await raw.rollback()
        if used:
            raise FieldError(
                "conflict",
                ("body", "visibility"),
                "other tenants have evaluations of this model: it stays shared (deactivate it to stop new ones)",
                "model_in_use",
            )
    if moved and probe_flag:
        assert body.endpoint is not None
        candidate = Model(
            **{c: getattr(model, c) for c in ("name", "backend", "triton_model_name", "triton_model_version", "kind")}
        )
        candidate.endpoint = body.endpoint.strip()
        key = body.api_key.get_secret_value() if body.api_key is not None else None
        await _probe(candidate, model.contract, model.spec or {}, key, body.api_key_ref, _egress(request))
    for field in ("description", "max_in_flight", "supports_logprobs", "visibility"):
        if field in given and (getattr(body, field) is not None or field == "max_in_flight"):
            setattr(model, field, getattr(body, field))
    if "endpoint" in given and body.endpoint is not None:
        model.endpoint = body.endpoint.strip()
    if "decoding_defaults" in given and body.decoding_defaults is not None:
        model.decoding_defaults = body.decoding_defaults.model_dump()
    if "cost" in given and body.cost is not None:
        for field in body.cost.model_fields_set:
            setattr(model, field, getattr(body.cost, field))
    if "api_key" in given:
        model.api_key_encrypted = new_key
        if new_key is not None:
            model.api_key_ref = None
    if "api_key_ref" in given:
        model.api_key_ref = body.api_key_ref
        if body.api_key_ref is not None:
            model.api_key_encrypted = None
    await session.commit()
    await session.refresh(model)
    return model_view(principal, model)


async def _set_active(session: AsyncSession, model_ref: str, active: bool) -> ModelView:
    model = await _writable(session, model_ref)
    model.active = active
    await session.commit()
    await session.refresh(model)
    return model_view(principal_of_session(session), model)


@router.post("/models/{model_ref}/deactivate", response_model=ModelView)
async def deactivate_model(model_ref: str = REF, session: AsyncSession = Depends(db_session)) -> ModelView:
    """Take a model out of use: new evaluations of it are refused (422 ``model_inactive``); evaluations
    already accepted go on, and its results stay. Its owner only; repeating it changes nothing."""
    return await _set_active(session, model_ref, False)


@router.post("/models/{model_ref}/reactivate", response_model=ModelView)
async def reactivate_model(model_ref: str = REF, session: AsyncSession = Depends(db_session)) -> ModelView:
    """Put a deactivated model back in use. Its owner only."""
    return await _set_active(session, model_ref, True)


@router.delete("/models/{model_ref}", status_code=204)
async def delete_model(model_ref: str = REF, session: AsyncSession = Depends(db_session)) -> Response:
    """Delete a model that was never evaluated (a registration made by mistake). A model with evaluations
    (of any tenant) is kept: 409 ``model_has_evaluations`` — deactivate it instead. Its owner only."""
    model = await _writable(session, model_ref)
    model_id: uuid.UUID = model.id
    await session.delete(model)
    try:
        await session.commit()
    except IntegrityError:  # evaluations reference it (the foreign key sees every tenant's)
        await session.rollback()
        raise FieldError(
            "conflict", REF_LOC, f"{model_ref} has evaluations: deactivate it instead ({model_id})", "model_has_evaluations"
        ) from None
    return Response(status_code=204)
