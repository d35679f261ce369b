#!/usr/bin/env python3
"""A loopback stand-in for the Hub's model-listing API, for `lathe lab catalog refresh` tests.

Serves GET /api/models with a list in the Hub's JSON shape (id, downloads, likes,
trendingScore, pipeline_tag, sha, config.architectures), filtered by pipeline_tag and sorted by
the `sort` parameter, limited by `limit`. Writes its port to PORT_FILE and every request's
path to PORT_FILE.requests. Usage: fake_hub.py PORT_FILE
"""
import json
import sys
import urllib.parse
from http.server import BaseHTTPRequestHandler, HTTPServer

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


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        with open(sys.argv[1] + ".requests", "a") as f:
            f.write(self.path + "\n")
        url = urllib.parse.urlparse(self.path)
        if url.path != "/api/models":
            self.send_error(404)
            return
        q = urllib.parse.parse_qs(url.query)
        tag = q.get("pipeline_tag", [None])[0]
        key = q.get("sort", ["downloads"])[0]
        limit = int(q.get("limit", ["100"])[0])
        models = [m for m in MODELS if tag is None or m["pipeline_tag"] == tag]
        models.sort(key=lambda m: m.get(key, 0), reverse=True)
        body = json.dumps(models[:limit]).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def main():
    server = HTTPServer(("127.0.0.1", 0), Handler)
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    import os
    os.replace(sys.argv[1] + ".tmp", sys.argv[1])
    server.serve_forever()


if __name__ == "__main__":
    main()
