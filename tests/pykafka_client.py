"""Run by tests/test_pykafka.py inside pykafka's own environment (.venv/pykafka, made by scripts/bootstrap.sh).

``produce-consume BOOTSTRAP TOPIC COUNT BROKER_VERSION``: a sync producer writes COUNT values, then a
SimpleConsumer (no group, no offset commits) reads the topic from the beginning; prints one JSON line with
what it read.

``balanced BOOTSTRAP ZOOKEEPER GROUP TOPIC``: a BalancedConsumer (ZooKeeper-balanced, use_rdkafka=False,
no auto-commit) joins GROUP; prints ``{"consumer_id": ...}`` once started and stays in the group until its
standard input closes. Its owners path gets a one-line patch (see ``balanced``).

pykafka 2.8.0 imports and runs on Python 3.11 unpatched.

"""

import json
import logging
import os
import sys

from pykafka import KafkaClient
from pykafka.common import OffsetType


def produce_consume(bootstrap, topic, count, broker_version):
    client = KafkaClient(hosts=bootstrap, broker_version=broker_version)
    t = client.topics[topic.encode()]
    with t.get_sync_producer() as producer:
        for i in range(count):
            producer.produce(b"value-%d" % i, partition_key=b"%d" % i)
    consumer = t.get_simple_consumer(auto_offset_reset=OffsetType.EARLIEST, consumer_timeout_ms=3000,
                                     auto_commit_enable=False)
    seen = [(m.partition_id, m.offset, m.value.decode()) for m in consumer]
    consumer.stop()
    print(json.dumps({"records": seen}))


def balanced(bootstrap, zookeeper, group, topic):
    client = KafkaClient(hosts=bootstrap, broker_version="0.8.2")
    consumer = client.topics[topic.encode()].get_balanced_consumer(
        group.encode(), zookeeper_connect=zookeeper, auto_commit_enable=False, use_rdkafka=False,
        auto_offset_reset=OffsetType.EARLIEST, rebalance_backoff_ms=500, rebalance_max_retries=10,
        zookeeper_connection_timeout_ms=5000, auto_start=False)  # pykafka sleeps i * backoff per failed claim
    # The one-line patch: on Python 3 pykafka 2.8 formats its bytes topic name into the owners path, so its
    # owner nodes land in /consumers/<g>/owners/b'<topic>'/ (pykafka's own ownership checks still work, as
    # they read the same wrong path); this puts them where Kafka's tools look, as on Python 2.
    consumer._topic_path = f"/consumers/{group}/owners/{topic}"
    consumer.start()

    print(json.dumps({"consumer_id": consumer._consumer_id.decode()}), flush=True)
    sys.stdin.read()  # the test closes it to make this member leave
    consumer.stop()


if __name__ == "__main__":
    logging.basicConfig(level=os.environ.get("PYKAFKA_LOG_LEVEL", "WARNING"), stream=sys.stderr)
    command, args = sys.argv[1], sys.argv[2:]
    if command == "produce-consume":
        produce_consume(args[0], args[1], int(args[2]), args[3])
    elif command == "balanced":
        balanced(*args)
    else:
        raise SystemExit(f"unknown command {command}")
