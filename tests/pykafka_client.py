"""Run by tests/test_pykafka.py inside pykafka's own environment (.venv/pykafka, made by scripts/bootstrap.sh).

``produce-consume BOOTSTRAP TOPIC COUNT BROKER_VERSION``: a sync producer writes COUNT values, then a
SimpleConsumer (no group, no offset commits) reads the topic from the beginning; prints one JSON line with
what it read. pykafka 2.8.0 imports and runs on Python 3.11 unpatched.
"""

import json
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


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    if command == "produce-consume":
        produce_consume(args[0], args[1], int(args[2]), args[3])
    else:
        raise SystemExit(f"unknown command {command}")
