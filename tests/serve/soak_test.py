"""Soak of `lathe lab serve` on loopback under hostile clients (issue 47, items 4 and 5):
oversized request heads, clients that send a header line now and then, and more idle
connections than the server keeps. Bounded: a fixed number of connections and requests
(about 5 s), 127.0.0.1 only. Ordinary requests are timed throughout; the server's resident
memory is read from /proc after each phase. Fails when memory grows by more than 32 MB, an
ordinary request takes over 3 s or fails, or an oversized head gets no 414/431; prints
the figures either way. Usage: soak_test.py --lathe BIN --make-dataset BIN
"""
import os
import socket
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import explorer_fixture as fx  # noqa: E402

MAX_RSS_GROWTH_MB = 32
# Far above a request's own time (milliseconds), even under the sanitizers on a busy 2-core
# machine, and far below the 12-15 s the slow clients used to cause.
MAX_LATENCY_S = 3.0


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def connect(port, timeout=10):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def status_of(data):
    parts = data.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[0].startswith(b"HTTP/") else None


def read_status(s):
    data = b""
    try:
        while b"\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    return status_of(data)


def timed_get(port, path="/api/versions"):
    start = time.monotonic()
    try:
        with connect(port, timeout=5) as s:  # past MAX_LATENCY_S: failed anyway
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
                      .encode())
            code = read_status(s)
    except OSError:
        code = None
    return code, time.monotonic() - start


def report(ts):
    return (f"latency median {statistics.median(ts) * 1000:.1f} ms, max {max(ts) * 1000:.1f} ms "
            f"over {len(ts)} requests")


def oversized(port, prefix, total, results):
    """Sends `prefix`, then `total` bytes of 'a' in 1 MiB pieces (the head never ends), and
    records the answer's status."""
    piece = b"a" * (1 << 20)
    with connect(port) as s:
        try:
            s.sendall(prefix)
            for _ in range(total >> 20):
                s.sendall(piece)
        except OSError:
            pass  # the server stopped reading: its answer is in the receive queue
        results.append(read_status(s))


def main():
    args = fx.parse_args()
    figures, failures = [], []
    with fx.Scratch() as root:
        data, catalog, _ = fx.make_data(root, args.lathe, args.make_dataset, sweep=False)
        server = fx.Server(args.lathe, data, catalog)
        pid, port = server.proc.pid, server.port
        try:
            latencies = {}

            def sample(phase, n=10):
                got = [timed_get(port) for _ in range(n)]
                if any(code != 200 for code, _ in got):
                    failures.append(f"{phase}: {[code for code, _ in got]}")
                latencies[phase] = [t for _, t in got]
                print(f"{phase}: {report(latencies[phase])}, resident {rss_mb(pid):.1f} MB",
                      flush=True)

            sample("baseline")
            rss = {"baseline": rss_mb(pid)}

            # Oversized heads: 8 header lines of 64 MiB and 4 request lines of 20 MB at once.
            results = []
            threads = [threading.Thread(target=oversized, args=(
                port, b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ", 64 << 20, results))
                for _ in range(8)]
            threads += [threading.Thread(target=oversized, args=(port, b"GET /", 20 << 20, results))
                        for _ in range(4)]
            for t in threads:
                t.start()
            sample("oversized")
            for t in threads:
                t.join(timeout=30)
            if sorted(map(str, results)) != ["414"] * 4 + ["431"] * 8:
                failures.append(f"oversized heads answered {results}")
            rss["oversized"] = rss_mb(pid)

            # Slow clients: 64 connections sending one header line every 0.5 s for 4 s.
            slow = [connect(port) for _ in range(64)]
            for s in slow:
                s.sendall(b"GET /api/versions HTTP/1.1\r\n")
            got = []
            end = time.monotonic() + 4
            while time.monotonic() < end:
                for s in slow:
                    s.sendall(b"X-Slow: 1\r\n")
                got += [timed_get(port) for _ in range(2)]
                time.sleep(0.5)
            if any(code != 200 for code, _ in got):
                failures.append(f"slow clients: {[code for code, _ in got]}")
            latencies["slow clients"] = [t for _, t in got]
            for s in slow:
                s.close()
            rss["slow clients"] = rss_mb(pid)

            # A flood of idle connections, past the 256 the server keeps waiting.
            idle = [connect(port) for _ in range(400)]
            sample("idle flood")
            for s in idle:
                s.close()
            rss["idle flood"] = rss_mb(pid)

            sample("after")
            rss["after"] = rss_mb(pid)
        finally:
            code = server.stop()
        if code != 0:
            failures.append(f"lab serve exited {code}")

    for phase, ts in latencies.items():
        figures.append(f"{phase:>13}: {report(ts)}")
    figures.append("resident MB: " + ", ".join(f"{k} {v:.1f}" for k, v in rss.items()))
    print("\n".join(figures))
    growth = max(rss.values()) - rss["baseline"]
    worst = max(max(ts) for ts in latencies.values())
    if growth > MAX_RSS_GROWTH_MB:
        failures.append(f"resident memory grew by {growth:.1f} MB")
    if worst > MAX_LATENCY_S:
        failures.append(f"an ordinary request took {worst:.2f} s")
    if failures:
        print("soak: FAILED\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("soak: ok")


if __name__ == "__main__":
    main()
