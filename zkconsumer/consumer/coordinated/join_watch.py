"""Says so when a coordinator-mode member's join does not complete within the rebalance timeout.

kafka-python retries JoinGroup and SyncGroup on its own and logs their errors at INFO at most, so without this
watch a member can sit for minutes with no assignment and no word (issue 20's silent stall). :class:`JoinWatch`
records the coordinator's answers, and past the rebalance timeout describes the group and reports a
:class:`JoinStall` (log, trace ``join_stalled``, listeners).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import kafka.errors as errors
from kafka.structs import MemberState

from zkconsumer import broker_version, runtime
from zkconsumer.config import ConsumerConfig
from zkconsumer.errors import code_name
from zkconsumer.kafka_admin import AdminClient
from zkconsumer.trace import TraceWriter

log = logging.getLogger(__name__)


class JoinWatchHost(Protocol):
    """What the watch reads of its member
    (:class:`~zkconsumer.consumer.coordinated.connector.CoordinatorConsumerConnector`)."""

    consumer_id: str
    group: str
    bootstrap: str
    config: ConsumerConfig
    trace: TraceWriter
    member_id: str | None
    group_generation: int

    @property
    def rebalance_timeout_ms(self) -> int: ...

    @property
    def stopping(self) -> bool: ...


@dataclass(frozen=True)
class JoinStall:
    """A join (JoinGroup, then SyncGroup) of this member that has not completed within the rebalance timeout: what
    the member saw of it and what the coordinator says of the group (DescribeGroups)."""

    consumer_id: str
    waited_ms: int
    rebalance_timeout_ms: int
    state: str  # kafka-python's member state: UNJOINED (no join in flight, or rejected) | REBALANCING (in flight)
    waiting_for: str | None  # "coordinator" | "JoinGroup" | "SyncGroup": the step in flight; None: between tries
    errors: Mapping[str, str | None]  # JoinGroup / SyncGroup → the coordinator's last answer ("NAME(code)")
    error: str | None  # the last error the client raised (poll failed), if any
    group_state: str | None  # DescribeGroups: Empty | PreparingRebalance | CompletingRebalance | Stable | Dead
    protocol: str | None  # DescribeGroups: the group's assignor (protocol) when it has one
    members: Sequence[Mapping[str, object]]  # DescribeGroups: member_id, client_id, client_host
    describe_error: str | None = None

    def summary(self) -> str:
        answers = ", ".join(f"{api} {code}" for api, code in self.errors.items() if code) or "no answer yet"
        group = (f"{self.group_state} with {len(self.members)} member(s)"
                 + (f", protocol {self.protocol}" if self.protocol else "")) if self.group_state else \
            f"not described ({self.describe_error or 'no answer'})"
        step = f"waiting for {self.waiting_for}" if self.waiting_for else self.state
        return (f"join not complete after {self.waited_ms / 1000:.0f}s (rebalance timeout "
                f"{self.rebalance_timeout_ms / 1000:.0f}s): {step}; coordinator answered {answers}"
                + (f"; client error {self.error}" if self.error else "") + f"; group {group}")



class JoinWatch:
    """Says so when this member's join does not complete within the rebalance timeout, instead of waiting silently.

    kafka-python retries JoinGroup and SyncGroup on its own and logs their errors at INFO at most (a JoinGroup the
    coordinator parks while it waits for other members logs nothing at all), so a member can sit for minutes
    without an assignment and without a word. The watch records the coordinator's answer to every JoinGroup and
    SyncGroup this member sends (by wrapping the client's response handlers: ``KafkaConsumer._coordinator``, as
    the poller's ``unstick_join`` uses it), and the poller calls :meth:`check` after every
    ``poll()``: once the member has been out of the STABLE state for a rebalance timeout, the group is described
    (DescribeGroups) on a thread of its own, and the report is logged at WARNING, written to the trace
    (``join_stalled``) and kept in :attr:`current` (``zkconsumer consume --output rate`` shows it), once per
    rebalance timeout while it lasts. The member keeps trying meanwhile."""

    def __init__(self, connector: JoinWatchHost) -> None:
        self.c = connector
        self.current: JoinStall | None = None
        self.reports = 0
        #: Called with each report (from the reporting thread); ``consume`` prints it.
        self.listeners: list[Callable[[JoinStall], None]] = []
        self._lock = runtime.Lock()
        self._since: float | None = None
        self._next_report = 0.0
        self._reporting = False
        self._answers: dict[str, str | None] = {"JoinGroup": None, "SyncGroup": None}
        self._in_flight: str | None = None
        self._error: str | None = None
        self._error_logged: tuple[str, float] | None = None

    # ----------------------------------------------------------------------------- hooks into the client
    def attach(self, consumer) -> None:
        """Record the coordinator's answers to JoinGroup and SyncGroup (kafka-python's handlers, wrapped)."""

        coordinator = getattr(consumer, "_coordinator", None)
        if coordinator is None:
            return
        for api, name in (("JoinGroup", "_process_join_group_response"),
                          ("SyncGroup", "_process_sync_group_response")):
            handler = getattr(coordinator, name, None)
            if callable(handler):
                setattr(coordinator, name, self._recording(api, handler))
        attempt = getattr(coordinator, "_do_join_and_sync_async", None)
        if attempt is not None and inspect.iscoroutinefunction(attempt):
            watch = self

            async def join_and_sync(*args, **kwargs):
                watch._in_flight = "JoinGroup"
                try:
                    return await attempt(*args, **kwargs)
                except BaseException as e:  # noqa: BLE001 - recorded, re-raised to kafka-python's retry loop
                    if not isinstance(e, errors.BrokerResponseError):  # those are the answers recorded above
                        watch._error = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
                    raise
                finally:
                    watch._in_flight = None

            coordinator._do_join_and_sync_async = join_and_sync

    def _recording(self, api: str, handler: Callable) -> Callable:
        def record(response, *args, **kwargs):
            code = getattr(response, "error_code", None)
            if code is not None:
                with self._lock:
                    self._answers[api] = code_name(code)
                if api == "JoinGroup" and code == 0:
                    self._in_flight = "SyncGroup"
            return handler(response, *args, **kwargs)

        return record

    def poll_failed(self, e: BaseException) -> None:
        """The poller's ``poll()`` raised (kafka-python gave up a join on a fatal answer, or a broker error): logged
        once, then again at most once per rebalance timeout while it repeats (the stall report names it too)."""

        text = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        with self._lock:
            answered = isinstance(e, errors.BrokerResponseError) and code_name(e.errno) in self._answers.values()
        if not answered:  # an answer to JoinGroup/SyncGroup is in the report already
            self._error = text
        now = runtime.monotonic()
        last = self._error_logged
        if last is None or last[0] != text or now - last[1] >= self.c.rebalance_timeout_ms / 1000.0:
            self._error_logged = (text, now)
            log.warning("%s: poll failed: %s (retrying)", self.c.consumer_id, text)
        else:
            log.debug("%s: poll failed again: %s", self.c.consumer_id, text)

    # ------------------------------------------------------------------------------------------ watching
    def check(self, consumer) -> None:
        """Poller, after every ``poll()``: start the clock when the member leaves STABLE, report past the timeout."""

        try:
            state = consumer.group_metadata().state
        except Exception:  # noqa: BLE001 - no metadata: nothing to judge
            return
        now = runtime.monotonic()
        timeout = self.c.rebalance_timeout_ms / 1000.0
        if state == MemberState.STABLE:
            if self._since is not None and self.reports:
                log.warning("%s: joined group %s (generation %s) after %.0fs", self.c.consumer_id, self.c.group,
                            self.c.group_generation, now - self._since)
            self._since, self.current, self.reports, self._error, self._error_logged = None, None, 0, None, None
            with self._lock:
                self._answers = dict.fromkeys(self._answers)
            return
        if self._since is None:
            self._since, self._next_report = now, now + timeout
            return
        if now < self._next_report or self._reporting or self.c.stopping:
            return
        self._next_report = now + timeout
        self._reporting = True
        coordinator_known = getattr(getattr(consumer, "_coordinator", None), "coordinator_id", 0) is not None
        with self._lock:
            answers = dict(self._answers)
        snapshot = dict(waited_ms=int((now - self._since) * 1000), state=str(state).strip("<>").upper(),
                        waiting_for=self._in_flight or (None if coordinator_known else "coordinator"),
                        errors=answers, error=self._error)
        runtime.spawn(self._report, snapshot, name=f"{self.c.consumer_id}-join-watch")

    def _report(self, snapshot: dict) -> None:
        try:
            group_state, protocol, members, describe_error = self._describe()
            stall = JoinStall(self.c.consumer_id, rebalance_timeout_ms=self.c.rebalance_timeout_ms,
                              group_state=group_state, protocol=protocol, members=members,
                              describe_error=describe_error, **snapshot)
            self.current = stall
            self.reports += 1
            log.warning("%s: %s", self.c.consumer_id, stall.summary())
            self.c.trace.emit("join_stalled", waited_ms=stall.waited_ms,
                              rebalance_timeout_ms=stall.rebalance_timeout_ms, member_state=stall.state,
                              waiting_for=stall.waiting_for, join_errors=dict(stall.errors), error=stall.error,
                              group_state=stall.group_state, group_protocol=stall.protocol,
                              group_members=[dict(m) for m in stall.members], describe_error=stall.describe_error,
                              generation=self.c.group_generation, member_id=self.c.member_id)
            for listener in list(self.listeners):
                try:
                    listener(stall)
                except Exception:  # noqa: BLE001 - a display must not stop the watch
                    log.debug("a join-stall listener failed", exc_info=True)
        except Exception:  # noqa: BLE001 - the watch must never take the member down
            log.warning("%s: reporting a stalled join failed", self.c.consumer_id, exc_info=True)
        finally:
            self._reporting = False

    def _describe(self) -> tuple[str | None, str | None, list[dict], str | None]:
        """DescribeGroups through a short-lived admin client (not the member's own client: its poller must not
        wait): the group's state, protocol and members as the coordinator sees them."""

        c = self.c
        admin = None
        try:
            admin = AdminClient(bootstrap_servers=c.bootstrap, client_id=f"{c.config.client_id}-join-watch",
                                request_timeout_ms=max(1000, min(10000, c.rebalance_timeout_ms // 2)),
                                **broker_version.client_settings(c.bootstrap, c.config.broker_api_version))
            described = admin.describe_groups([c.group]).get(c.group) or {}
        except Exception as e:  # noqa: BLE001 - the report goes out without the coordinator's view
            return None, None, [], f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        finally:
            if admin is not None:
                try:
                    admin.close()
                except Exception:  # noqa: BLE001
                    log.debug("closing the admin client failed", exc_info=True)
        if described.get("error"):
            return None, None, [], str(described["error"])
        members = [{"member_id": m.get("member_id"), "client_id": m.get("client_id"),
                    "client_host": m.get("client_host")} for m in described.get("members") or ()]
        return described.get("group_state"), described.get("protocol_data") or None, members, None
