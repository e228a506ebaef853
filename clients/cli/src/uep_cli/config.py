"""Where ``uep`` finds the platform and its credentials.

A JSON file, by default ``$XDG_CONFIG_HOME/uep/config.json`` (``~/.config/uep/config.json``), or the path in
``UEP_CONFIG``. ``uep login`` writes it with mode 0600 (owner read/write only; its directory 0700), since
it holds an API key or a session token. Keys: ``url``, and either ``api_key`` or ``session`` + ``csrf``
(+ ``username``), and optionally ``tenant``. The environment overrides the file: ``UEP_URL``,
``UEP_API_KEY`` (a key given there wins over a stored session) and ``UEP_TENANT``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_URL = "http://127.0.0.1:8080"
"""The gateway of the local stack started by ``make up`` (port base 0)."""


class ConfigError(Exception):
    """The configuration cannot be read or says nothing usable; the message says what to do."""


@dataclass(frozen=True)
class Credentials:
    """What a request needs: the gateway's base URL and one way to authenticate (or none)."""

    url: str
    api_key: str | None = None
    session: str | None = None
    csrf: str | None = None
    tenant: str | None = None
    username: str | None = None

    def headers(self) -> dict[str, str]:
        """The HTTP headers that authenticate a request with these credentials."""
        h: dict[str, str] = {}
        if self.api_key:
            h["Authorization"] = f"Bearer {self.api_key}"
        elif self.session:
            h["Cookie"] = f"uep_session={self.session}; uep_csrf={self.csrf or ''}"
            h["X-CSRF-Token"] = self.csrf or ""
        if self.tenant:
            h["X-UEP-Tenant"] = self.tenant
        return h


def config_path() -> Path:
    """The configuration file's path (``UEP_CONFIG``, else the XDG location)."""
    if os.environ.get("UEP_CONFIG"):
        return Path(os.environ["UEP_CONFIG"])
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "uep" / "config.json"


def read_file() -> dict[str, str]:
    """The stored configuration ({} when there is none). Raises :class:`ConfigError` on unreadable JSON."""
    path = config_path()
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {path}: {exc} (run `uep login` again)") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} is not a JSON object (run `uep login` again)")
    return {k: str(v) for k, v in data.items() if v is not None}


def write_file(data: dict[str, str]) -> Path:
    """Store ``data`` as the configuration, readable by its owner only (0600, directory 0700); returns the path."""
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=2)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
    return path


def remove_file() -> bool:
    """Delete the stored configuration; True when there was one."""
    try:
        config_path().unlink()
        return True
    except FileNotFoundError:
        return False


def credentials(url: str | None = None) -> Credentials:
    """The effective credentials: ``url`` (a ``--url`` option), else the environment, else the file."""
    stored = read_file()
    env_key = os.environ.get("UEP_API_KEY")
    return Credentials(
        url=(url or os.environ.get("UEP_URL") or stored.get("url") or DEFAULT_URL).rstrip("/"),
        api_key=env_key or stored.get("api_key"),
        session=None if env_key else stored.get("session"),
        csrf=None if env_key else stored.get("csrf"),
        tenant=os.environ.get("UEP_TENANT") or stored.get("tenant"),
        username=stored.get("username"),
    )
