"""The model registry's rules, in one place for ``POST /v1/models`` (the gateway) and ``uep-admin models``.

What a registration may say (:class:`ModelCreate`, :class:`ModelUpdate`, :func:`check_registration`), who may
see a model and which of several of one name a tenant gets (:func:`visible_models`, :func:`preference`), how
an endpoint's API key is kept (:func:`encrypt_api_key`, Fernet with the site key ``UEP_MODEL_SECRET_KEY``),
which addresses the platform refuses to call (:func:`check_endpoint_address`) and the probe of a model's
endpoint at registration (:func:`probe`). The contracts themselves are :mod:`uep_common.contract.model_contracts`;
the user's description is docs/models.md.

Every refusal is a :class:`RegistryError` naming the field (``loc``), the reason and a kind, which the
gateway answers as its field error (422, or 409 for a taken name) and ``uep-admin`` prints.

``cryptography`` and ``httpx`` (the ``registry`` extra of uep-common) are imported by the functions that use
them, so that importing this module needs neither.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import re
import socket
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, SecretStr, StringConstraints, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from sqlalchemy import ColumnElement, Select, case, func, or_, select

from uep_common.contract.events import Backend, ModelKind
from uep_common.contract.model_contracts import DEFAULT_CONTRACT, check_metadata, contract_for, contract_names
from uep_common.tables.models import Model

NAME_PATTERN = r"^[A-Za-z0-9._-]{1,200}$"
"""A model name: 1..200 of ``A-Z a-z 0-9 . _ -`` (no ``@``: ``name@version`` is how a model is addressed)."""
VERSION_PATTERN = r"^[A-Za-z0-9._-]{1,100}$"
TRITON_NAME_PATTERN = r"^[A-Za-z0-9._-]{1,200}$"
KEY_REF_PREFIX = "UEP_MODEL_KEY_"
"""``api_key_ref`` names an environment variable (or Secret key) of this prefix only, so a registration cannot
point the inference service's bearer token at any other of its settings (the internal token, the database URL)."""
MAX_CLASSES = 1000
MAX_CLASS_NAME = 200
MAX_FEATURES = 1_000_000
MAX_DIMENSION = 65_536
MAX_STOP = 16
MAX_TENANT_MODELS = 1000
"""Models (every version counts) one tenant may own: what every tenant's model list and name look-ups read
grows with other tenants' shared models, so their number is bounded."""
PROBE_CONNECT_S = 3.0
"""Connect (and name resolution) timeout of the registration probe, seconds."""
PROBE_READ_S = 5.0
"""Read timeout of the registration probe, seconds."""
PROBE_TOTAL_S = 9.0
"""The whole probe (name resolution, metadata and config), seconds: past it the endpoint is unreachable."""
PROBE_MAX_BYTES = 1_048_576
"""Largest probe answer read (model metadata or an OpenAI model list)."""

BLOCKED_NETWORKS = tuple(
    ipaddress.ip_network(n)
    for n in (
        "169.254.0.0/16",  # IPv4 link-local: the cloud metadata services (169.254.169.254)
        "fe80::/10",  # IPv6 link-local
        "fd00:ec2::254/128",  # AWS's IPv6 metadata address
        "100.100.100.200/32",  # Alibaba Cloud's metadata address
        "0.0.0.0/8",
        "::/128",  # IPv6's unspecified address, as 0.0.0.0
        "224.0.0.0/4",  # multicast
        "ff00::/8",
    )
)
"""Addresses the platform never calls (cloud metadata, link-local, multicast), whatever the egress allowlist
says. Loopback and private networks are called only where the site's allowlist names them
(:class:`EgressPolicy`)."""

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
HOST_LABEL = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")
"""One label of a host name (RFC 1123)."""


@dataclass(frozen=True)
class EgressPolicy:
    """Which addresses a model endpoint may have: the site's egress allowlist for model endpoints.

    ``networks`` (CIDRs) and ``hosts`` (host names, matched without letter case or a final dot) are allowed
    whatever they resolve to, except :data:`BLOCKED_NETWORKS` (refused even inside a listed network); any other endpoint must resolve only to
    public (globally routable) addresses, and only while ``public`` is true. So loopback, private, shared
    (100.64/10) and unique-local addresses are called only where the site lists them, and a host name that
    resolves to 127.0.0.1 is loopback. Built from the gateway's ``UEP_MODEL_EGRESS_ALLOW`` and
    ``UEP_MODEL_EGRESS_PUBLIC`` by :meth:`parse`."""

    networks: tuple[IPNetwork, ...] = ()
    hosts: frozenset[str] = frozenset()
    public: bool = True

    @classmethod
    def parse(cls, allow: str, public: bool = True) -> EgressPolicy:
        """The policy of a comma-separated allowlist: CIDRs or addresses (``127.0.0.0/8``, ``::1``,
        ``10.0.0.0/8``) and host names (``triton.uep.svc``). Raises ValueError naming an entry that is
        neither, or one inside :data:`BLOCKED_NETWORKS`."""
        networks: list[IPNetwork] = []
        hosts: set[str] = set()
        for raw in allow.split(","):
            entry = raw.strip()
            if not entry:
                continue
            try:
                net = ipaddress.ip_network(entry, strict=False)
            except ValueError:
                name = entry.lower().rstrip(".")
                if not name or len(name) > 253 or not all(HOST_LABEL.fullmatch(label) for label in name.split(".")):
                    raise ValueError(f"egress allowlist entry {entry!r} is neither a CIDR nor a host name") from None
                hosts.add(name)
                continue
            if any(net.subnet_of(b) for b in BLOCKED_NETWORKS if b.version == net.version):  # type: ignore[arg-type]
                raise ValueError(f"egress allowlist entry {entry!r} is an address the platform never calls")
            networks.append(net)
        return cls(tuple(networks), frozenset(hosts), public)

    def allows(self, host: str, address: str) -> bool:
        """True when an endpoint naming ``host`` may call ``address`` (one of the host's addresses)."""
        if host.lower().rstrip(".") in self.hosts:
            return True
        addrs = _addresses_of(ipaddress.ip_address(address.split("%", 1)[0]))
        if any(a in net for a in addrs for net in self.networks if net.version == a.version):
            return True
        return self.public and all(a.is_global for a in addrs)


def _no_dot_segment(value: str) -> str:
    """A name, version or served name is one path segment: ``.`` and ``..`` would be resolved away by URL
    normalisation (``/v2/models/..`` is ``/v2``)."""
    if value.strip(".") == "":
        raise ValueError("'.' and '..' are not names")
    return value


def _not_an_id(value: str) -> str:
    """A model name that parses as a UUID would be read as a model id where a model is named (evaluations)."""
    try:
        uuid.UUID(value)
    except ValueError:
        return value
    raise ValueError("a model name may not be a UUID (it would be read as a model id)")


Segment = AfterValidator(_no_dot_segment)
Name = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]
ClassName = Annotated[str, StringConstraints(min_length=1, max_length=MAX_CLASS_NAME)]
StopString = Annotated[str, StringConstraints(min_length=1, max_length=200)]


class RegistryError(Exception):
    """A registration or change the registry refuses: ``status`` (422, 409, 403), ``loc`` (e.g.
    ``("body", "spec", "class_names")``), ``msg`` (the reason), ``kind`` (machine-readable) and ``problems``
    (every reason at that ``loc``, e.g. one per mismatching tensor; ``[msg]`` unless given)."""

    def __init__(self, status: int, loc: tuple[str | int, ...], msg: str, kind: str, problems: list[str] | None = None) -> None:
        super().__init__(msg)
        self.status, self.loc, self.msg, self.kind = status, loc, msg, kind
        self.problems = problems or [msg]


def _bad(field: str | tuple[str | int, ...], msg: str, kind: str = "bad_value", status: int = 422) -> RegistryError:
    loc = ("body", field) if isinstance(field, str) else ("body", *field)
    return RegistryError(status, loc, msg, kind)


class ModelSpec(BaseModel):
    """Kind-specific details (model_contracts): ``class_names`` (classification: one name per class, in the
    order of the model's ``probabilities``), ``input`` (classification: ``text`` | ``features``, = the
    contract), ``n_features`` (classification/features: the input vector's length), ``dimension``
    (embedding: the output vector's length)."""

    model_config = ConfigDict(extra="forbid")

    class_names: list[ClassName] | None = Field(None, min_length=2, max_length=MAX_CLASSES)
    input: Literal["text", "features"] | None = None
    n_features: int | None = Field(None, ge=1, le=MAX_FEATURES, strict=True)
    dimension: int | None = Field(None, ge=1, le=MAX_DIMENSION, strict=True)


class DecodingDefaults(BaseModel):
    """A generation model's decoding defaults: ``max_tokens`` (tokens), ``temperature`` (0 = greedy), ``stop``."""

    model_config = ConfigDict(extra="forbid")

    max_tokens: int = Field(256, ge=1, le=32_768)
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    stop: list[StopString] = Field(default_factory=list, max_length=MAX_STOP)


Price = Annotated[Decimal, Field(ge=0, max_digits=24, decimal_places=10)]


class CostModel(BaseModel):
    """The model's cost unit and prices in the site currency, and the expected size of one item
    (uep_common.contract.costs; the columns of the same names)."""

    model_config = ConfigDict(extra="forbid")

    cost_unit: Literal["none", "tokens", "gpu_second", "call"] = "none"
    price_per_1k_input_tokens: Price = Decimal(0)
    price_per_1k_output_tokens: Price = Decimal(0)
    price_per_gpu_second: Price = Decimal(0)
    price_per_call: Price = Decimal(0)
    expected_input_tokens: int = Field(500, ge=0, le=10_000_000)
    expected_output_tokens: int = Field(256, ge=0, le=10_000_000)
    expected_latency_ms: float = Field(1000.0, ge=0, le=86_400_000)


COST_FIELDS = tuple(CostModel.model_fields)


class ModelCreate(BaseModel):
    """``POST /v1/models``: a model to register (docs/models.md).

    ``backend``: ``triton`` (endpoint ``http(s)://host:port``, or gRPC ``host:port`` / ``grpc://host:port``,
    which the probe cannot reach: register those with ``probe=false``) or ``openai_compatible`` (endpoint the
    server's base URL, without ``/v1``). ``contract``: default by kind and backend (generation: ``uep`` on
    Triton, ``openai``; classification: ``text``; ranking, embedding: ``uep``). ``triton_model_name``: the
    served model's name (Triton's, or OpenAI's ``model``), default ``name``. ``owner``: ``site`` registers a
    site model (no owner tenant; a site admin acting across tenants only). ``api_key``: write-only, stored
    encrypted; or ``api_key_ref``, the name of an ``UEP_MODEL_KEY_…`` variable of the inference service (site
    models only).
    """

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    name: Annotated[str, Segment, AfterValidator(_not_an_id)] = Field(
        pattern=NAME_PATTERN, description="1..200 of A-Z a-z 0-9 . _ - (not '.', '..' or a UUID)"
    )
    version: Annotated[str, Segment] = Field("1", pattern=VERSION_PATTERN)
    description: str = Field("", max_length=2000)
    kind: ModelKind = ModelKind.generation
    backend: Backend = Backend.triton
    endpoint: str = Field(min_length=1, max_length=500)
    contract: str | None = Field(None, min_length=1, max_length=40)
    triton_model_name: Annotated[str, Segment] | None = Field(None, pattern=TRITON_NAME_PATTERN)
    triton_model_version: str | None = Field(None, pattern=r"^[0-9]{1,18}$")
    spec: ModelSpec = Field(default_factory=ModelSpec)
    max_in_flight: int | None = Field(None, ge=1, le=1024, description="Serving capacity: calls in flight.")
    decoding_defaults: DecodingDefaults = Field(default_factory=DecodingDefaults)
    cost: CostModel = Field(default_factory=CostModel)
    supports_logprobs: bool = False
    visibility: Literal["private", "shared"] = "private"
    owner: Literal["tenant", "site"] = "tenant"
    api_key: SecretStr | None = Field(None, min_length=1, max_length=4096)
    api_key_ref: str | None = Field(None, pattern=r"^UEP_MODEL_KEY_[A-Z0-9_]{1,186}$")


class ModelUpdate(BaseModel):
    """``PATCH /v1/models/{name}@{version}``: the fields to change (omitted: unchanged). ``api_key: null``
    removes the stored key; a new ``endpoint`` is probed as at registration."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    description: str | None = Field(None, max_length=2000)
    max_in_flight: int | None = Field(None, ge=1, le=1024)
    decoding_defaults: DecodingDefaults | None = None
    cost: CostModel | None = None
    supports_logprobs: bool | None = None
    visibility: Literal["private", "shared"] | None = None
    endpoint: str | None = Field(None, min_length=1, max_length=500)
    api_key: SecretStr | None = Field(None, min_length=1, max_length=4096)
    api_key_ref: str | None = Field(None, pattern=r"^UEP_MODEL_KEY_[A-Z0-9_]{1,186}$")


# ------------------------------------------------------------------ rules


class EgressSettings(BaseSettings):
    """The site's egress allowlist for model endpoints (``UEP_MODEL_EGRESS_*``), read by the gateway and
    ``uep-admin models``; :meth:`egress_policy` is the :class:`EgressPolicy` they apply."""

    model_config = SettingsConfigDict(env_prefix="UEP_", extra="ignore")

    model_egress_allow: str = Field(
        "",
        description="Comma-separated CIDRs and host names model endpoints may have besides public addresses, "
        "e.g. '127.0.0.0/8,::1' for a local stack or '10.0.0.0/8,triton.uep.svc' in a cluster. Loopback, "
        "private and shared addresses are refused unless listed; cloud metadata, link-local and multicast "
        "always are.",
    )
    model_egress_public: bool = Field(
        True, description="Allow endpoints that resolve only to public (globally routable) addresses."
    )

    @field_validator("model_egress_allow")
    @classmethod
    def _valid_allowlist(cls, value: str) -> str:
        EgressPolicy.parse(value)
        return value

    def egress_policy(self) -> EgressPolicy:
        """The policy these settings describe."""
        return EgressPolicy.parse(self.model_egress_allow, self.model_egress_public)


def check_endpoint(backend: Backend | str, endpoint: str, field: str = "endpoint") -> tuple[str, str, int | None]:
    """The endpoint's (scheme, host, port) after checking its form for ``backend``: Triton takes
    ``http(s)://host:port``, ``grpc://host:port`` or ``host:port``; OpenAI-compatible ``http(s)://host[:port][/path]``.
    Raises :class:`RegistryError` naming ``field`` for another scheme, no host, a path on a Triton
    endpoint, user info or a query."""
    text = endpoint.strip()
    if any(c.isspace() for c in text) or not text.isprintable():
        raise _bad(field, "the endpoint has spaces or control characters")
    raw = text if "://" in text else f"grpc://{text}"
    try:
        parts = urlsplit(raw)
        port = parts.port
    except ValueError as exc:
        raise _bad(field, f"not a URL: {exc}") from None
    allowed = ("http", "https", "grpc") if str(backend) == Backend.triton else ("http", "https")
    if parts.scheme not in allowed:
        raise _bad(field, f"scheme {parts.scheme!r}: a {backend} endpoint is one of {', '.join(allowed)}", "bad_scheme")
    if not parts.hostname:
        raise _bad(field, "the endpoint names no host")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise _bad(field, "the endpoint may not carry user info, a query or a fragment")
    if str(backend) == Backend.triton:
        if parts.path not in ("", "/"):
            raise _bad(field, "a Triton endpoint is scheme://host:port without a path")
        if port is None and parts.scheme == "grpc":
            raise _bad(field, "a gRPC endpoint needs a port (host:8001)")
    return parts.scheme, parts.hostname, port


NAT64_NETWORKS = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
"""IPv6 prefixes that translate to an IPv4 address in their last 32 bits (RFC 6052 and RFC 8215 NAT64)."""
IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
"""Deprecated IPv4-compatible IPv6 addresses (RFC 4291 2.5.5.1): ``::a.b.c.d``."""


def _addresses_of(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """``ip`` and the IPv4 address an IPv6 address carries: IPv4-mapped, IPv4-compatible, NAT64, 6to4
    (RFC 3056) and Teredo (RFC 4380, the client's address), each of which may route to it."""
    out: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = [ip]
    if isinstance(ip, ipaddress.IPv6Address):
        last32 = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if ip.ipv4_mapped is not None:
            out.append(ip.ipv4_mapped)
        if any(ip in net for net in NAT64_NETWORKS) or (ip in IPV4_COMPATIBLE and int(ip) > 1):
            out.append(last32)
        if ip.sixtofour is not None:
            out.append(ip.sixtofour)
        if ip.teredo is not None:
            out.append(ip.teredo[1])
    return out


def _blocked(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    return any(a in net for a in _addresses_of(ip) for net in BLOCKED_NETWORKS if net.version == a.version)


async def check_endpoint_address(
    host: str,
    port: int | None,
    field: str = "endpoint",
    timeout_s: float = PROBE_CONNECT_S,
    egress: EgressPolicy | None = None,
) -> None:
    """Refuse (422 naming ``field``) an endpoint whose host is, or resolves to, an address of
    :data:`BLOCKED_NETWORKS` or an IPv6 address that carries one (IPv4-mapped or -compatible, NAT64, 6to4,
    Teredo): kind ``blocked_address``; or one the site's allowlist ``egress`` does not allow (default: public
    addresses only): kind ``egress_refused``. Neither message names the address the host resolved to. A name
    that does not resolve within ``timeout_s`` is ``unreachable``, the answer of every endpoint that cannot be
    reached (:data:`UNREACHABLE`). A bound, not a guarantee: the name may resolve elsewhere later (DNS
    rebinding)."""
    policy = egress if egress is not None else EgressPolicy()
    try:
        addresses = [host] if _is_ip(host) else await _resolve(host, port, timeout_s)
    except (OSError, TimeoutError, UnicodeError):
        raise unreachable(f"{host}:{port}" if port else host, field) from None
    for address in addresses:
        if _blocked(address):
            raise _bad(field, f"the host {host!r} is an address the platform does not call", "blocked_address")
        if not policy.allows(host, address):
            raise _bad(
                field,
                f"the host {host!r} is outside the site's egress allowlist for model endpoints "
                "(UEP_MODEL_EGRESS_ALLOW, UEP_MODEL_EGRESS_PUBLIC)",
                "egress_refused",
            )


UNREACHABLE = "{target} is unreachable: no HTTP answer (connection refused, reset, timed out, not HTTP, or no such host)"
"""The one message of every endpoint that cannot be reached, whichever way it failed, so that the probe does
not tell a closed port from a silent or a non-HTTP one."""


def unreachable(target: str, field: str = "endpoint") -> RegistryError:
    """The :class:`RegistryError` (422 ``unreachable``) of an endpoint that cannot be reached."""
    return _bad(field, UNREACHABLE.format(target=target), "unreachable")


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return True


async def _resolve(host: str, port: int | None, timeout_s: float) -> list[str]:
    loop = asyncio.get_running_loop()
    infos = await asyncio.wait_for(loop.getaddrinfo(host, port or 80, type=socket.SOCK_STREAM), timeout_s)
    return sorted({str(info[4][0]) for info in infos})


def resolved_contract(kind: ModelKind, backend: Backend, contract: str | None) -> str:
    """The contract of a registration: the one named, else the default for ``(kind, backend)``. Raises
    :class:`RegistryError` naming ``contract`` (or ``backend``) for a combination that does not exist."""
    name = contract or DEFAULT_CONTRACT.get((kind, backend))
    if name is None:
        raise _bad("backend", f"a {kind.value} model has no {backend.value} contract; backends: triton", "bad_contract")
    found = contract_for(kind, name)
    if found is None:
        raise _bad(
            "contract", f"kind {kind.value} has the contracts {', '.join(contract_names(kind))}, not {name!r}", "bad_contract"
        )
    if found.backend != backend:
        raise _bad(
            "contract",
            f"contract {kind.value}/{name} is served by backend {found.backend.value}, not {backend.value}",
            "bad_contract",
        )
    return name


def check_spec(kind: ModelKind, contract: str, spec: ModelSpec) -> dict[str, Any]:
    """The stored ``spec`` of a model of ``(kind, contract)`` (JSON, without unset keys; ``input`` filled in
    for classification). Raises :class:`RegistryError` naming the spec key that is missing, repeated or
    does not apply to the kind."""
    found = contract_for(kind, contract)
    assert found is not None
    data = spec.model_dump(exclude_none=True)
    applies = {
        "class_names": kind == ModelKind.classification,
        "input": kind == ModelKind.classification,
        "n_features": contract == "features" and kind == ModelKind.classification,
        "dimension": kind == ModelKind.embedding,
    }
    for key in data:
        if not applies[key]:
            raise _bad(("spec", key), f"{key} does not apply to a {kind.value}/{contract} model", "not_applicable")
    for key in found.spec_keys:
        if key not in data:
            raise _bad(("spec", key), f"a {kind.value}/{contract} model needs spec.{key}", "missing")
    if kind == ModelKind.classification:
        names = data["class_names"]
        if len(set(names)) != len(names):
            repeated = next(n for n in names if names.count(n) > 1)
            raise _bad(("spec", "class_names"), f"the class {repeated!r} is named twice", "repeated")
        if data.setdefault("input", contract) != contract:
            raise _bad(("spec", "input"), f"spec.input is the contract's input, {contract!r}", "bad_value")
    return data


def check_registration(reg: ModelCreate, *, site_act: bool) -> tuple[str, dict[str, Any]]:
    """Check the rules between a registration's fields; returns (contract, stored spec). ``site_act``: the
    caller is a site admin acting across tenants. Raises :class:`RegistryError` (403 for ``owner: site``
    or ``api_key_ref`` without ``site_act``, 422 otherwise) naming the field."""
    if reg.owner == "site" and not site_act:
        raise _bad("owner", "a site model (owner: site) is registered by a site admin acting across tenants", "forbidden", 403)
    if reg.owner == "site" and reg.visibility != "private":
        raise _bad("visibility", "a site model is visible to every tenant: leave visibility out", "not_applicable")
    contract = resolved_contract(reg.kind, reg.backend, reg.contract)
    spec = check_spec(reg.kind, contract, reg.spec)
    check_endpoint(reg.backend, reg.endpoint)
    check_key_fields(reg.backend, reg.api_key, reg.api_key_ref, owner_site=reg.owner == "site")
    if reg.supports_logprobs and not (reg.kind == ModelKind.generation and contract in ("uep", "openai")):
        raise _bad("supports_logprobs", "log-likelihoods are served by generation/uep and generation/openai models only")
    if reg.kind != ModelKind.generation and "decoding_defaults" in reg.model_fields_set:
        raise _bad(
            "decoding_defaults", f"a {reg.kind.value} model generates no text: leave decoding_defaults out", "not_applicable"
        )
    return contract, spec


def check_key_fields(backend: Backend | str, api_key: SecretStr | None, api_key_ref: str | None, *, owner_site: bool) -> None:
    """``api_key`` and ``api_key_ref``: one of them at most, for an OpenAI-compatible model only (the Triton
    backend sends no credentials); ``api_key_ref`` for a site model only (a tenant's model could otherwise
    send a key meant for another's endpoint to its own). Raises :class:`RegistryError`."""
    if api_key is not None and api_key_ref is not None:
        raise _bad("api_key_ref", "give api_key or api_key_ref, not both", "conflicting_fields")
    if (api_key is not None or api_key_ref is not None) and str(backend) != Backend.openai_compatible:
        field = "api_key" if api_key is not None else "api_key_ref"
        raise _bad(field, "only an openai_compatible endpoint takes an API key (the Triton backend sends none)", "not_applicable")
    if api_key_ref is not None and not owner_site:
        raise _bad(
            "api_key_ref", "api_key_ref is for site models; a tenant's model stores its api_key (encrypted)", "forbidden", 403
        )


# ------------------------------------------------------------------ API keys


def _fernet(secret_key: str | None) -> Any:
    """A MultiFernet over the comma-separated keys of ``UEP_MODEL_SECRET_KEY`` (the first encrypts; every one
    decrypts, for key rotation). Raises :class:`RegistryError` naming ``api_key`` when unset or invalid."""
    from cryptography.fernet import Fernet, MultiFernet

    keys = [k.strip() for k in (secret_key or "").split(",") if k.strip()]
    if not keys:
        raise _bad("api_key", "this site stores no API keys: the setting UEP_MODEL_SECRET_KEY is not set", "no_secret_key")
    try:
        return MultiFernet([Fernet(k.encode()) for k in keys])
    except ValueError:
        raise _bad(
            "api_key", "the setting UEP_MODEL_SECRET_KEY is not a Fernet key (32 url-safe base64 bytes)", "bad_secret_key"
        ) from None


def encrypt_api_key(api_key: str, secret_key: str | None) -> bytes:
    """``api_key`` encrypted with the site key (Fernet: AES-128-CBC + HMAC-SHA256, the ``cryptography``
    package); the bytes stored in ``models.api_key_encrypted``. Raises :class:`RegistryError` when the site
    has no (valid) key."""
    token: bytes = _fernet(secret_key).encrypt(api_key.encode())
    return token


def decrypt_api_key(token: bytes, secret_key: str | None) -> str:
    """The API key stored as ``token`` by :func:`encrypt_api_key`. Raises :class:`RegistryError` (no site
    key) or ``cryptography.fernet.InvalidToken`` (another key encrypted it, or it was altered)."""
    plain: bytes = _fernet(secret_key).decrypt(token)
    return plain.decode()


# ------------------------------------------------------------------ rows


def registration_values(
    reg: ModelCreate,
    contract: str,
    spec: dict[str, Any],
    *,
    owner_tenant_id: uuid.UUID | None,
    created_by: str,
    secret_key: str | None,
) -> dict[str, Any]:
    """The ``models`` row of a checked registration (:func:`check_registration`) as column values."""
    return {
        "id": uuid.uuid4(),
        "name": reg.name,
        "version": reg.version,
        "description": reg.description,
        "kind": reg.kind.value,
        "backend": reg.backend.value,
        "contract": contract,
        "spec": spec,
        "endpoint": reg.endpoint.strip(),
        "triton_model_name": reg.triton_model_name or reg.name,
        "triton_model_version": reg.triton_model_version,
        "decoding_defaults": reg.decoding_defaults.model_dump() if reg.kind == ModelKind.generation else {},
        "supports_logprobs": reg.supports_logprobs,
        "max_in_flight": reg.max_in_flight,
        **reg.cost.model_dump(),
        "owner_tenant_id": owner_tenant_id,
        "visibility": "private" if owner_tenant_id is None else reg.visibility,
        "active": True,
        "api_key_encrypted": encrypt_api_key(reg.api_key.get_secret_value(), secret_key) if reg.api_key else None,
        "api_key_ref": reg.api_key_ref,
        "created_by": created_by[:200],
    }


def visible_models(tenant_id: uuid.UUID) -> ColumnElement[bool]:
    """The models tenant ``tenant_id`` may see and evaluate: site models, shared ones and its own (what
    row-level security enforces for the gateway's scoped sessions; the scheduler's are not scoped)."""
    return or_(Model.owner_tenant_id.is_(None), Model.visibility == "shared", Model.owner_tenant_id == tenant_id)


def preference(tenant_id: uuid.UUID) -> ColumnElement[int]:
    """Order of models of one name for tenant ``tenant_id``: its own (0), then site models (1), then other
    tenants' shared ones (2)."""
    rank: ColumnElement[int] = case((Model.owner_tenant_id == tenant_id, 0), (Model.owner_tenant_id.is_(None), 1), else_=2)
    return rank


def split_ref(ref: str) -> tuple[str, str | None]:
    """``name`` or ``name@version`` → (name, version or None)."""
    name, at, version = ref.partition("@")
    return name, (version if at else None)


def model_query(
    name: str, version: str | None, tenant_id: uuid.UUID, *, latest_active: bool = True, all_tenants: bool = False
) -> Select[Model]:
    """The SELECT of the one model ``name`` (``@version``) tenant ``tenant_id`` means: visible (any model with
    ``all_tenants``, a site admin acting across tenants), its own before a site model before another tenant's
    shared one; without a version, the newest active version (``latest_active``; else the newest), an inactive
    one only when no version is active."""
    q = select(Model).where(Model.name == name)
    if not all_tenants:
        q = q.where(visible_models(tenant_id))
    if version is not None:
        q = q.where(Model.version == version)
    order: list[Any] = [preference(tenant_id)]
    if version is None and latest_active:
        order.append(Model.active.desc())
    return q.order_by(*order, Model.created_at.desc(), Model.id).limit(1)


def owned_count(tenant_id: uuid.UUID) -> Select[int]:
    """SELECT of the number of models (versions) tenant ``tenant_id`` owns (:data:`MAX_TENANT_MODELS` bounds it)."""
    return select(func.count()).select_from(Model).where(Model.owner_tenant_id == tenant_id)


def site_name_taken(name: str) -> Select[uuid.UUID]:
    """SELECT of a site model named ``name`` in any letter case (any version): a tenant may not register that
    name, nor one that differs from it in case only (``UEP-Oracle`` beside the site's ``uep-oracle``)."""
    return select(Model.id).where(func.lower(Model.name) == name.lower(), Model.owner_tenant_id.is_(None)).limit(1)


def shared_name_taken(name: str, tenant_id: uuid.UUID) -> Select[uuid.UUID]:
    """SELECT of another tenant's shared model named ``name`` in any letter case (any version): a tenant may
    not share a model of that name, since every third tenant would then see two (and get the newer). Only
    shared models are looked at, so the answer tells nothing of another tenant's private ones."""
    return (
        select(Model.id)
        .where(
            func.lower(Model.name) == name.lower(),
            Model.owner_tenant_id.is_not(None),
            Model.owner_tenant_id != tenant_id,
            Model.visibility == "shared",
        )
        .limit(1)
    )


# ------------------------------------------------------------------ probe


async def probe(
    *,
    backend: Backend | str,
    endpoint: str,
    served_name: str,
    served_version: str | None,
    kind: ModelKind | str,
    contract: str,
    spec: Mapping[str, Any],
    api_key: str | None = None,
    transport: Any = None,
    egress: EgressPolicy | None = None,
) -> None:
    """Check that the endpoint serves the model as registered. Triton (HTTP only): KServe v2
    ``GET {endpoint}/v2/models/{name}[/versions/{v}]`` and its ``/config``, compared with the contract by
    :func:`uep_common.contract.model_contracts.check_metadata`; OpenAI-compatible: ``GET {endpoint}/v1/models`` with
    the key. Connect timeout :data:`PROBE_CONNECT_S`, read :data:`PROBE_READ_S`; no redirects followed.

    Raises :class:`RegistryError` (422): ``endpoint`` unreachable, blocked or gRPC; ``triton_model_name``
    unknown to the server; ``contract`` when the tensors differ (one message per tensor, joined by ``; ``);
    ``api_key`` refused by the server; ``endpoint`` when the whole probe takes over :data:`PROBE_TOTAL_S`.
    Every failure to reach the server is the one ``unreachable`` answer (:data:`UNREACHABLE`). ``egress``: the
    site's allowlist (:func:`check_endpoint_address`); ``transport``: an httpx transport (tests)."""
    try:
        await asyncio.wait_for(
            _probe(backend, endpoint, served_name, served_version, kind, contract, spec, api_key, transport, egress),
            PROBE_TOTAL_S,
        )
    except TimeoutError:
        raise unreachable(endpoint.strip().rstrip("/")) from None


async def _probe(
    backend: Backend | str,
    endpoint: str,
    served_name: str,
    served_version: str | None,
    kind: ModelKind | str,
    contract: str,
    spec: Mapping[str, Any],
    api_key: str | None,
    transport: Any,
    egress: EgressPolicy | None,
) -> None:
    import httpx

    scheme, host, port = check_endpoint(backend, endpoint)
    await check_endpoint_address(host, port, egress=egress)
    if scheme == "grpc":
        raise _bad(
            "endpoint",
            "the registration probe speaks Triton's HTTP protocol: give the HTTP endpoint (http://host:8000), "
            "or register the gRPC endpoint with probe=false (tenant admins)",
            "probe_needs_http",
        )
    base = endpoint.strip().rstrip("/")
    timeout = httpx.Timeout(PROBE_READ_S, connect=PROBE_CONNECT_S)
    headers = {"Accept-Encoding": "identity"} | ({"Authorization": f"Bearer {api_key}"} if api_key else {})
    async with httpx.AsyncClient(timeout=timeout, follow_redirects=False, transport=transport, headers=headers) as client:
        if str(backend) == Backend.openai_compatible:
            await _probe_openai(client, base, served_name)
            return
        path = f"/v2/models/{served_name}" + (f"/versions/{served_version}" if served_version else "")
        status, metadata = await _get_json(client, base, path)
        if status != 200 or not isinstance(metadata, dict):
            field = "triton_model_version" if served_version and status in (400, 404) else "triton_model_name"
            error = metadata.get("error") if isinstance(metadata, dict) else None
            raise _bad(
                field,
                f"Triton at {base} answered {status} for model {served_name!r}"
                + (f" version {served_version}" if served_version else "")
                + (f": {str(error)[:300]}" if error else "")
                + (": not KServe v2 model metadata (a JSON object)" if status == 200 else ""),
                "unknown_served_model",
            )
        config_status, config = await _get_json(client, base, path + "/config")
        problems = check_metadata(
            kind, contract, spec, metadata, config if config_status == 200 and isinstance(config, dict) else None
        )
    if problems:
        refused = _bad("contract", "; ".join(problems)[:2000], "contract_mismatch")
        refused.problems = [p[:500] for p in problems[:50]]
        raise refused


async def _get_json(client: Any, base: str, path: str) -> tuple[int, Any]:
    """GET ``base + path`` (``url``): (status, decoded JSON or None), at most :data:`PROBE_MAX_BYTES` read as sent (the
    answer is not decompressed: a compressed one is refused, so that a small answer cannot expand in
    memory). Raises :class:`RegistryError` naming ``endpoint`` when the server cannot be reached, answers
    more or answers compressed."""
    import httpx

    url = base + path
    try:
        async with client.stream("GET", url) as r:
            encoding = r.headers.get("content-encoding", "identity").strip().lower()
            if encoding not in ("", "identity"):
                raise _bad(
                    "endpoint",
                    f"{url} answered with content-encoding {encoding[:40]!r}; the probe reads identity only",
                    "probe_failed",
                )
            chunks: list[bytes] = []
            size = 0
            async for chunk in r.aiter_raw():
                chunks.append(chunk)
                size += len(chunk)
                if size > PROBE_MAX_BYTES:
                    raise _bad("endpoint", f"{url} answered more than {PROBE_MAX_BYTES} bytes", "probe_failed")
            body = b"".join(chunks)
            status = r.status_code
    except (httpx.HTTPError, OSError):  # refused, reset, timed out, not HTTP: one answer
        raise unreachable(base) from None
    try:
        return status, json.loads(body) if body else None
    except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
        return status, None


async def _probe_openai(client: Any, base: str, served_name: str) -> None:
    status, body = await _get_json(client, base, "/v1/models")
    if status in (401, 403):
        raise _bad("api_key", f"{base}/v1/models refused the API key ({status})", "api_key_refused")
    if status != 200:
        raise _bad("endpoint", f"{base}/v1/models answered {status}: not an OpenAI-compatible server", "probe_failed")
    data = body.get("data") if isinstance(body, dict) else None
    if isinstance(data, list) and data:
        served = {str(m.get("id")) for m in data if isinstance(m, dict)}
        if served_name not in served:
            listed = ", ".join(sorted(served)[:10])
            raise _bad("triton_model_name", f"{base} serves no model {served_name!r} (it lists {listed})", "unknown_served_model")
