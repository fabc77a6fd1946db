"""Run the benchmarks: ``python -m bench [--only zk,...]``; each part writes under var/bench/."""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

PARTS = ["zk", "pipeline", "merritt", "latency", "download", "ui", "reconcile", "bulk", "scale"]
OUT_DIR = Path(__file__).resolve().parent.parent / "var" / "bench"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--only", default="", help=f"comma list of parts; known: {','.join(PARTS)}")
    args = parser.parse_args(argv)
    args.parts = [p.strip() for p in args.only.split(",") if p.strip()] or list(PARTS)
    unknown = [p for p in args.parts if p not in PARTS]
    if unknown:
        parser.error(f"unknown part(s): {', '.join(unknown)}; known parts: {', '.join(PARTS)}")
    args.out_dir = OUT_DIR
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for name in args.parts:
        try:
            module = importlib.import_module(f"bench.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"bench.{name}":
                raise
            sys.exit(f"bench part {name!r} is listed in PARTS but bench/{name}.py does not exist")
        module.run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
