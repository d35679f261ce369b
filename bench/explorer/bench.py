"""Explorer API latency over a 10,000-row dataset: builds the dataset (two lathe versions of
5,000 models, through lathe's own Parquet writer) and a 1,000-model trending ranking, starts
`lathe lab serve` on a free port, sends each endpoint's request REPEAT times over one
keep-alive connection, and prints the first request's time (answers are cached per snapshot
of the files) and p50/p95 per endpoint; then the time of the first request after a new file
appears (only it is read) and after every file changed (all are read again). A measurement,
not a test.

    python3 bench/explorer/bench.py [--build build] [--rows 5000] [--repeat 200]
"""
import argparse
import http.client
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "serve"))
import explorer_fixture as fx  # noqa: E402

ENDPOINTS = [
    ("versions", "/api/versions"),
    ("rows (default view)", "/api/rows?view=all"),
    ("rows search", "/api/rows?view=all&q=model-12"),
    ("rows trending ranking", "/api/rows?view=trending"),
    ("rows status+sort, 500", "/api/rows?view=all&status=fail&sort=speed&order=desc&limit=500"),
    ("rows page 40", "/api/rows?view=all&offset=2000&limit=50"),
    ("row detail", "/api/row?model=org13%2Fmodel-1234"),
    ("summary", "/api/summary"),
    ("diff", "/api/diff?a_lathe=0.1.0&b_lathe=0.2.0"),
    ("page (index.html)", "/"),
]


def percentile(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rows", type=int, default=5000, help="models per lathe version (two versions)")
    ap.add_argument("--repeat", type=int, default=200)
    a = ap.parse_args()
    lathe = os.path.join(a.build, "lathe")
    make = os.path.join(a.build, "tests", "serve", "explorer_make_dataset")
    for f in (lathe, make):
        if not os.path.exists(f):
            sys.exit(f"{f} is missing: cmake --build {a.build} --target lathe explorer_make_dataset")
    with fx.Scratch() as root:
        data = os.path.join(root, "data")
        catalog = os.path.join(root, "catalog")
        os.makedirs(catalog)
        t0 = time.time()
        fx.run([make, data, "--rows", str(a.rows), "--lathe", "0.1.0,0.2.0"])
        models = [{"id": f"org{i % 37}/model-{i}", "rank": n + 1}
                  for n, i in enumerate(range(0, 2 * a.rows, 2))][:1000]
        with open(os.path.join(catalog, "text-generation-trending.json"), "w") as f:
            json.dump({"format": 1, "task": "text-generation", "view": "trending",
                       "snapshot": "2026-11-30", "models": models}, f)
        print(f"dataset: {2 * a.rows} rows in {time.time() - t0:.1f} s")
        server = fx.Server(lathe, data, catalog)
        try:
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
            rows = None
            # "first": the first request, which computes what the snapshot then caches.
            print(f"{'endpoint':28} {'first ms':>8} {'p50 ms':>8} {'p95 ms':>8} {'bytes':>9}")
            for name, path in ENDPOINTS:
                times = []
                for _ in range(a.repeat):
                    t = time.perf_counter()
                    conn.request("GET", path)
                    r = conn.getresponse()
                    body = r.read()
                    times.append((time.perf_counter() - t) * 1000)
                    if r.status != 200:
                        sys.exit(f"{path}: HTTP {r.status}: {body[:200]!r}")
                if name == "versions":
                    rows = json.loads(body)["rows"]
                print(f"{name:28} {times[0]:8.2f} {percentile(times, 50):8.2f} "
                      f"{percentile(times, 95):8.2f} "
                      f"{len(body):9}")
            print(f"({rows} rows served; {a.repeat} requests per endpoint, one connection)")

            def timed_versions():
                time.sleep(1.1)  # the server looks at the files at most once a second
                t = time.perf_counter()
                conn.request("GET", "/api/versions")
                r = conn.getresponse()
                body = json.loads(r.read())
                return (time.perf_counter() - t) * 1000, body["rows"]

            fx.run([make, os.path.join(root, "more"), "--rows", "10", "--lathe", "0.3.0"])
            more = os.path.join(root, "more", "dataset")
            for name in os.listdir(more):
                os.rename(os.path.join(more, name), os.path.join(data, "dataset", "new-" + name))
            ms, after = timed_versions()
            print(f"reload, one new file:   {ms:8.2f} ms ({rows} -> {after} rows)")
            for dirpath, _, files in os.walk(data):
                for name in files:
                    os.utime(os.path.join(dirpath, name))
            ms, after = timed_versions()
            print(f"reload, every file:     {ms:8.2f} ms ({after} rows)")
        finally:
            server.stop()


if __name__ == "__main__":
    main()
