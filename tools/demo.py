"""`make demo`: show the schedules, then train the toy Mask R-CNN and the toy PSPNet at a budget.

    python tools/demo.py [--only schedules|detectron2|mmseg ...]

Each part runs in its own process; the framework demos generate their toy data when missing.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

TOOLS = Path(__file__).resolve().parent
PARTS = {
    "schedules": [TOOLS / "plot_schedules.py", "--out", "output/schedules.png"],
    "detectron2": [TOOLS / "demo_detectron2.py"],
    "mmseg": [TOOLS / "demo_mmseg.py"],
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only",
        nargs="+",
        choices=list(PARTS),
        default=list(PARTS),
        help="run only these parts (default: all, in this order)",
    )
    args = parser.parse_args()
    for part in args.only:
        script, *script_args = PARTS[part]
        print(f"\n=== demo: {part} ({script.relative_to(TOOLS.parent)}) ===", flush=True)
        start = time.monotonic()
        result = subprocess.run(
            [sys.executable, str(script), *map(str, script_args)], cwd=TOOLS.parent
        )
        if result.returncode != 0:
            print(f"demo part {part!r} failed with exit code {result.returncode}", file=sys.stderr)
            return result.returncode
        print(f"=== {part} done in {time.monotonic() - start:.0f} s ===", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
