#!/usr/bin/env python3
"""Runs two builds of one criterion bench in turn, several times, and reports medians.

A shared machine drifts by tens of percent between minutes, so old and new are never measured
minutes apart: each round runs both binaries back to back (old first in odd rounds, new first
in even ones, so a trend in the load does not favour either), and every figure is a median over
the rounds. Within one run each subject is divided by its baseline (the benchmark whose id
matches --baseline and has the same size, e.g. 64KB); the ratio reported is the median of
those per-run ratios, so the baseline and the subject always come from the same run.

Build the two binaries first (the old commit in a worktree of its own, the same bench source):

    git worktree add /tmp/base <old-commit>
    (cd /tmp/base && cargo bench -p mesh-egress --bench gate --no-run)   # prints its path
    cargo bench -p mesh-egress --bench gate --no-run

then, from `mesh-egress/`:

    python3 benches/interleave.py --old OLD_BIN --new NEW_BIN --rounds 5 \
        --baseline 'aho_corasick_one_pass' -- --warm-up-time 1 --measurement-time 2

Everything after `--` goes to the criterion binary (a filter, its times). Criterion's own
output of each run is kept under --out (default /tmp/interleave).
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys

SIZE = re.compile(r"(\d+[KM]B)")


def run_once(binary, home, extra):
    """One criterion run of `binary` with its data under `home`: {benchmark id: median ns}."""
    env = dict(os.environ, CRITERION_HOME=home)
    subprocess.run(
        [binary, "--bench", *extra],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    medians = {}
    for root, _dirs, files in os.walk(home):
        if os.path.basename(root) != "new" or "estimates.json" not in files:
            continue
        with open(os.path.join(root, "benchmark.json")) as f:
            full_id = json.load(f)["full_id"]
        with open(os.path.join(root, "estimates.json")) as f:
            medians[full_id] = json.load(f)["median"]["point_estimate"]
    return medians


def ratios(medians, baseline):
    """Each benchmark's median over its size's baseline in the same run. Ids without a size
    (`router_healthy_path/router`) share one baseline, the one without a size."""
    bases = {}
    for bench, ns in medians.items():
        if re.search(baseline, bench):
            bases[size_of(bench)] = ns
    out = {}
    for bench, ns in medians.items():
        size = size_of(bench)
        if size in bases and not re.search(baseline, bench):
            out[bench] = ns / bases[size]
    return out


def size_of(bench):
    """The size label of a benchmark id (`64KB`), or "" when it has none."""
    size = SIZE.search(bench)
    return size.group(1) if size else ""


def fmt_time(ns):
    for unit, scale in (("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.3g} ns"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--old", required=True, help="the old build's bench binary")
    parser.add_argument("--new", required=True, help="the new build's bench binary")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--baseline",
        required=True,
        action="append",
        help="regex naming each size's baseline; repeat it for a ratio table per baseline",
    )
    parser.add_argument("--out", default="/tmp/interleave")
    parser.add_argument("extra", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    extra = args.extra[1:] if args.extra[:1] == ["--"] else args.extra

    times = {"old": {}, "new": {}}
    rel = {b: {"old": {}, "new": {}} for b in args.baseline}
    for round_ in range(1, args.rounds + 1):
        order = ["old", "new"] if round_ % 2 else ["new", "old"]
        for variant in order:
            binary = getattr(args, variant)
            home = os.path.join(args.out, f"{variant}-{round_}")
            medians = run_once(binary, home, extra)
            for bench, ns in medians.items():
                times[variant].setdefault(bench, []).append(ns)
            for baseline in args.baseline:
                for bench, r in ratios(medians, baseline).items():
                    rel[baseline][variant].setdefault(bench, []).append(r)
            print(f"round {round_} {variant}: {len(medians)} benchmarks", file=sys.stderr)

    for baseline in args.baseline:
        print(f"ratios to `{baseline}`:")
        print("| benchmark | old median | new median | old ratio (range) | new ratio (range) |")
        print("|---|---|---|---|---|")
        for bench in sorted(times["new"]):
            old_t = times["old"].get(bench)
            new_t = times["new"][bench]
            cells = [bench, fmt_time(statistics.median(old_t)) if old_t else "—",
                     fmt_time(statistics.median(new_t))]
            for variant in ("old", "new"):
                r = rel[baseline][variant].get(bench)
                cells.append(
                    f"{statistics.median(r):.2f}× ({min(r):.2f}–{max(r):.2f})" if r else "baseline"
                )
            print("| " + " | ".join(cells) + " |")
        print()

if __name__ == "__main__":
    main()
