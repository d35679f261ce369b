#!/usr/bin/env python3
"""A loopback stand-in for the parts of the Hugging Face Hub's HTTP API that lathe uses.

GET /api/models                         the model listing (`lathe lab catalog refresh`): a
                                        list in the Hub's JSON shape, filtered by
                                        pipeline_tag, sorted by `sort`, cut at `limit`
GET /pad/N/api/models                   the same listing padded with spaces to N bytes
GET /api/models/ORG/NAME/revision/REV   one model's info with its files (`lathe pull`): sha,
                                        siblings [{rfilename, size, blobId, lfs {sha256,
                                        size, pointerSize}}]
GET /ORG/NAME/resolve/REV/FILE          a file, with Range requests (206); LFS files of a
                                        repository with "cdn" answer 302 to CDN/cdn/...
GET /cdn/ORG/NAME/COMMIT/FILE           a file, as the redirect's target (a second instance
                                        of this server on another loopback address)

The repositories come from REPOS (JSON, read again at every request, so a test changes
faults between runs):

  {"repos": {"org/name": {"dir": FOLDER, "commit": HEX40, "refs": {"main": HEX40},
                          "gated": [TOKEN, ...], "cdn": "http://127.0.0.2:PORT"}},
   "faults": {FILE, ORG/NAME/FILE or "api": {"status": 503, "error_code": "...", "cut": true, "once": true,
                              "corrupt": true, "delay": SECONDS_PER_4KIB, "ignore_range": true}}}

A fault named ORG/NAME/FILE applies to that repository's FILE alone, one named FILE to
every repository's. Files ending in .safetensors or .bin are LFS files (blob id: their sha256); others are plain
git blobs (blob id: git's sha1). "gated" lists the tokens that accepted the licence: no
Authorization gives 401, another token 403. Faults: "status" answers it; "cut" sends half the
body after a full Content-Length and closes (with "once", only the first time); "corrupt"
changes the first byte; "delay" sleeps per 4 KiB sent; "ignore_range" answers 200 to a Range.

Writes its port to PORT_FILE and one line per request to PORT_FILE.requests:
"PATH auth=AUTHORIZATION|- range=RANGE|-". Usage: fake_hub.py PORT_FILE [--repos FILE]
[--host ADDRESS]
"""
import argparse
import hashlib
import json
import os
import re
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODELS = [
    {"_id": "1", "id": "org-a/llama-small", "downloads": 900, "likes": 10, "trendingScore": 3,
     "pipeline_tag": "text-generation", "sha": "aaa111", "private": False,
     "config": {"architectures": ["LlamaForCausalLM"], "model_type": "llama"}},
    {"_id": "2", "id": "org-b/qwen-tiny", "downloads": 5000, "likes": 50, "trendingScore": 1,
     "pipeline_tag": "text-generation", "sha": "bbb222", "private": False,
     "config": {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"}},
    {"_id": "3", "id": "org-c/no-config", "downloads": 20, "likes": 0, "trendingScore": 99,
     "pipeline_tag": "text-generation", "private": False},
    {"_id": "4", "id": "org-d/vision", "downloads": 700, "likes": 7, "trendingScore": 5,
     "pipeline_tag": "image-text-to-text", "sha": "ddd444", "private": False,
     "config": {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3"}},
]

ARGS = None
LOG_LOCK = threading.Lock()
SEEN = {}  # fault key -> how many times it was applied


def is_lfs(name):
    return name.endswith(".safetensors") or name.endswith(".bin")


def load_repos():
    if not ARGS.repos:
        return {"repos": {}, "faults": {}}
    with open(ARGS.repos) as f:
        return json.load(f)


def repo_files(repo):
    root = repo["dir"]
    out = []
    for folder, _, names in os.walk(root):
        for n in names:
            path = os.path.join(folder, n)
            out.append(os.path.relpath(path, root).replace(os.sep, "/"))
    return sorted(out)


def sibling(root, name):
    with open(os.path.join(root, name), "rb") as f:
        data = f.read()
    git_id = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    s = {"rfilename": name, "size": len(data), "blobId": git_id}
    if is_lfs(name):
        sha = hashlib.sha256(data).hexdigest()
        pointer = ("version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n"
                   % (sha, len(data))).encode()
        s["blobId"] = hashlib.sha1(b"blob %d\0" % len(pointer) + pointer).hexdigest()
        s["lfs"] = {"sha256": sha, "size": len(data), "pointerSize": len(pointer)}
    return s


class Handler(BaseHTTPRequestHandler):
    def log_request_line(self):
        auth = self.headers.get("Authorization") or "-"
        rng = self.headers.get("Range") or "-"
        with LOG_LOCK, open(ARGS.port_file + ".requests", "a") as f:
            f.write("%s auth=%s range=%s\n" % (self.path, auth, rng))

    def answer(self, status, body=b"", headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def error(self, status, code=None):
        headers = [("X-Error-Code", code)] if code else []
        self.answer(status, json.dumps({"error": code or str(status)}).encode(), headers)

    def fault(self, spec, key):
        f = spec.get("faults", {}).get(key)
        if not f:
            return None
        if f.get("once") and SEEN.get(key, 0) >= 1:
            return None
        SEEN[key] = SEEN.get(key, 0) + 1
        return f

    def authorised(self, repo):
        tokens = repo.get("gated")
        if tokens is None:
            return True
        auth = self.headers.get("Authorization")
        if not auth:
            self.error(401, "GatedRepo")
            return False
        if auth.removeprefix("Bearer ") not in tokens:
            self.error(403, "GatedRepo")
            return False
        return True

    def commit_of(self, repo, rev):
        if rev == repo["commit"]:
            return rev
        return repo.get("refs", {}).get(rev)

    def do_GET(self):
        self.log_request_line()
        url = urllib.parse.urlparse(self.path)
        path = urllib.parse.unquote(url.path)
        pad = re.fullmatch(r"/pad/(\d+)(/.*)", path)
        if pad:
            path = pad.group(2)
        if path == "/api/models":
            return self.listing(url, int(pad.group(1)) if pad else 0)
        spec = load_repos()
        parts = path.strip("/").split("/")
        if parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] == "revision":
            return self.model_info(spec, parts[2] + "/" + parts[3], "/".join(parts[5:]))
        if len(parts) >= 5 and parts[2] == "resolve":
            return self.resolve(spec, parts[0] + "/" + parts[1], parts[3], "/".join(parts[4:]))
        if len(parts) >= 5 and parts[0] == "cdn":
            repo = spec["repos"].get(parts[1] + "/" + parts[2])
            if repo is None:
                return self.error(404, "RepoNotFound")
            return self.send_file(spec, parts[1] + "/" + parts[2], repo, "/".join(parts[4:]))
        self.error(404)

    def listing(self, url, pad):
        q = urllib.parse.parse_qs(url.query)
        tag = q.get("pipeline_tag", [None])[0]
        key = q.get("sort", ["downloads"])[0]
        limit = int(q.get("limit", ["100"])[0])
        models = [m for m in MODELS if tag is None or m["pipeline_tag"] == tag]
        models.sort(key=lambda m: m.get(key, 0), reverse=True)
        body = json.dumps(models[:limit]).encode()
        self.answer(200, body + b" " * max(0, pad - len(body)),
                    [("Content-Type", "application/json")])

    def model_info(self, spec, rid, rev):
        f = self.fault(spec, "api")
        if f and "status" in f:
            return self.error(f["status"], f.get("error_code"))
        repo = spec["repos"].get(rid)
        if repo is None:
            return self.error(404, "RepoNotFound")
        if not self.authorised(repo):
            return None
        commit = self.commit_of(repo, rev)
        if commit is None:
            return self.error(404, "RevisionNotFound")
        info = {"_id": "x", "id": rid, "modelId": rid, "sha": commit, "private": False,
                "gated": "manual" if repo.get("gated") is not None else False,
                "siblings": [sibling(repo["dir"], n) for n in repo_files(repo)]}
        self.answer(200, json.dumps(info).encode(), [("Content-Type", "application/json")])

    def resolve(self, spec, rid, rev, name):
        repo = spec["repos"].get(rid)
        if repo is None:
            return self.error(404, "RepoNotFound")
        if not self.authorised(repo):
            return None
        commit = self.commit_of(repo, rev)
        if commit is None:
            return self.error(404, "RevisionNotFound")
        if repo.get("cdn") and is_lfs(name):
            target = "%s/cdn/%s/%s/%s" % (repo["cdn"], rid, commit, urllib.parse.quote(name))
            return self.answer(302, b"", [("Location", target)])
        self.send_file(spec, rid, repo, name)

    def send_file(self, spec, rid, repo, name):
        full = os.path.join(repo["dir"], name)
        if name not in repo_files(repo):
            return self.error(404, "EntryNotFound")
        own = rid + "/" + name
        f = self.fault(spec, own if own in spec.get("faults", {}) else name) or {}
        if "status" in f:
            return self.error(f["status"], f.get("error_code"))
        with open(full, "rb") as fh:
            data = fh.read()
        if f.get("corrupt") and data:
            data = bytes([data[0] ^ 0xFF]) + data[1:]
        start = 0
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes=") and not f.get("ignore_range"):
            start = int(rng[6:].split("-")[0])
            if start >= len(data):
                return self.error(416)
        body = data[start:]
        self.send_response(206 if start else 200)
        if start:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data)))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if f.get("cut"):
            body = body[:len(body) // 2]
        for i in range(0, len(body), 4096):
            self.wfile.write(body[i:i + 4096])
            if f.get("delay"):
                self.wfile.flush()
                time.sleep(f["delay"])
        if f.get("cut"):
            self.wfile.flush()
            self.close_connection = True

    def log_message(self, *args):
        pass


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("port_file")
    p.add_argument("--repos")
    p.add_argument("--host", default="127.0.0.1")
    ARGS = p.parse_args()
    server = ThreadingHTTPServer((ARGS.host, 0), Handler)
    server.daemon_threads = True
    with open(ARGS.port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.replace(ARGS.port_file + ".tmp", ARGS.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
