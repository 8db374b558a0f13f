"""Apache Kafka's own code as a peer and a judge: its jars fetched by name, its broker, high-level consumer and
tools run as processes on loopback beside zkconsumer (docs/kafka-oracle.md)."""
