"""make test's time as CI sees it: a fresh clone of HEAD, ``CI=true bash .ci/run`` in it (setup included: a new
virtualenv, the packages, the jars), timed as a whole; written as a result record (results/README.md) that the
results page follows across commits.

    .venv/bin/python benchmarks/ci_time.py --record results/make-test-$(git rev-parse --short HEAD).json
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from records import write_record  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--record", type=Path, help="write the result record there")
    p.add_argument("--keep", action="store_true", help="keep the clone (its path is printed)")
    args = p.parse_args()
    if subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                      capture_output=True, text=True).stdout.strip():
        raise SystemExit("uncommitted changes: CI runs a clean clone of a commit; commit first")
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    clone = Path(tempfile.mkdtemp(prefix="zkconsumer-ci-")) / "main"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")} | {"CI": "true"}
    print(f"CI run of {head} in {clone} ...", flush=True)
    started = time.monotonic()
    with open(clone.parent / "ci.log", "w") as log:
        done = subprocess.run(["bash", ".ci/run"], cwd=clone, env=env, stdout=log, stderr=subprocess.STDOUT)
    seconds = time.monotonic() - started
    tail = (clone.parent / "ci.log").read_text()[-4000:]
    summary = next((line.strip("= ") for line in reversed(tail.splitlines()) if re.search(r"\d+ passed", line)),
                   "no pytest summary")
    pytest_s = re.search(r" in ([\d.]+)s", summary)
    print(f"exit {done.returncode} after {seconds / 60:.1f} min: {summary}")
    if not args.keep:
        subprocess.run(["rm", "-rf", str(clone.parent / "main")])
    if args.record:
        write_record(args.record, {"commit": head}, {
            "make_test_seconds": round(seconds, 1), "pytest_seconds": float(pytest_s.group(1)) if pytest_s else None,
            "tests": summary, "passed": done.returncode == 0})
    sys.exit(done.returncode)


if __name__ == "__main__":
    main()
