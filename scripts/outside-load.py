#!/usr/bin/env python3
"""An outside HTTP load on the demo's nodes, with a partition in the middle.

Start the nodes first, then run this against the file they print:

    go run ./cmd/demo-cluster -no-load -nodes 3 -http off > nodes.txt &
    python3 scripts/outside-load.py nodes.txt --clients round-robin \
        --cut-at 14.3 --cut-for 14 --duration 50

Three tenants (org-a, org-b, org-c) send PUT /v1/organizations/ORG/product/1
at 8 requests a second each by default: 80% of the demo's put-product
limit (100 per 10 s), so every request should pass (--load 2 sends twice
the limit: each window should admit 100, at most 101). The load starts at a 10 s boundary of
the Unix clock (where the nodes' windows begin) and runs for --duration
seconds. --clients round-robin sends each tenant's requests to the nodes in
turn; pinned sends tenant i to node i; moving keeps each tenant on one node
for --move-every seconds, then moves it to the next (tenant i starts on
node i, and the tenants move at different moments). At --cut-at seconds the script posts
the partition "n1,n2|n3" (--partition) to every node's /admin/partition,
and --cut-for seconds later /admin/heal. At the end it prints, per tenant
and 10 s window, the requests offered, admitted and denied (429), and the
worst complete window's share denied. (The demo's own load generator,
without -no-load, sends the seed's mixed load from inside the supervisor;
this script is the outside client of issue 12's case, with its exact
shape.) Only 127.0.0.1 addresses are used,
and the run is bounded: at most 300 s and 24 requests in flight.
"""
import argparse
import http.client
import math
import queue
import sys
import threading
import time

TENANTS = ["org-a", "org-b", "org-c"]
LIMIT = 100  # put-product's threshold per PERIOD
PERIOD = 10


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("nodes", help="the lines 'node N http://127.0.0.1:PORT' that demo-cluster -no-load prints")
    ap.add_argument("--clients", choices=["round-robin", "pinned", "moving"], default="round-robin")
    ap.add_argument("--move-every", type=float, default=1.7, help="with --clients moving: seconds a tenant stays on a node")
    ap.add_argument("--cut-at", type=float, default=14.3, help="seconds from the load's start; negative: no partition")
    ap.add_argument("--cut-for", type=float, default=14.0)
    ap.add_argument("--partition", default="n1,n2|n3")
    ap.add_argument("--duration", type=float, default=50.0)
    ap.add_argument("--load", type=float, default=0.8, help="each tenant's rate as a multiple of the limit (at most 4)")
    ap.add_argument("--print-denials", action="store_true")
    a = ap.parse_args()
    if not 0 < a.duration <= 300:
        sys.exit("outside-load: --duration must be in (0, 300]")
    if not 0 < a.load <= 4:
        sys.exit("outside-load: --load must be in (0, 4]")
    if a.move_every <= 0:
        sys.exit("outside-load: --move-every must be positive")
    rate = a.load * LIMIT / PERIOD
    hosts = []
    for line in open(a.nodes):
        f = line.split()
        if len(f) == 3 and f[0] == "node" and f[2].startswith("http://127.0.0.1:"):
            hosts.append(f[2][len("http://"):])
    if not hosts:
        sys.exit("outside-load: no 'node N http://127.0.0.1:PORT' line in " + a.nodes)

    results, lock, work = [], threading.Lock(), queue.Queue()

    def worker():
        conns = {}
        while True:
            item = work.get()
            if item is None:
                return
            at, tenant, node = item
            c = conns.get(node)
            if c is None:
                c = conns[node] = http.client.HTTPConnection(hosts[node], timeout=5)
            try:
                c.request("PUT", "/v1/organizations/%s/product/1" % tenant, body=b"x")
                r = c.getresponse()
                r.read()
                status = r.status
            except (OSError, http.client.HTTPException):
                conns.pop(node, None)
                status = -1
            with lock:
                results.append((at, tenant, node, status))

    def post(path, body):
        for h in hosts:
            c = http.client.HTTPConnection(h, timeout=5)
            c.request("POST", path, body=body.encode())
            c.getresponse().read()
            c.close()

    workers = [threading.Thread(target=worker, daemon=True) for _ in range(24)]
    for w in workers:
        w.start()
    t0 = math.ceil(time.time() / PERIOD) * PERIOD + PERIOD
    plan = sorted((t0 + (i + k / len(TENANTS)) / rate, k, t)
                  for k, t in enumerate(TENANTS) for i in range(int(a.duration * rate)))
    sent = {t: 0 for t in TENANTS}
    cut = a.cut_at < 0
    healed = cut
    for at, k, tenant in plan:
        while True:
            now = time.time()
            if not cut and now >= t0 + a.cut_at:
                post("/admin/partition", a.partition)
                cut = True
                print("partition %s at %.2f s" % (a.partition, now - t0), file=sys.stderr)
            if not healed and now >= t0 + a.cut_at + a.cut_for:
                post("/admin/heal", "")
                healed = True
                print("heal at %.2f s" % (now - t0), file=sys.stderr)
            if now >= at:
                break
            time.sleep(min(0.005, at - now))
        if a.clients == "round-robin":
            node = sent[tenant] % len(hosts)
        elif a.clients == "moving":
            node = (k + int((at - t0) / a.move_every + k / len(TENANTS))) % len(hosts)
        else:
            node = k % len(hosts)
        sent[tenant] += 1
        work.put((at, tenant, node))
    for _ in workers:
        work.put(None)
    for w in workers:
        w.join()

    windows = {}
    for at, tenant, node, status in results:
        w = windows.setdefault((int(at // PERIOD) * PERIOD, tenant), [0, 0, 0])
        w[0] += 1
        if 200 <= status < 300:
            w[1] += 1
        elif status == 429:
            w[2] += 1
    offered = sum(w[0] for w in windows.values())
    denied = sum(w[2] for w in windows.values())
    print("requests %d, denied %d, failed %d" % (offered, denied, sum(w[0] - w[1] - w[2] for w in windows.values())))
    worst, low, high = 0.0, None, None
    for (start, tenant), (o, ad, d) in sorted(windows.items()):
        complete = t0 <= start and start + PERIOD <= t0 + a.duration
        print("%s window %+.0f s: offered %d, admitted %d, denied %d%s" % (
            tenant, start - t0, o, ad, d, "" if complete else " (incomplete)"))
        if complete:
            worst = max(worst, d / o)
            low = ad if low is None else min(low, ad)
            high = ad if high is None else max(high, ad)
    print("worst complete window: %.1f%% denied; admitted per complete window %s to %s (limit %d)" % (
        100 * worst, low, high, LIMIT))
    if a.print_denials:
        for at, tenant, node, status in sorted(results):
            if not 200 <= status < 300:
                print("denied %.2f s %s n%d %d" % (at - t0, tenant, node + 1, status))


if __name__ == "__main__":
    main()
