#!/usr/bin/env bash
# Set up everything zkconsumer needs on a fresh Debian/Ubuntu machine: Java (for ZooKeeper and Spark), chromium
# (the browser tests), python3-venv when missing, a .venv with the package installed editable plus its dev extras.
# Idempotent: a stamp file skips the pip step while pyproject.toml is unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VENV:-.venv}"
SUDO=""
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo"; fi

apt_install() {
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "bootstrap: please install $* with your package manager" >&2; exit 1
  fi
  echo "bootstrap: installing $* with apt-get" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

if ! command -v java >/dev/null 2>&1 && [ -z "${JAVA_HOME:-}" ]; then
  apt_install default-jre-headless
fi
# Apache Kafka's own jars (the judge in tests/test_kafka_*.py) are fetched by Maven, and a few lines of Java
# around Kafka's high-level consumer are compiled against them: Maven and a JDK's javac are needed, unless
# ZKCONSUMER_KAFKA_HOME points at an unpacked Kafka release (javac is needed either way).
if [ -z "${ZKCONSUMER_KAFKA_HOME:-}" ] && ! command -v mvn >/dev/null 2>&1; then
  apt_install maven
fi
JAVAC_DIR="$(dirname "$(readlink -f "$( [ -n "${JAVA_HOME:-}" ] && echo "$JAVA_HOME/bin/java" || command -v java)")")"
if [ ! -x "$JAVAC_DIR/javac" ] && ! command -v javac >/dev/null 2>&1; then
  apt_install default-jdk-headless
fi
# The browser tests (tests/test_pages.py ...) drive Debian's headless chromium through Playwright, launched with the
# system binary: nothing downloads a browser.
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  apt_install chromium
fi
PY="${PYTHON:-python3}"
if ! "$PY" -c 'import sys; assert sys.version_info >= (3, 11)' 2>/dev/null; then
  echo "bootstrap: zkconsumer needs Python >= 3.11 (found: $("$PY" --version 2>&1))" >&2; exit 1
fi
if [ ! -x "$VENV/bin/python" ]; then
  if ! "$PY" -m venv "$VENV" >/dev/null 2>&1; then
    rm -rf "$VENV"
    apt_install python3-venv
    "$PY" -m venv "$VENV"
  fi
fi
# pykafka 2.8 (a 0.8-era client with a ZooKeeper-balanced consumer) for tests/test_pykafka.py, in an environment
# of its own: it pins kazoo==2.5.0, which cannot sit beside zkconsumer's kazoo>=2.9 in .venv. Installed beside the
# main environment's packages (two downloads at once), waited for below.
PYKAFKA_VENV="$VENV/pykafka"
PYKAFKA_PID=""
if [ ! -f "$PYKAFKA_VENV/.installed-2.8.0" ]; then
  ( "$PY" -m venv "$PYKAFKA_VENV" && "$PYKAFKA_VENV/bin/python" -m pip install -q 'pykafka==2.8.0' \
      && touch "$PYKAFKA_VENV/.installed-2.8.0" ) &
  PYKAFKA_PID=$!
fi
# pip byte-compiles what it installs: keep it so. Where PYTHONDONTWRITEBYTECODE is set (as in some CI images) Python
# writes no bytecode on import, and every process of the tests would compile kafka-python, kazoo and rich again.
STAMP="$VENV/.zkconsumer-installed"
if [ ! -f "$STAMP" ] || [ pyproject.toml -nt "$STAMP" ]; then
  "$VENV/bin/python" -m pip install -q --upgrade pip
  "$VENV/bin/python" -m pip install -q -e '.[dev]'
  touch "$STAMP"
fi
# zkconsumer's own modules byte-compiled (only what changed since the last time): the tests start hundreds of
# zkconsumer processes (lab members, the CLI), and where PYTHONDONTWRITEBYTECODE is set each would compile the package
# again on import: 0.65 s to import the consumer's CLI, 0.44 s from bytecode.
"$VENV/bin/python" -m compileall -q -j 0 zkconsumer >/dev/null
if [ -n "$PYKAFKA_PID" ] && ! wait "$PYKAFKA_PID"; then
  echo "bootstrap: installing pykafka 2.8.0 into $PYKAFKA_VENV failed" >&2; exit 1
fi
# Kafka 0.8.2.2's jars into ~/.cache/zkconsumer/kafka (kept between runs) and the consumer harness compiled
# against them; a no-op once both are there.
"$VENV/bin/python" -m zkconsumer kafka fetch >/dev/null
