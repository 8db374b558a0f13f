"""A coordinator group's partition of ``__consumer_offsets``, read as it grows, for the group's generation.

A kafka-python consumer with no group (so it joins nothing and commits nothing) is assigned the one partition
that holds the group (``Utils.abs(group.hashCode) % partitions``), reads it from the beginning and then keeps
polling from where it got, on a thread of its own: catching up on a long partition never delays the source's
admin poll. The records go through :class:`~zkconsumer.web.group_metadata.GroupMetadataFold`.

Reading the topic is a bonus, never a condition: no such topic yet (no group has asked for a coordinator), a
principal not authorized to read it, a broker that refuses or went away, each only leaves :meth:`view` saying why
the generation is unknown, and the reader tries again. After an error it reopens where it had got to.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from kafka import KafkaConsumer
from kafka import TopicPartition as KTP
from kafka.errors import AuthorizationError, KafkaError

from zkconsumer import broker_version
from zkconsumer.coordinator.manager import OFFSETS_TOPIC, partition_for
from zkconsumer.web.group_metadata import GroupMetadataFold, View

log = logging.getLogger(__name__)


class OffsetsTopicReader:
    """Reads ``group``'s partition of ``__consumer_offsets`` at ``bootstrap`` from a thread that starts at once.

    ``options``: extra kafka-python settings (security) for the consumer; ``retry``: seconds between attempts
    while the topic cannot be read."""

    def __init__(self, bootstrap: str, group: str, *, options: dict[str, Any] | None = None,
                 retry: float = 2.0, poll_ms: int = 500) -> None:
        self.bootstrap, self.group = bootstrap, group
        self._options = options or {}
        self._retry, self._poll_ms = retry, poll_ms
        self._fold = GroupMetadataFold(group)
        self._lock = threading.Lock()
        self._problem = f"{OFFSETS_TOPIC} not read yet"
        self._partition: int | None = None
        self._position: int | None = None  # the next offset to read
        self._consumer: KafkaConsumer | None = None
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"watch {group} {OFFSETS_TOPIC}", daemon=True)
        self._thread.start()

    def view(self) -> View:
        with self._lock:
            name = None if self._partition is None else f"{OFFSETS_TOPIC}-{self._partition}"
            return View(self._fold.latest, name, self._problem, self._fold.counts_text())

    def close(self) -> None:
        self._closed.set()
        self._thread.join(1)  # a poll ends within poll_ms; one blocked on a gone broker ends on its own

    # ------------------------------------------------------------------------------------------------ reading
    def _loop(self) -> None:
        while not self._closed.is_set():
            try:
                problem = self._read()
            except AuthorizationError as e:
                problem = f"not authorized to read {OFFSETS_TOPIC} ({type(e).__name__})"
            except (KafkaError, OSError) as e:
                problem = f"{OFFSETS_TOPIC} not readable: {str(e) or type(e).__name__}"
            if problem:
                log.debug("watch %s: %s", self.group, problem)
                with self._lock:
                    self._problem = problem
                self._drop()
                self._closed.wait(self._retry)
        self._drop()

    def _read(self) -> str:
        """One poll (opening the consumer first if need be); the problem, or "" when the read went well."""
        consumer = self._consumer or self._open()
        if consumer is None:
            return self._problem_without_topic()
        tp = KTP(OFFSETS_TOPIC, self._partition)
        records = consumer.poll(timeout_ms=self._poll_ms).get(tp, [])
        with self._lock:
            for r in records:
                self._fold.apply(r.offset, r.key, r.value, r.timestamp)
                self._position = r.offset + 1
            self._problem = ""
        return ""

    def _open(self) -> KafkaConsumer | None:
        """A consumer assigned the group's partition, at the beginning or where the last one got to; None when the
        topic is not there (to this principal)."""
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None, enable_auto_commit=False,
                                 client_id="zkconsumer-watch", auto_offset_reset="earliest",
                                 request_timeout_ms=5000, bootstrap_timeout_ms=3000,
                                 **broker_version.client_settings(self.bootstrap), **self._options)
        self._consumer = consumer
        partitions = consumer.partitions_for_topic(OFFSETS_TOPIC)
        if not partitions:
            return None
        partition = partition_for(self.group, len(partitions))
        with self._lock:
            if self._partition is not None and partition != self._partition:  # the topic was recreated: start over
                self._fold, self._position = GroupMetadataFold(self.group), None
            self._partition = partition
        tp = KTP(OFFSETS_TOPIC, partition)
        consumer.assign([tp])
        if self._position is None:
            consumer.seek_to_beginning(tp)
        else:
            consumer.seek(tp, self._position)
        return consumer

    def _problem_without_topic(self) -> str:
        consumer = self._consumer
        if consumer is not None and OFFSETS_TOPIC in consumer._client.cluster.unauthorized_topics:
            return f"not authorized to describe {OFFSETS_TOPIC}"
        return f"no {OFFSETS_TOPIC} topic yet (no group has asked for a coordinator)"

    def _drop(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            try:
                consumer.close()
            except (KafkaError, OSError) as e:
                log.debug("watch: closing the %s reader: %s", OFFSETS_TOPIC, e)
