#!/usr/bin/env python3
"""Moving clients through a cut that begins mid-window, swept in the simulator.

    python3 scripts/moving-cut-sweep.py            # the whole sweep, about ten seconds
    python3 scripts/moving-cut-sweep.py --print 3 1.7 14.3   # one scenario file

Each scenario is sim/testdata/moving-cut-80's shape: three tenants at 80%
of 100 per 10 s (or --rate), with the production gossip timing, each on
one instance for MOVE seconds and then on the next (tenant k starts k/3 of
a turn late), and a cut from CUT seconds for 14 s: n2 alone on 3
instances, n0,n1,n2 | n3,n4 on 5. It runs every combination of instances
(3, 5), MOVE (1.7, 3, 5 s) and CUT (0.3 to 8.3 s into the window from
10 s) at seeds 1-3 under lease and static with `go run ./cmd/sim -file F
-policy lease,static -seed S`, and prints each policy's worst window
under the partition-safe reference and its requests wrongly denied.
"""
import argparse
import math
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def scenario(n, move, cut, rate="0.8x", tenants=3, duration=50, cut_for=14.0):
    side = "isolate n2" if n == 3 else "partition n0,n1,n2 | n3,n4"
    lines = [
        f"desc {n} instances, LAN profile: {tenants} tenants at {rate} moving every {move} s; cut at {cut} s for {cut_for} s",
        f"instances {n}", "sync 200ms", "profile lan", f"duration {duration}s",
        "network latency=1ms jitter=exp:1ms", "sla put fixed:10s:100",
    ]
    for k in range(tenants):
        late = k / tenants
        bounds, j = [0.0], 1
        while (j - late) * move < duration:
            bounds.append((j - late) * move)
            j += 1
        bounds.append(float(duration))
        for a, b in zip(bounds, bounds[1:]):
            node = (k + int(a / move + late + 1e-9)) % n
            frm = "" if a == 0 else f" from={round(a * 1000)}ms"
            to = "" if b >= duration else f" to={round(b * 1000)}ms"
            lines.append(f"traffic tenants=t{k + 1} sla=put rate={rate} spread=n{node}:100%{frm}{to}")
    lines.append(f"at {round(cut * 1000)}ms {side}")
    lines.append(f"at {round((cut + cut_for) * 1000)}ms heal")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--print", nargs=3, metavar=("N", "MOVE", "CUT"), help="print one scenario file and exit")
    ap.add_argument("--rate", default="0.8x")
    a = ap.parse_args()
    if a.print:
        sys.stdout.write(scenario(int(a.print[0]), float(a.print[1]), float(a.print[2]), a.rate))
        return
    with tempfile.TemporaryDirectory() as tmp:
        sim = os.path.join(tmp, "sim")
        subprocess.run(["go", "build", "-o", sim, "./cmd/sim"], cwd=ROOT, check=True)
        print("instances move cut seed | lease worst under, wrongly denied | static worst under, wrongly denied")
        worse = total = 0
        for n in (3, 5):
            for move in (1.7, 3.0, 5.0):
                for cut in (10.3, 12.3, 14.3, 16.3, 18.3):
                    f = os.path.join(tmp, "s.txt")
                    with open(f, "w") as fh:
                        fh.write(scenario(n, move, cut, a.rate))
                    for seed in (1, 2, 3):
                        out = subprocess.run([sim, "-file", f, "-policy", "lease,static", "-seed", str(seed)],
                                             capture_output=True, text=True, check=True).stdout
                        got = {}
                        for m in re.finditer(r"^(lease|static)\s+overshoot\s+\S+\s+undershoot\s+(\S+)%\s+false denials\s+\S+\s+\((\d+)\)", out, re.M):
                            got[m.group(1)] = (float(m.group(2)), int(m.group(3)))
                        (lu, ld), (su, sd) = got["lease"], got["static"]
                        total += 1
                        worse += lu > su + 1
                        print(f"{n} {move} {cut} {seed} | {lu:5.1f}% {ld:4d} | {su:5.1f}% {sd:4d}")
        print(f"lease more than 1 point below static in its worst window: {worse} of {total}")


if __name__ == "__main__":
    main()
