#!/usr/bin/env python3
"""Acknowledged-write throughput of a lamina cluster member (or any server
speaking the cluster's one-reply-per-command DSL): C connections, each
sending `p K V` and waiting for `OK` before the next. Prints one line:
`C clients, N writes, S s, W writes/s, p50 X ms, p99 Y ms`.

    scripts/cluster-bench.py --addr 127.0.0.1:7101 --clients 16 --writes 20000

With --serve, the target is a single-node `lamina serve` (whose puts have
no reply): each put is followed by `@sync`, answered once the put is
applied (and fsynced under `--sync always`), the same acknowledgement.
"""
import argparse
import socket
import threading
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--addr", required=True, help="the leader's client HOST:PORT")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--writes", type=int, default=20000, help="in total")
    ap.add_argument("--serve", action="store_true", help="target is `lamina serve`")
    args = ap.parse_args()
    host, port = args.addr.rsplit(":", 1)
    per = args.writes // args.clients
    lat = [[] for _ in range(args.clients)]
    errors = []

    def worker(i):
        s = socket.create_connection((host, int(port)))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        f = s.makefile("rw")
        for j in range(per):
            k = i * per + j
            t = time.perf_counter()
            f.write(f"p {k} {k}\n@sync\n" if args.serve else f"p {k} {k}\n")
            f.flush()
            r = f.readline().strip()
            lat[i].append(time.perf_counter() - t)
            if r != ("@sync" if args.serve else "OK"):
                errors.append(r)
                break
        s.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(args.clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    dt = time.perf_counter() - t0
    all_lat = sorted(x for l in lat for x in l)
    n = len(all_lat)
    if errors or n == 0:
        raise SystemExit(f"errors: {errors[:3]}")
    p50 = all_lat[n // 2] * 1000
    p99 = all_lat[min(n - 1, n * 99 // 100)] * 1000
    print(f"{args.clients} clients, {n} writes, {dt:.2f} s, {n / dt:.0f} writes/s, "
          f"p50 {p50:.2f} ms, p99 {p99:.2f} ms")


if __name__ == "__main__":
    main()
