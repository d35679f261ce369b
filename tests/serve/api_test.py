"""The explorer's JSON API and static file server, through the real `lathe lab serve` on an
ephemeral port: endpoints, paging limits, ranked models without rows, version diff, live
rescans, and the security rules (GET/HEAD only, no way out of web/, size limits, Host check,
content types). Usage: api_test.py --lathe BIN --make-dataset BIN
"""
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import explorer_fixture as fx  # noqa: E402

ARGS = None
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def raw_request(port, text):
    """Sends `text` as is (no client-side normalisation) and returns the status line's code."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(text.encode("latin-1"))
        data = b""
        while b"\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    return int(data.split(b" ", 2)[1]) if data else None


class ExplorerApi(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.scratch = fx.Scratch()
        cls.root = cls.scratch.__enter__()
        cls.data, cls.catalog, cls.fixture_id = fx.make_data(cls.root, ARGS.lathe, ARGS.make_dataset)
        # A copy of web/ with a symbolic link pointing out of it.
        cls.web = os.path.join(cls.root, "web")
        shutil.copytree(os.path.join(ROOT, "web"), cls.web)
        with open(os.path.join(cls.root, "secret.txt"), "w") as f:
            f.write("secret")
        os.symlink(os.path.join(cls.root, "secret.txt"), os.path.join(cls.web, "leak.txt"))
        cls.server = fx.Server(ARGS.lathe, cls.data, cls.catalog, web=cls.web)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.scratch.__exit__(None, None, None)

    def api(self, path, status=200):
        code, headers, body = self.server.get(path)
        self.assertEqual(code, status, body[:300])
        self.assertTrue(headers["Content-Type"].startswith("application/json"), headers)
        return json.loads(body)

    def test_versions(self):
        v = self.api("/api/versions")
        self.assertEqual(v["lathe"][:2], ["0.1.0", "0.0.9"])  # newest first
        self.assertIn("5.24.0", v["transformers"])
        self.assertIn("none", v["transformers"])
        self.assertGreater(v["rows"], 120)
        self.assertEqual(v["errors"], [])
        self.assertIn({"task": "text-generation", "view": "trending", "snapshot": "2026-11-30",
                       "models": 4}, v["rankings"])

    def test_rows_search_filter_and_pages(self):
        all_rows = self.api("/api/rows?view=all&lathe=0.1.0&limit=500")
        ids = [i["model_id"] for i in all_rows["items"]]
        self.assertIn(self.fixture_id, ids)
        self.assertIn(fx.EVIL_ID, ids)
        found = self.api("/api/rows?view=all&q=MODEL-1&limit=500")
        self.assertTrue(found["items"])
        self.assertTrue(all("model-1" in i["model_id"] for i in found["items"]))
        fails = self.api("/api/rows?view=all&status=fail&limit=500")
        self.assertTrue(all(i["status"] == "fail" for i in fails["items"]))
        self.assertEqual(fails["total"], fails["counts"]["fail"])
        page = [self.api(f"/api/rows?view=all&sort=model&limit=7&offset={o}") for o in (0, 7)]
        first, second = ([i["model_id"] for i in p["items"]] for p in page)
        self.assertEqual(len(first), 7)
        self.assertFalse(set(first) & set(second))
        for bad in ("limit=501", "limit=0", "offset=-1", "view=x", "sort=x", "status=x"):
            self.assertIn("error", self.api("/api/rows?" + bad, status=400))
        self.api("/api/nope", status=404)

    def test_ranking_shows_unrun_models_as_untested(self):
        r = self.api("/api/rows?view=trending&lathe=0.1.0")
        self.assertEqual(r["ranking"]["snapshot"], "2026-11-30")
        by_id = {i["model_id"]: i for i in r["items"]}
        self.assertEqual(by_id[fx.UNRUN_ID]["status"], "untested")
        self.assertFalse(by_id[fx.UNRUN_ID]["tested"])
        self.assertEqual(by_id[self.fixture_id]["status"], "pass")
        self.assertEqual([i["rank"] for i in r["items"]], sorted(i["rank"] for i in r["items"]))
        # Without a ranking file for the view, the view lists nothing and says why.
        d = self.api("/api/rows?view=downloads")
        self.assertIsNone(d["ranking"])
        self.assertTrue(d["ranking_missing"])
        self.assertEqual(d["total"], 0)
        self.assertFalse(self.api("/api/rows?view=all")["ranking_missing"])

    def test_rows_by_architecture_and_size(self):
        r = self.api("/api/rows?view=all&lathe=0.1.0&arch=LlamaForCausalLM"
                     "&min_params=1000000000&max_params=10000000000&limit=500")
        self.assertTrue(r["items"])
        for i in r["items"]:
            self.assertEqual(i["architecture"], "LlamaForCausalLM")
            self.assertTrue(1e9 <= i["parameters"] < 1e10, i)
        for bad in ("min_params=x", "max_params=-5", "min_params=10000000000000"):
            self.assertIn("error", self.api("/api/rows?" + bad, status=400))

    def test_row_detail(self):
        q = urllib.parse.urlencode({"model": self.fixture_id})
        r = self.api("/api/row?" + q)["row"]
        self.assertEqual(r["status"], "pass")
        self.assertIn("lathe generate", r["run_script"])
        self.assertIn("lathe", r["stack"])
        evil = self.api("/api/row?" + urllib.parse.urlencode({"model": fx.EVIL_ID}))["row"]
        self.assertIn(fx.INJECTION, evil["error_message"])  # data, untouched, as JSON
        self.assertEqual(evil["first_mismatch"], 2)
        self.api("/api/row?model=nobody/none", status=404)
        self.api("/api/row", status=400)

    def test_summary_and_diff(self):
        s = self.api("/api/summary?lathe=0.1.0")
        self.assertIn("LlamaForCausalLM", [a["architecture"] for a in s["architectures"]])
        d = self.api("/api/diff?a_lathe=0.0.9&b_lathe=0.1.0")
        self.assertGreater(d["regressions_total"], 0)
        self.assertGreater(d["fixes_total"], 0)
        self.assertEqual(d["regressions"][0]["a"]["status"], "pass")
        self.assertNotEqual(d["regressions"][0]["b"]["status"], "pass")
        self.assertEqual(len(self.api("/api/diff?a_lathe=0.0.9&b_lathe=0.1.0&limit=1")["fixes"]), 1)

    def test_coverage_of_the_rankings(self):
        # Counted as `lathe lab report` counts it: the ranking's architecture field, rows of
        # the chosen versions.
        c = self.api("/api/coverage?task=image-text-to-text&lathe=0.1.0")
        self.assertEqual(len(c["rankings"]), 1, c["rankings"])
        r = c["rankings"][0]
        self.assertEqual((r["task"], r["view"], r["models"]), ("image-text-to-text", "selected", 3))
        self.assertEqual((r["models_implemented"], r["models_pass"]), (1, 0))
        self.assertEqual((r["architectures"], r["architectures_implemented"]), (2, 1))
        self.assertEqual(r["percent"], {"models_implemented": "33.3%", "models_pass": "0.0%",
                                        "architectures_implemented": "50.0%",
                                        "architectures_pass": "0.0%"})
        self.assertEqual(r["unimplemented"], [{"architecture": fx.UNIMPLEMENTED_ARCH, "models": 2}])
        t = self.api("/api/coverage?lathe=0.1.0")  # text-generation by default
        by_view = {r["view"]: r for r in t["rankings"]}
        self.assertEqual(set(by_view), {"selected", "trending"})
        self.assertEqual(by_view["trending"]["models_implemented"], 4)
        self.assertGreaterEqual(by_view["trending"]["models_pass"], 1)  # the swept fixture
        self.assertEqual(by_view["selected"]["percent"]["models_pass"], "0.0%")
        # Fixture coverage: the tiny fixtures' rows alone, apart from all the rows.
        self.assertGreater(t["fixtures"]["rows"], 0)
        self.assertLess(t["fixtures"]["rows"], t["rows"]["rows"])
        self.assertEqual(self.api("/api/coverage?task=any&lathe=0.1.0")["task"], "any")
        self.assertEqual(len(self.api("/api/coverage?task=any")["rankings"]), 3)

    def test_unimplemented_ranked_models_are_unsupported_without_a_row(self):
        r = self.api("/api/rows?task=image-text-to-text&view=selected")
        by_id = {i["model_id"]: i for i in r["items"]}
        for m in fx.UNSUPPORTED_IDS:
            self.assertEqual(by_id[m]["status"], "unsupported")
            self.assertFalse(by_id[m]["tested"])
            self.assertEqual(by_id[m]["error_type"], "unsupported_architecture")
            self.assertIn(fx.UNIMPLEMENTED_ARCH, by_id[m]["error_message"])
        self.assertEqual(by_id[fx.VISION_ID]["status"], "untested")
        self.assertEqual((r["counts"]["unsupported"], r["counts"]["untested"]), (2, 1))
        only = self.api("/api/rows?task=image-text-to-text&view=selected&status=unsupported")
        self.assertEqual(sorted(i["model_id"] for i in only["items"]), fx.UNSUPPORTED_IDS)

    def test_coverage_equals_the_report(self):
        # Over the same rows (the sweep alone) and ranking files, the explorer's figures are
        # the report's.
        sweep = os.path.join(self.data, "sweep")
        one = fx.Server(ARGS.lathe, sweep, self.catalog)
        try:
            _, api = one.json("/api/coverage?task=any")
        finally:
            one.stop()
        out = subprocess.run([ARGS.lathe, "lab", "report", "--json", "--catalog", self.catalog,
                              sweep], capture_output=True, text=True, check=True).stdout
        report = json.loads(out)
        key = lambda r: (r["task"], r["view"])  # noqa: E731
        self.assertEqual(len(report["rankings"]), 3)
        self.assertEqual(sorted(api["rankings"], key=key), sorted(report["rankings"], key=key))
        # Every row of the sweep is a tiny fixture's: its fixture coverage is the report's.
        for k in ("architectures", "passing"):
            self.assertEqual(api["fixtures"][k], report["coverage"][k], k)
        self.assertEqual(api["fixtures"]["rows"], report["rows"])

    def test_page_and_headers(self):
        code, headers, body = self.server.get("/")
        self.assertEqual(code, 200)
        self.assertTrue(headers["Content-Type"].startswith("text/html"))
        self.assertIn("script-src 'self'", headers["Content-Security-Policy"])
        self.assertEqual(headers["X-Content-Type-Options"], "nosniff")
        code, headers, _ = self.server.get("/app.js")
        self.assertTrue(headers["Content-Type"].startswith("text/javascript"))
        c = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=10)
        c.request("HEAD", "/")
        r = c.getresponse()
        self.assertEqual((r.status, r.read()), (200, b""))

    def test_builtin_page(self):
        # Without --web, from a folder away from the source tree: the page built into lathe,
        # byte for byte the web/ folder it was built from, behind the same refusals.
        server = fx.Server(os.path.abspath(ARGS.lathe), self.data, self.catalog, cwd=self.root)
        try:
            for name in sorted(os.listdir(os.path.join(ROOT, "web"))):
                with open(os.path.join(ROOT, "web", name), "rb") as f:
                    want = f.read()
                code, _, body = server.get("/" + name)
                self.assertEqual((code, body), (200, want), name)
            self.assertEqual(server.get("/")[2], server.get("/index.html")[2])
            for bad in ("/../web/app.js", "/%2e%2e/secret.txt", "/missing.js", "/.hidden"):
                self.assertEqual(server.get(bad)[0], 404, bad)
        finally:
            server.stop()

    def test_start_errors(self):
        # docs/errors.md: a port in use, a port without permission, an unknown host and a
        # missing page are each one clear line and exit code 1.
        base = [ARGS.lathe, "lab", "serve", "--data", self.data, "--catalog", self.catalog]
        cases = [
            ([], ["--port", str(self.server.port)], "cannot listen there: in use"),
            ([], ["--host", "no-such-host.invalid", "--port", "0"], "no such address"),
            ([], ["--port", "0", "--web", os.path.join(self.root, "no-such-web")],
             "the explorer's page is missing")]
        # A port below 1024 without the privilege to bind it: permission denied, not "in use".
        # As root, the privilege (CAP_NET_BIND_SERVICE) is dropped with setpriv.
        prefix = None
        if os.geteuid() != 0:
            with open("/proc/sys/net/ipv4/ip_unprivileged_port_start") as f:
                if int(f.read()) > 1:
                    prefix = []
        elif shutil.which("setpriv") and subprocess.run(
                ["setpriv", "--bounding-set", "-net_bind_service", "true"]).returncode == 0:
            prefix = ["setpriv", "--bounding-set", "-net_bind_service"]
        if prefix is not None:
            cases.append((prefix, ["--port", "1"], "cannot listen there: permission denied"))
        else:
            print("note: the permission-denied case is skipped (no way to drop the privilege)")
        for prefix, extra, message in cases:
            r = subprocess.run(prefix + base + extra, capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn(message, r.stderr)
            self.assertEqual(r.stderr.count("error:"), 1, r.stderr)
            self.assertEqual(r.stderr.count("\n"), 1, r.stderr)

    def test_read_only(self):
        for method in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS"):
            c = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=10)
            c.request(method, "/api/rows", body=b"x" if method != "OPTIONS" else None)
            r = c.getresponse()
            self.assertEqual(r.status, 405, method)
            self.assertEqual(r.getheader("Allow"), "GET, HEAD")

    def test_no_way_out_of_the_web_folder(self):
        port = self.server.port
        for target in ("/../secret.txt", "/%2e%2e/secret.txt", "/%2E%2E%2Fsecret.txt",
                       "/..%2fsecret.txt", "/..%5csecret.txt", "/%252e%252e/secret.txt",
                       "/leak.txt", "/../../../../etc/passwd", "/.%2e/secret.txt"):
            code = raw_request(port, f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                     "Connection: close\r\n\r\n")
            self.assertIn(code, (400, 404), target)

    def test_size_limits_and_host(self):
        self.assertEqual(self.server.get("/api/rows?q=" + "a" * 3000)[0], 414)
        code = raw_request(self.server.port, "GET /api/rows HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                             "Content-Length: 5\r\n\r\nhello")
        self.assertEqual(code, 413)
        self.assertEqual(self.server.get("/", headers={"Host": "attacker.example"})[0], 403)

    def test_page_builds_dom_from_text_only(self):
        with open(os.path.join(ROOT, "web", "app.js")) as f:
            js = f.read()
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
            self.assertNotIn(sink, js)

    def test_zz_notices_new_files(self):  # runs last: it adds a version
        fx.run([ARGS.make_dataset, os.path.join(self.data, "later"), "--rows", "5", "--lathe",
                "0.2.0"])
        fx.wait_for(lambda: "0.2.0" in self.api("/api/versions")["lathe"], 5, "the new file")
        self.assertEqual(self.api("/api/rows?view=all")["lathe"], "0.2.0")


if __name__ == "__main__":
    ARGS = fx.parse_args()
    unittest.main(argv=[sys.argv[0], "-v"])
