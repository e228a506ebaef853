"""Kafka client settings: security objects of the broker factory and admin clients, the producer, topic specs.

Expected values are those of aiokafka's and FastStream's parameters (``security_protocol``, ``sasl_mechanism``,
``sasl_plain_username``/``sasl_plain_password``, ``ssl_context``, ``enable_idempotence``) and Kafka's topic config
``min.insync.replicas``, ``retention.ms``, ``retention.bytes``, ``segment.bytes``. The broker's connection keywords are read from FastStream 0.7's ``_connection_kwargs``
(what ``connect`` passes to aiokafka's producer) and its consumer builder.
"""

from __future__ import annotations

import asyncio
import os
import ssl

import certifi
import pytest
from faststream.security import BaseSecurity, SASLPlaintext, SASLScram256, SASLScram512
from pydantic import ValidationError

from uep_common.runtime.messaging import client_options, make_admin, make_broker, security, topic_spec
from uep_common.runtime.settings import CommonSettings

pytestmark = pytest.mark.unit

CA = certifi.where()
"""A real PEM bundle to load as the CA file."""


@pytest.fixture(autouse=True)
def _no_uep_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The settings' own defaults: a test session that started a stack has UEP_* variables set."""
    for name in [n for n in os.environ if n.startswith("UEP_")]:
        monkeypatch.delenv(name)


def _settings(**kwargs: object) -> CommonSettings:
    return CommonSettings(otel_exporter="none", **kwargs)  # type: ignore[arg-type]


def test_plaintext_has_no_security_and_the_idempotent_producer() -> None:
    settings = _settings()
    assert settings.kafka_security_protocol == "PLAINTEXT"
    assert security(settings) is None
    assert client_options(settings) == {"bootstrap_servers": "127.0.0.1:9092", "client_id": "uep-uep"}
    kwargs = make_broker(settings)._connection_kwargs
    assert kwargs["enable_idempotence"] is True and kwargs["acks"] == "all"
    assert "security_protocol" not in kwargs


def test_sasl_ssl_scram_512_with_a_ca_file() -> None:
    settings = _settings(
        kafka_security_protocol="SASL_SSL",
        kafka_sasl_username="uep-scorer",
        kafka_sasl_password="s3cret",
        kafka_ssl_ca_file=CA,
    )
    sec = security(settings)
    assert isinstance(sec, SASLScram512)
    assert (sec.username, sec.password, sec.use_ssl) == ("uep-scorer", "s3cret", True)
    assert isinstance(sec.ssl_context, ssl.SSLContext)
    assert sec.ssl_context.verify_mode == ssl.CERT_REQUIRED and sec.ssl_context.check_hostname is True
    assert sec.ssl_context.cert_store_stats()["x509_ca"] > 0  # the CA file was loaded

    broker = make_broker(settings)
    for kwargs in (broker._connection_kwargs, broker.config.broker_config.builder.keywords):  # producer, consumers
        assert kwargs["security_protocol"] == "SASL_SSL"
        assert kwargs["sasl_mechanism"] == "SCRAM-SHA-512"
        assert (kwargs["sasl_plain_username"], kwargs["sasl_plain_password"]) == ("uep-scorer", "s3cret")
        assert isinstance(kwargs["ssl_context"], ssl.SSLContext)

    admin = client_options(settings)
    assert admin["security_protocol"] == "SASL_SSL" and admin["sasl_mechanism"] == "SCRAM-SHA-512"
    assert (admin["sasl_plain_username"], admin["sasl_plain_password"]) == ("uep-scorer", "s3cret")

    async def _admin_client() -> tuple[object, ...]:
        client = make_admin(settings)._client  # aiokafka's AIOKafkaClient behind the admin client (not started)
        return (client._security_protocol, client._sasl_mechanism, client._sasl_plain_username)

    assert asyncio.run(_admin_client()) == ("SASL_SSL", "SCRAM-SHA-512", "uep-scorer")


def test_sasl_plaintext_scram_256_and_plain() -> None:
    sec = security(
        _settings(
            kafka_security_protocol="SASL_PLAINTEXT",
            kafka_sasl_mechanism="SCRAM-SHA-256",
            kafka_sasl_username="u",
            kafka_sasl_password="p",
        )
    )
    assert type(sec) is SASLScram256 and sec.use_ssl is False and sec.ssl_context is None
    plain = _settings(
        kafka_security_protocol="SASL_PLAINTEXT", kafka_sasl_mechanism="PLAIN", kafka_sasl_username="u", kafka_sasl_password="p"
    )
    assert type(security(plain)) is SASLPlaintext
    assert client_options(plain)["sasl_mechanism"] == "PLAIN" and client_options(plain)["security_protocol"] == "SASL_PLAINTEXT"


def test_ssl_only() -> None:
    settings = _settings(kafka_security_protocol="SSL", kafka_ssl_ca_file=CA)
    sec = security(settings)
    assert type(sec) is BaseSecurity and sec.use_ssl is True
    options = client_options(settings)
    assert options["security_protocol"] == "SSL" and "sasl_mechanism" not in options


def test_the_password_never_shows_in_the_settings_repr() -> None:
    settings = _settings(kafka_security_protocol="SASL_SSL", kafka_sasl_username="u", kafka_sasl_password="hunter2")
    assert "hunter2" not in repr(settings)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"kafka_security_protocol": "SASL_SSL", "kafka_sasl_password": "p"}, "kafka_sasl_username"),
        ({"kafka_security_protocol": "SASL_PLAINTEXT", "kafka_sasl_username": "u"}, "kafka_sasl_password"),
        ({"kafka_replication_factor": 1, "kafka_min_insync_replicas": 2}, "kafka_min_insync_replicas"),
        ({"kafka_ssl_cert_file": "/c.pem"}, "kafka_ssl_key_file"),
        ({"kafka_security_protocol": "SASL_GSSAPI"}, "kafka_security_protocol"),
    ],
)
def test_bad_kafka_settings_name_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        _settings(**kwargs)


def test_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UEP_KAFKA_SECURITY_PROTOCOL", "SASL_SSL")
    monkeypatch.setenv("UEP_KAFKA_SASL_USERNAME", "uep-judge")
    monkeypatch.setenv("UEP_KAFKA_SASL_PASSWORD", "pw")
    monkeypatch.setenv("UEP_KAFKA_RETENTION_MS", "3600000")
    settings = _settings()
    assert settings.kafka_sasl_password is not None and settings.kafka_sasl_password.get_secret_value() == "pw"
    assert settings.kafka_retention_ms == 3_600_000 and settings.kafka_sasl_username == "uep-judge"


RETENTION = {"cleanup.policy": "delete", "retention.ms": "86400000", "retention.bytes": "1073741824", "segment.bytes": "67108864"}
"""The default retention of a uep topic: a day, 1 GiB per partition, 64 MiB segments (CommonSettings)."""


def test_topic_spec_replication_min_insync_and_retention() -> None:
    prod = topic_spec(_settings(kafka_partitions=24, kafka_replication_factor=3, kafka_min_insync_replicas=2), "uep.x.v1")
    assert (prod.name, prod.num_partitions, prod.replication_factor) == ("uep.x.v1", 24, 3)
    assert prod.topic_configs == {**RETENTION, "min.insync.replicas": "2"}
    local = topic_spec(_settings(), "uep.x.v1")
    assert (local.num_partitions, local.replication_factor, local.topic_configs) == (6, 1, RETENTION)


def test_the_dead_letter_topic_keeps_a_week() -> None:
    from uep_common.runtime.messaging import DEAD_LETTER_TOPIC

    spec = topic_spec(_settings(), DEAD_LETTER_TOPIC)
    assert spec.topic_configs == {**RETENTION, "retention.ms": str(7 * 24 * 3600 * 1000)}
