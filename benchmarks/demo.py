"""The demo's targets, rerun: `make demo` from a fresh clone, timed, then the report's
checks against the baselines (`genobird.report.checks`).

    python benchmarks/demo.py                         # fresh clone, set-up included
    python benchmarks/demo.py --venv .venv            # fresh clone, this environment
    python benchmarks/demo.py --results results/demo  # the checks of a finished run only

A fresh clone of this checkout's HEAD goes into a temporary folder and runs `make demo`
there (CORES, default 2), so nothing of this tree's results is reused; the time is
printed against the 10-minute budget. With `--venv` the clone uses that environment
instead of building its own (the time then leaves set-up out, and says so).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUDGET_S = 600


def run_fresh_demo(venv: Path | None, cores: int) -> tuple[Path, float]:
    """(the clone's results/demo, seconds) of `make demo` in a fresh clone of HEAD."""
    clone = Path(tempfile.mkdtemp(prefix="genobird-demo-")) / "genobird"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
    command, env = ["make", "demo", f"CORES={cores}"], {**os.environ, "CORES": str(cores)}
    if venv is not None:
        # the environment's genobird may be another tree's editable install: the clone's
        # own code goes first on the path, with its C encoder built (not timed)
        python = venv.resolve() / "bin" / "python"
        subprocess.run(
            [str(python), "setup.py", "-q", "build_ext", "--inplace"],
            cwd=clone,
            check=True,
            capture_output=True,
        )
        command, env["PYTHONPATH"] = ["bash", "scripts/demo.sh", str(python.parent)], str(clone)
    started = time.perf_counter()
    done = subprocess.run(command, cwd=clone, env=env)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"make demo failed in {clone} (exit {done.returncode})")
    return clone / "results" / "demo", seconds


def print_checks(results: Path) -> dict:
    path = results / "report.checks.json"
    if not path.is_file():
        raise SystemExit(f"{path} is missing: run the demo (or `genobird report`) first")
    checks = json.loads(path.read_text())
    for row in checks["checks"]:
        figures = ", ".join(
            f"{name} {value:.4f}" if isinstance(value, float) else f"{name} {value}"
            for name, value in (("genobird", row["genobird"]), ("baseline", row["baseline"]))
            if value is not None
        )
        difference = row["difference"]
        if difference is not None:
            point, low, high = difference
            figures += f"; difference {point:+.4f}"
            figures += f" [{low:+.4f}, {high:+.4f}]" if low is not None else ""
        print(f"{'met    ' if row['met'] else 'NOT met'}  {row['check']}: {figures}")
    print(f"{checks['met']} of {checks['of']} checks met ({path})")
    for note in checks.get("notes", []):
        print(f"  why: {note}")
    return checks


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--results", type=Path, help="print the checks of this finished demo run; run nothing"
    )
    parser.add_argument(
        "--venv", type=Path, help="this environment in the fresh clone (set-up not timed)"
    )
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--out", type=Path, help="also write the time and checks as JSON")
    args = parser.parse_args(argv)
    record: dict = {}
    results = args.results
    if results is None:
        results, seconds = run_fresh_demo(args.venv, args.cores)
        scope = "set-up excluded" if args.venv else "set-up included"
        verdict = "within" if seconds <= BUDGET_S else "OVER"
        print(
            f"make demo from a fresh clone: {seconds:.0f} s ({scope}), {verdict} the "
            f"{BUDGET_S // 60}-minute budget, {args.cores} cores"
        )
        record.update(seconds=round(seconds, 1), setup_included=args.venv is None, cores=args.cores)
    record["checks"] = print_checks(results)
    if args.out:
        args.out.write_text(json.dumps(record, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
