"""docker/ without an engine: the image's dependencies come from pyproject.toml, the compose file keeps every
service on host networking and loopback, and the image tag follows the sources (pure checks, milliseconds).
docker-compose itself reads, brings up and takes down docker/compose.yaml in tests/test_docker_lab.py, where it is
installed beside the engine."""

from __future__ import annotations

import re
import shutil
import tomllib
from pathlib import Path

from zkconsumer.lab.containers.images import SOURCE_ROOT, context_files, image_tag

DOCKER = SOURCE_ROOT / "docker"


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[ ;]", requirement.strip('"'), maxsplit=1)[0].lower()


def test_image_dependencies_are_a_subset_of_pyproject() -> None:
    """By name and by version range: an image with a kafka-python that pyproject.toml rules out would run code no
    test ran."""
    declared = {_name(d): d for d in tomllib.loads((SOURCE_ROOT / "pyproject.toml").read_text())["project"]
                ["dependencies"]}
    dockerfile = (DOCKER / "Dockerfile").read_text()
    pip_line = dockerfile.split("/opt/zkconsumer/bin/pip install --no-cache-dir", 1)[1].split("\n\n", 1)[0]
    wanted = {_name(r): r for r in re.findall(r'"([^"]+)"', pip_line)}
    wanted.pop("setuptools", None)
    assert wanted, "no dependency list found in docker/Dockerfile"
    assert set(wanted) <= set(declared), f"the image installs what pyproject.toml does not declare: " \
                                         f"{set(wanted) - set(declared)}"
    assert {name: spec for name, spec in wanted.items() if declared[name] != spec} == {}
    assert {"kazoo", "kafka-python"} <= set(wanted)  # the consumer and the broker cannot run without them


def test_compose_services_use_host_networking_on_loopback() -> None:
    text = (DOCKER / "compose.yaml").read_text()
    services = re.findall(r"^  ([a-z0-9]+):(?:\s*#.*)?$", text.split("\nservices:\n", 1)[1], flags=re.M)
    assert {"zk1", "zk2", "zk3", "broker", "consumer"} <= set(services)
    assert "networks:" not in text and "ports:" not in text  # no bridge network, no published ports
    assert text.count("network_mode: host") >= 5  # the ZooKeeper anchor, broker, topics, producer, consumer
    addresses = re.findall(r"\b(\d+\.\d+\.\d+\.\d+)(?::\d+)?", text)
    assert addresses and set(addresses) == {"127.0.0.1"}
    ports = []
    for i in (1, 2, 3):
        cfg = (DOCKER / "zookeeper" / f"zoo{i}.cfg").read_text()
        assert "clientPortAddress=127.0.0.1" in cfg
        ports.append(int(re.search(r"clientPort=(\d+)", cfg).group(1)))
        assert set(re.findall(r"server\.\d=(\S+?):", cfg)) == {"127.0.0.1"}
    assert len(set(ports)) == 3 and "9092" not in {str(p) for p in ports}


def test_image_tag_follows_the_sources(tmp_path: Path) -> None:
    for name, path in context_files():
        if not name.startswith("docker/host-ca"):
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, tmp_path / name)
    tag = image_tag(tmp_path)
    assert re.fullmatch(r"zkconsumer:[0-9a-f]{12}", tag) and image_tag(tmp_path) == tag
    (tmp_path / "zkconsumer" / "__pycache__").mkdir(exist_ok=True)
    (tmp_path / "zkconsumer" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    assert image_tag(tmp_path) == tag  # bytecode is not part of the image
    (tmp_path / "zkconsumer" / "lab" / "runner.py").write_text("# changed\n")
    assert image_tag(tmp_path) != tag
