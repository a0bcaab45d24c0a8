"""Sets the JSON results of nuvec-bench and the peers' scripts side by side.

    python3 bench/compare.py [--markdown] RESULTS.json...

Each file is a JSON array of case objects (name, device, shape, dtype, median_s, figure, unit,
runner, status). The runner named "nuvec" is compared with every other: the last column is
nuvec's figure over the best peer's, turned around for time units (us/op), so that above 1 always
means nuvec is faster. Cases a runner could not run show "n/a" (unavailable) or "err". Results
of several devices (CPU and GPU files together) give one table per device, each with the runners
that have results there.
"""

import argparse
import json
import sys

LOWER_IS_BETTER = {"us/op", "us", "ratio"}


def fmt(x):
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    if x >= 1:
        return f"{x:.2f}"
    return f"{x:.3f}"


def cell(obj):
    if obj is None:
        return "-"
    if obj.get("figure") is not None:
        return fmt(obj["figure"])
    return "err" if str(obj.get("status", "")).startswith("error") else "n/a"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--markdown", action="store_true", help="print a Markdown table")
    p.add_argument("files", nargs="+", metavar="RESULTS.json")
    args = p.parse_args()

    runners, order, table, info = [], [], {}, {}
    for path in args.files:
        with open(path) as f:
            for obj in json.load(f):
                runner = obj.get("runner", path)
                key = (obj["device"], obj["name"])
                if runner not in runners:
                    runners.append(runner)
                if key not in table:
                    order.append(key)
                    table[key] = {}
                table[key][runner] = obj
                if obj.get("info"):
                    info[(runner, obj["device"])] = obj["info"]
    devices = []
    for dev, _ in order:
        if dev not in devices:
            devices.append(dev)
    for n, dev in enumerate(devices):
        keys = [k for k in order if k[0] == dev]
        here = [r for r in runners if any(r in table[k] for k in keys)]
        if len(devices) > 1:
            print(("\n" if n else "") + (f"### {dev.upper()}\n" if args.markdown else f"== {dev}"))
        print_table(keys, table, here, args.markdown)

    if info:
        print()
    for (runner, dev), text in info.items():
        who = f"{runner} ({dev})" if len(devices) > 1 else runner
        print(f"{who}: {text}" if not args.markdown else f"- {who}: {text}")
    notes = [(k, o["status"]) for k in order for r, o in table[k].items()
             if r == "nuvec" and o.get("status", "ok") != "ok"]
    if notes:
        print("\nnuvec cases that did not run:" if not args.markdown else "\nnuvec cases that did not run:\n")
        for (dev, name), status in notes:
            print(f"- {name} ({dev}): {status}" if len(devices) > 1 else f"- {name}: {status}")
    return 0


def print_table(order, table, runners, markdown):
    """One table: a row per (device, case) key of `order`, a column per runner."""
    peers = [r for r in runners if r != "nuvec"]
    head = ["case", "dtype", "unit"] + runners + ["nuvec / best peer"]
    rows = []
    for key in order:
        objs = table[key]
        first = next(iter(objs.values()))
        row = [key[1], first["dtype"], first["unit"]] + [cell(objs.get(r)) for r in runners]
        nv = objs.get("nuvec", {}).get("figure")
        figs = [(objs[r]["figure"], r) for r in peers if objs.get(r, {}).get("figure")]
        if nv and figs:
            if first["unit"] in LOWER_IS_BETTER:
                best, who = min(figs)
                ratio = best / nv
            else:
                best, who = max(figs)
                ratio = nv / best
            row.append(f"{ratio:.2f} ({who})")
        else:
            row.append("-")
        rows.append(row)

    if markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "|".join("---" if i < 3 else "---:" for i in range(len(head))) + "|")
        for row in rows:
            print("| " + " | ".join(f"`{c}`" if i == 0 else c for i, c in enumerate(row)) + " |")
    else:
        widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
        for row in [head] + rows:
            print("  ".join(str(c).ljust(w) if i < 3 else str(c).rjust(w)
                            for i, (c, w) in enumerate(zip(row, widths))))


if __name__ == "__main__":
    sys.exit(main())
