"""The API key each OpenAI-compatible call sends, from the model registry's entry carried by the ModelTarget.

A model registered with an ``api_key`` carries it encrypted (``ModelTarget.api_key_encrypted``, a Fernet token
under the site key ``UEP_MODEL_SECRET_KEY``, :func:`uep_common.registry.model_registry.encrypt_api_key`); this service
holds the key that decrypts it. A site model may instead name one of this service's environment variables
(``ModelTarget.api_key_ref``, always ``UEP_MODEL_KEY_…``: no other variable can be named). A site model with
neither uses the service-wide ``UEP_OPENAI_API_KEY``; a tenant's model (``ModelTarget.tenant_model``) never does,
since its endpoint is the tenant's to choose. Plain keys live only in this process's memory (a bounded cache).
"""

from __future__ import annotations

import os
from collections import OrderedDict

from uep_common.contract.events import ModelTarget
from uep_inference.backends.base import BackendError

KEY_REF_PREFIX = "UEP_MODEL_KEY_"
CACHE_SIZE = 1024


class ApiKeys:
    """Resolves the bearer token of a target.

    Args:
        secret_key: the comma-separated Fernet key(s) of ``UEP_MODEL_SECRET_KEY``, or None.
        default: the service-wide token for models without one of their own, or None.
    """

    def __init__(self, secret_key: str | None, default: str | None) -> None:
        self._secret_key = secret_key
        self._default = default
        self._plain: OrderedDict[str, str] = OrderedDict()

    def for_target(self, target: ModelTarget) -> str | None:
        """The token to send for ``target``, or None for none.

        Raises:
            BackendError: ``api_key_unavailable`` when the target's stored key cannot be decrypted (no or another
                site key) or its referenced variable is unset.
        """
        if target.api_key_encrypted:
            token = target.api_key_encrypted
            if token not in self._plain:
                self._plain[token] = self._decrypt(token, target)
                while len(self._plain) > CACHE_SIZE:
                    self._plain.popitem(last=False)
            self._plain.move_to_end(token)
            return self._plain[token]
        if target.api_key_ref:
            value = os.environ.get(target.api_key_ref) if target.api_key_ref.startswith(KEY_REF_PREFIX) else None
            if not value:
                raise BackendError(
                    "api_key_unavailable", f"model {target.name}: its API key variable {target.api_key_ref} is not set here"
                )
            return value
        return None if target.tenant_model else self._default

    def _decrypt(self, token: str, target: ModelTarget) -> str:
        from cryptography.fernet import InvalidToken

        from uep_common.registry.model_registry import RegistryError, decrypt_api_key

        try:
            return decrypt_api_key(token.encode(), self._secret_key)
        except RegistryError as exc:
            raise BackendError("api_key_unavailable", f"model {target.name}: {exc}") from None
        except InvalidToken:  # another site key encrypted it, or it was altered
            raise BackendError(
                "api_key_unavailable", f"model {target.name}: its stored API key does not decrypt with this site's key"
            ) from None
