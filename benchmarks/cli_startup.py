"""CLI startup: wall time of `foldline --help`, `foldline chat --help` and `import foldline` against a
bare interpreter.

Each command runs in a fresh subprocess N times; the table shows the median and the ratio to
`python -c pass`. `foldline chat --help` has a target (issue 51): at most `CHAT_HELP_TARGET_S` on a
quiet machine, which it meets only while the chat's body (the SDK, prompt_toolkit, rich's markdown)
stays unloaded until a chat runs. Usage: python benchmarks/cli_startup.py [N]
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

CHAT_HELP_TARGET_S = 0.3
"""`foldline chat --help`'s median wall time on a quiet machine, at most (issue 51)."""


def _median_seconds(argv: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(runs: int) -> None:
    script = shutil.which("foldline") or str(Path(sys.executable).with_name("foldline"))
    cases = {
        "python -c pass": [sys.executable, "-c", "pass"],
        'python -c "import foldline"': [sys.executable, "-c", "import foldline"],
        "foldline --help": [script, "--help"],
        "foldline chat --help": [script, "chat", "--help"],
    }
    medians = {label: _median_seconds(argv, runs) for label, argv in cases.items()}
    base = medians["python -c pass"]
    print(f"{'command':<30} {'median (s)':>10} {'x pass':>8}   (N={runs})")
    for label, seconds in medians.items():
        print(f"{label:<30} {seconds:>10.3f} {seconds / base:>8.1f}")
    chat_help = medians["foldline chat --help"]
    verdict = "OK" if chat_help <= CHAT_HELP_TARGET_S else "MISSED"
    print(f"foldline chat --help = {chat_help:.3f} s (target <= {CHAT_HELP_TARGET_S} s): {verdict}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
