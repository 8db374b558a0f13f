"""Consumer configuration with Kafka 0.8's property names, defaults and validation, plus two profiles.

``kafka-0.8`` reproduces the original connector's behaviour and timing exactly, weaknesses included, so the
lab can show them. ``default`` (zkconsumer's own) keeps the same ZooKeeper layout, ids and assignments but
avoids needless waiting and failed claims; every difference is a named switch in profiles.py and docs/profiles.md.

By concern: properties.py (the property tables: Kafka 0.8's, the coordinator mode's, zkconsumer's own; how a value
is read), profiles.py (the two profiles' switches), consumer.py (:class:`ConsumerConfig`, the one parser, its
settings read by concern) and properties_file.py (Java ``.properties`` files). The names below are the package's
interface: ``from zkconsumer.config import ConsumerConfig``.
"""

from zkconsumer.config.consumer import ConsumerConfig, zk_security_from_properties
from zkconsumer.config.profiles import PROFILE_SETTINGS, PROFILES, Profile
from zkconsumer.config.properties import (
    COORDINATOR_ONLY_STRATEGIES,
    KAFKA_PROPERTIES,
    SECRET_PROPERTIES,
    ConfigError,
    Prop,
    UnknownProperty,
    property_kind,
    property_names,
)
from zkconsumer.config.properties_file import read_properties

__all__ = ["COORDINATOR_ONLY_STRATEGIES", "KAFKA_PROPERTIES", "PROFILES", "PROFILE_SETTINGS", "SECRET_PROPERTIES",
           "ConfigError", "ConsumerConfig", "Prop", "Profile", "UnknownProperty", "property_kind", "property_names",
           "read_properties", "zk_security_from_properties"]
