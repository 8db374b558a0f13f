"""Which protocol version to tell kafka-python a cluster speaks: the one place every client asks.

kafka-python 3 opens each connection with an ApiVersions request (Kafka 0.10+). A broker that predates it (Kafka
0.8.x and 0.9.x, e.g. Apache Kafka 0.8.2.2's own broker) does not know the request and closes the connection, so
a client left to negotiate retries "Bootstrap connection failed" forever. Told ``api_version=(0, 8, 2)`` it skips
the negotiation and speaks the v0 requests those brokers know.

The rules (:func:`decide`, pure): an explicit setting wins (the consumer property
``zkconsumer.broker.api.version``, e.g. ``0.8.2``; ``auto`` is the default); otherwise the probe (:func:`probe`)
decides: ApiVersions v0 answered means a 0.10+ broker, and kafka-python negotiates as usual (``None``); the
connection closed without an answer means an older broker, then ListGroups v0 (added in 0.9) tells 0.9 from 0.8.
Only when the probe cannot reach any broker does the hint from ZooKeeper's broker registrations count (Kafka 0.8
writes ``/brokers/ids/<id>`` version 1, without "endpoints"; 0.9 version 2; 0.10.0+ version 3 and later).

A probe's answer is cached per bootstrap string for the life of the process and logged once at INFO.
"""

from __future__ import annotations

import logging
import re
import socket
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kafka.protocol.admin import ListGroupsRequest
from kafka.protocol.metadata import ApiVersionsRequest

from zkconsumer.errors import IllegalArgument, ZkConsumerError

log = logging.getLogger(__name__)

#: The consumer property; ``auto`` (the default) probes.
PROPERTY = "zkconsumer.broker.api.version"
AUTO = "auto"
#: Seconds the probe waits to connect and for an answer, per request.
PROBE_TIMEOUT_S = 2.0
#: The oldest version kafka-python knows; an explicit setting below it is refused.
OLDEST = (0, 8, 0)

ApiVersion = tuple[int, ...]

_VERSION_TEXT = re.compile(r"\d+(\.\d+){1,2}")


class BrokerTooOld(ZkConsumerError, RuntimeError):
    """The cluster predates what a feature needs (coordinator mode needs Kafka 0.9+)."""


def parse_setting(value: Any) -> ApiVersion | None:
    """``zkconsumer.broker.api.version``: ``None`` for ``auto`` (or unset), else the version tuple.

    Raises IllegalArgument with the reason for anything else (config/consumer.py turns it into a ConfigError)."""
    if value is None:
        return None
    if isinstance(value, tuple) and value and all(isinstance(v, int) for v in value):
        text = ".".join(map(str, value))
    else:
        text = str(value).strip()
    if text.lower() == AUTO:
        return None
    if not _VERSION_TEXT.fullmatch(text):
        raise IllegalArgument(f"{PROPERTY} must be '{AUTO}' or a Kafka broker version such as 0.8.2, 0.9, 0.10.2 "
                              f"or 2.8, got {value!r}")
    version = tuple(int(part) for part in text.split("."))
    if version < OLDEST:
        raise IllegalArgument(f"{PROPERTY}={text} is older than Kafka 0.8.0, the oldest broker kafka-python speaks to")
    return version


#: ``/brokers/ids/<id>`` registration version → the protocol of the brokers that write it, for those older than
#: ApiVersions: Kafka 0.8.x writes version 1 (no "endpoints"), 0.9 version 2; 0.10.0 writes 3, 0.10.1+ 4 and 5.
_REGISTRATION_VERSIONS = {1: (0, 8, 2), 2: (0, 9)}


def registration_hint(registrations: Iterable[Any]) -> ApiVersion | None:
    """What the ``/brokers/ids`` registrations (:class:`~zkconsumer.zk.layout.BrokerInfo`) suggest: the protocol
    of the oldest broker when one predates ApiVersions (a client speaks one version to all), else None."""
    old = [_REGISTRATION_VERSIONS[v] for v in (getattr(r, "version", None) for r in registrations)
           if v in _REGISTRATION_VERSIONS]
    return min(old) if old else None


@dataclass(frozen=True)
class ProbeResult:
    """What one probe saw. ``reached``: some broker accepted a connection; ``api_versions``: it answered
    ApiVersions v0 (0.10+); ``list_groups``: it answered ListGroups v0 (0.9) after refusing ApiVersions."""

    reached: bool
    api_versions: bool = False
    list_groups: bool = False
    address: str = ""


def decide(setting: ApiVersion | None, probed: ProbeResult | None = None,
           hint: ApiVersion | None = None) -> tuple[ApiVersion | None, str]:
    """(the ``api_version`` for kafka-python — None lets it negotiate —, why). Pure."""
    if setting is not None:
        return setting, f"{PROPERTY}={'.'.join(map(str, setting))}"
    if probed is not None and probed.reached:
        if probed.api_versions:
            return None, f"{probed.address} answered ApiVersions (Kafka 0.10+): negotiated per connection"
        if probed.list_groups:
            return (0, 9), f"{probed.address} closed the connection on ApiVersions, answered ListGroups: Kafka 0.9"
        return (0, 8, 2), (f"{probed.address} closed the connection on ApiVersions and on ListGroups: Kafka 0.8 "
                           "(its v0 requests)")
    if hint is not None:
        return hint, "no broker reachable for a probe; the ZooKeeper registrations' format suggests it"
    return None, "no broker reachable for a probe: kafka-python negotiates when it connects"


def _addresses(bootstrap: str | Iterable[str]) -> list[tuple[str, int]]:
    parts = bootstrap.split(",") if isinstance(bootstrap, str) else list(bootstrap)
    out = []
    for part in parts:
        host, _, port = part.strip().rpartition(":")
        if host and port.isdigit():
            out.append((host.strip("[]"), int(port)))
    return out


def _answered(address: tuple[str, int], request: Any, timeout: float) -> bool | None:
    """True: the broker answered ``request``; False: it closed the connection instead; None: unreachable or no
    word within ``timeout`` (undecided)."""
    try:
        sock = socket.create_connection(address, timeout=timeout)
    except OSError:
        return None
    try:
        sock.settimeout(timeout)
        request.with_header(correlation_id=1, client_id="zkconsumer-version-probe")
        sock.sendall(request.encode(framed=True, header=True))
        head = b""
        while len(head) < 4:  # the response's size is enough: the broker understood the request
            chunk = sock.recv(4 - len(head))
            if not chunk:
                return False
            head += chunk
        return True
    except (ConnectionResetError, BrokenPipeError):
        return False
    except OSError:  # a timeout: something that neither answers nor closes
        return None
    finally:
        sock.close()


def probe(bootstrap: str | Iterable[str], timeout: float = PROBE_TIMEOUT_S) -> ProbeResult:
    """Ask the first reachable bootstrap address for ApiVersions v0 (and, refused, ListGroups v0)."""
    for host, port in _addresses(bootstrap):
        address = f"{host}:{port}"
        answered = _answered((host, port), ApiVersionsRequest[0](), timeout)
        if answered is None:
            continue
        if answered:
            return ProbeResult(True, api_versions=True, address=address)
        return ProbeResult(True, list_groups=bool(_answered((host, port), ListGroupsRequest[0](), timeout)),
                           address=address)
    return ProbeResult(False)


_cache: dict[str, ApiVersion | None] = {}
_logged: set[tuple[str, ApiVersion | None]] = set()
_lock = threading.Lock()


def api_version(bootstrap: str | Iterable[str], setting: Any = AUTO,
                registrations: Iterable[Any] = ()) -> ApiVersion | None:
    """The ``api_version`` to give kafka-python for this cluster (None: let it negotiate).

    ``setting``: the property's value (``auto``, a version string or tuple); ``registrations``: the cluster's
    BrokerInfo from ZooKeeper when at hand (a hint, used only when no broker can be probed)."""
    explicit = parse_setting(setting)
    key = bootstrap if isinstance(bootstrap, str) else ",".join(bootstrap)
    if explicit is not None:
        version, why = decide(explicit)
        with _lock:
            if (key, version) not in _logged:
                _logged.add((key, version))
                log.info("Kafka at %s: api_version %s (%s)", key, _show(version), why)
        return version
    with _lock:
        if key in _cache:
            return _cache[key]
    probed = probe(key)
    version, why = decide(None, probed, registration_hint(registrations))
    with _lock:
        if (key, version) not in _logged:
            _logged.add((key, version))
            log.info("Kafka at %s: api_version %s (%s)", key, _show(version), why)
        if probed.reached:  # undecided answers are not kept: the next client probes again
            _cache[key] = version
    return version


def client_settings(bootstrap: str | Iterable[str], setting: Any = AUTO,
                    registrations: Iterable[Any] = ()) -> dict[str, Any]:
    """Keyword arguments for a kafka-python client: ``{"api_version": …}`` for a pre-0.10 cluster, else none."""
    version = api_version(bootstrap, setting, registrations)
    return {} if version is None else {"api_version": version}


def require(bootstrap: str | Iterable[str], minimum: ApiVersion, what: str, setting: Any = AUTO) -> None:
    """Raise :class:`BrokerTooOld` when the cluster is known to predate ``minimum`` (negotiating means 0.10+)."""
    version = api_version(bootstrap, setting)
    if version is not None and version < minimum:
        key = bootstrap if isinstance(bootstrap, str) else ",".join(bootstrap)
        raise BrokerTooOld(f"{what} needs Kafka {_show(minimum)} or later; the broker at {key} speaks Kafka "
                           f"{_show(version)}'s protocol (ZooKeeper mode works with it)")


def supports(version: ApiVersion | None, minimum: ApiVersion) -> bool:
    """Whether a decided ``api_version`` (None: negotiated, 0.10+) is at least ``minimum``."""
    return version is None or version >= minimum


def clear_cache() -> None:
    """Forget every decision (tests; a cluster replaced behind the same address)."""
    with _lock:
        _cache.clear()
        _logged.clear()


def _show(version: ApiVersion | None) -> str:
    return "negotiated" if version is None else ".".join(map(str, version))


__all__ = ["AUTO", "PROPERTY", "BrokerTooOld", "ProbeResult", "api_version", "clear_cache", "client_settings",
           "decide", "parse_setting", "probe", "registration_hint", "require", "supports"]
