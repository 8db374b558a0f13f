"""``zkconsumer migrate`` as the lab runs a scenario's ``migrate``, ``rollback`` and ``kill-driver`` steps: each
driver in a process of its own (so that ``kill-driver`` is a real SIGKILL, as the fault matrix's ``migrate-kill``),
started in the background once the members have acknowledged. A ``migrate`` waits for the driver before it to end;
a ``rollback`` starts at once, as ``zkconsumer migrate --rollback`` run by hand does: it takes the group over from a
forward driver still running (the lease), which stops, "taken over" (the fault matrix's ``rollback-mid``).

The simulator runs the same steps on its own processes (sim/migration_side.py); both word the run's result with
migration/outcome.py."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from zkconsumer.analysis.deadlines import MIGRATION_ENDED_STEP
from zkconsumer.migration.driver import MigrationDriver
from zkconsumer.migration.outcome import DriverEnd, combined, result_text, settled
from zkconsumer.scenario.plan import GROUP
from zkconsumer.zk.registry import Registry

#: how long a driver waits for the lab's members to acknowledge before it starts (a process takes seconds to start
#: on a busy machine), and its step timeout
ACK_WAIT_S = 60.0
STEP_TIMEOUT_S = 60


class MigrationRuns:
    """The run's drivers. ``addresses`` gives the lab's ZooKeeper and broker (known once the lab has started them),
    ``event`` gets the lab's event lines, ``lab_line`` writes the lab's trace, ``running`` counts the members running
    now (each must have acknowledged before a driver starts)."""

    def __init__(self, addresses: Callable[[], tuple[str, str]], logs: Path, event: Callable[[str], None],
                 lab_line: Callable[..., None], running: Callable[[], int]) -> None:
        self._addresses, self.logs = addresses, logs
        self._event, self._lab_line, self._running = event, lab_line, running
        self.result: str | None = None
        self._last: threading.Thread | None = None
        self._threads: list[threading.Thread] = []
        self._procs: list[subprocess.Popen] = []
        self._kills = 0  # kill-driver steps so far

    @property
    def started(self) -> bool:
        return self._last is not None

    @property
    def running(self) -> bool:
        return any(t.is_alive() for t in self._threads)

    @property
    def settled(self) -> bool:
        """Nothing was started, or the migration ended as asked (migration/outcome.py)."""
        return self._last is None or settled(self.result)

    def start(self, rollback: bool = False) -> None:
        """Start ``zkconsumer migrate`` (``--rollback``) in the background: a forward one after the previous one has
        ended, a rollback at once."""
        previous, kills = None if rollback else self._last, self._kills

        def run() -> None:
            if previous is not None:
                previous.join()
            try:
                zk_connect, bootstrap = self._addresses()
                with Registry.open(zk_connect) as reg:
                    driver = MigrationDriver(reg, GROUP, bootstrap, step_timeout_s=STEP_TIMEOUT_S)
                    deadline = time.monotonic() + ACK_WAIT_S
                    while time.monotonic() < deadline and len([m for m in driver.members() if m.mode]) < \
                            self._running():
                        time.sleep(0.1)
                # killed while it waited for the one before it: it never ran, as a killed process would not have
                end, why = (DriverEnd.KILLED, "") if self._kills != kills else self._run(rollback)
                result = result_text(rollback, end, why)
            except Exception as e:  # noqa: BLE001 - shown in the summary
                result = result_text(rollback, DriverEnd.FAILED, str(e))
            if result not in (DriverEnd.DONE, DriverEnd.ROLLED_BACK):
                self._event(result)
            self.result = combined(self.result, result)
            # the migration's disturbance ends: a heal's deadline inside it moves here (analysis/deadlines.py)
            self._lab_line("lab_step", step=MIGRATION_ENDED_STEP, target="")

        self._event(f"{'rollback to ZooKeeper' if rollback else 'migration to coordinator'} mode started")
        self._last = threading.Thread(target=run, daemon=True, name="lab-migration")
        self._threads.append(self._last)
        self._last.start()

    def _run(self, rollback: bool) -> tuple[DriverEnd, str]:
        """One driver process, its output in logs/migrate-N.log and its progress lines as the lab's events once it
        exits; how it ended, and why where it failed."""
        self.logs.mkdir(parents=True, exist_ok=True)
        log_path = self.logs / f"migrate-{len(self._procs) + 1}.log"
        zk_connect, bootstrap = self._addresses()
        cmd = [sys.executable, "-m", "zkconsumer", "migrate", "--zookeeper", zk_connect, "--group", GROUP,
               "--bootstrap-server", bootstrap, "--step-timeout", str(STEP_TIMEOUT_S),
               *(["--rollback"] if rollback else [])]
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self._procs.append(proc)
        code = proc.wait()
        lines = [line.strip() for line in log_path.read_text(errors="replace").splitlines() if line.strip()]
        for line in lines:
            if line.startswith("•"):
                self._event(line.lstrip("• "))
        if code == 0:
            return (DriverEnd.ROLLED_BACK if rollback else DriverEnd.DONE), ""
        if code == -signal.SIGKILL:
            return DriverEnd.KILLED, ""
        if any("taken over" in line for line in lines):
            return DriverEnd.TAKEN_OVER, ""
        return DriverEnd.FAILED, (lines[-1] if lines else f"exit {code}")

    def kill(self) -> None:
        """``kill-driver``: SIGKILL of every running driver, and of those waiting to start."""
        self._kills += 1
        for proc in self._procs:
            if proc.poll() is None:
                proc.kill()
        self._event("zkconsumer migrate killed (SIGKILL)")

    def join(self, timeout: float) -> str:
        """Wait for every driver (``timeout`` in all); the run's result (``unfinished`` if one still runs)."""
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return self.result if self.result and not self.running else "unfinished"

    def close(self) -> None:
        """A driver still running when the run ends is killed."""
        for proc in self._procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
