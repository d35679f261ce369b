"""Data and a running server for the explorer's tests (api_test.py, browser_test.py) and its
benchmark (bench/explorer/bench.py).

make_data() fills a folder the way users will: a real sweep of the bundled tiny fixtures
(`lathe lab run`), synthetic rows for two lathe versions written by lathe's own Parquet writer
(explorer_make_dataset), one of them holding HTML/script injection strings, another a local
checkpoint's error without a run script; a trending ranking that names a model no sweep has
run, a selected ranking of SELECTED_UNRUN models none of which has run (as after a first
sweep of the tiny fixtures), and an image-text-to-text ranking with an architecture lathe does
not implement.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request

INJECTION = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=1</script>'
EVIL_ID = "evil/" + INJECTION
UNRUN_ID = "never/ranked-but-not-run"
LOCAL_ERROR_ID = "my-checkpoints/broken-llama"
SELECTED_UNRUN = 37
# The image-text-to-text ranking: two models of an architecture lathe does not implement
# (shown as unsupported without a row), one of an implemented one, none run.
UNIMPLEMENTED_ARCH = "NoSuchArchForConditionalGeneration"
UNSUPPORTED_IDS = ["exotic/vision-1", "exotic/vision-2"]
VISION_ID = "org4/gemma-vision"


def parse_args(extra=None):
    p = argparse.ArgumentParser()
    p.add_argument("--lathe", required=True, help="the lathe binary")
    p.add_argument("--make-dataset", required=True, help="the explorer_make_dataset binary")
    for args, kwargs in extra or []:
        p.add_argument(*args, **kwargs)
    return p.parse_args()


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}")
    return r.stdout


def make_data(root, lathe, make_dataset, sweep=True, rows=60):
    """Returns (data_dir, catalog_dir, a fixture model id from the sweep or None)."""
    data = os.path.join(root, "data")
    catalog = os.path.join(root, "catalog")
    os.makedirs(catalog)
    fixture_id = None
    if sweep:
        run([lathe, "lab", "run", "--quiet", "--no-hf-cache", "--out", os.path.join(data, "sweep"),
             "--reference-cache", os.path.join(root, "ref")])
        with open(os.path.join(data, "sweep", "rows.jsonl")) as f:
            swept = [json.loads(line) for line in f]
        fixture_id = sorted(r["model_id"] for r in swept if r["task"] == "text-generation")[0]
    run([make_dataset, os.path.join(data, "synthetic"), "--rows", str(rows), "--lathe",
         "0.0.9,0.1.0", "--inject", "--local-error"])
    ranked = ([fixture_id] if fixture_id else []) + ["org1/model-1", UNRUN_ID, "org3/model-3"]
    ranking = {"format": 1, "task": "text-generation", "view": "trending",
               "snapshot": "2026-11-30", "source": "test",
               "models": [{"id": m, "rank": i + 1, "architecture": "LlamaForCausalLM"}
                          for i, m in enumerate(ranked)]}
    with open(os.path.join(catalog, "text-generation-trending.json"), "w") as f:
        json.dump(ranking, f)
    selected = {**ranking, "view": "selected",
                "models": [{"id": f"selected/unrun-{i}", "rank": i + 1,
                            "architecture": "LlamaForCausalLM"} for i in range(SELECTED_UNRUN)]}
    with open(os.path.join(catalog, "text-generation-selected.json"), "w") as f:
        json.dump(selected, f)
    vision = {**ranking, "task": "image-text-to-text", "view": "selected",
              "models": [{"id": m, "rank": i + 1, "architecture": a} for i, (m, a) in enumerate(
                  [(UNSUPPORTED_IDS[0], UNIMPLEMENTED_ARCH), (VISION_ID, "Gemma3ForConditionalGeneration"),
                   (UNSUPPORTED_IDS[1], UNIMPLEMENTED_ARCH)])]}
    with open(os.path.join(catalog, "image-text-to-text-selected.json"), "w") as f:
        json.dump(vision, f)
    return data, catalog, fixture_id


class Server:
    """`lathe lab serve --port 0` in the background; .url once it listens."""

    def __init__(self, lathe, data, catalog, web=None, extra=(), cwd=None):
        cmd = [lathe, "lab", "serve", "--port", "0", "--data", data, "--catalog", catalog]
        if web:
            cmd += ["--web", web]
        self.proc = subprocess.Popen(cmd + list(extra), stdout=subprocess.PIPE, text=True, cwd=cwd)
        line = self.proc.stdout.readline()
        m = re.match(r"serving (http://\S+/)", line)
        if not m:
            self.proc.kill()
            raise RuntimeError(f"lathe lab serve did not start: {line!r}")
        self.url = m.group(1)
        self.port = int(self.url.rsplit(":", 1)[1].strip("/"))

    def get(self, path, headers=None):
        req = urllib.request.Request(self.url + path.lstrip("/"), headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def json(self, path):
        status, headers, body = self.get(path)
        return status, json.loads(body)

    def stop(self):
        self.proc.terminate()
        try:
            return self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return None
        finally:
            self.proc.stdout.close()


class Scratch:
    def __enter__(self):
        self.path = tempfile.mkdtemp(prefix="lathe-explorer-")
        return self.path

    def __exit__(self, *exc):
        shutil.rmtree(self.path, ignore_errors=True)


def wait_for(predicate, seconds=10.0, what="condition"):
    end = time.time() + seconds
    while time.time() < end:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")
