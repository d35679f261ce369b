#!/usr/bin/env python3
"""Reads a lab dataset folder with pyarrow, pandas and DuckDB, and checks what they see.

Usage: read_dataset.py DATASET_DIR --rows N [--pass N]
Prints one JSON object: rows and statuses as each reader sees them. Exits 1 when a reader
disagrees with --rows/--pass or with another reader.
"""
import argparse
import glob
import json
import os
import sys

import duckdb
import pandas
import pyarrow.parquet as pq

REQUIRED = ["model_id", "revision", "task", "architecture", "status", "stage", "error_type",
            "error_message", "log_tail", "cores", "tp_degree", "ep_degree", "dtype",
            "peak_memory_bytes", "compile_seconds", "total_seconds", "tokens_per_second",
            "reference_tokens", "generated_tokens", "first_mismatch", "logits_nmse",
            "first_diverging_layer", "judge_verdict", "stack", "run_script",
            "compile_cache_key", "started_at", "finished_at"]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("dataset")
    ap.add_argument("--rows", type=int, required=True)
    ap.add_argument("--passed", type=int)
    args = ap.parse_args()
    files = sorted(glob.glob(os.path.join(args.dataset, "*.parquet")))
    if not files:
        print(f"no parquet files in {args.dataset}", file=sys.stderr)
        return 1
    table = pq.ParquetDataset(files).read()
    missing = [c for c in REQUIRED if c not in table.column_names]
    arrow_pass = sum(1 for s in table.column("status").to_pylist() if s == "pass")
    frame = pandas.concat([pandas.read_parquet(f) for f in files])
    pandas_pass = int((frame["status"] == "pass").sum())
    con = duckdb.connect()
    pattern = os.path.join(args.dataset, "*.parquet")
    duck_rows, duck_pass = con.execute(
        "select count(*), count(*) filter (where status = 'pass') from read_parquet(?)",
        [pattern]).fetchone()
    tokens_ok = all(len(t) > 0 for s, t in zip(frame["status"], frame["generated_tokens"]) if s == "pass")
    seen = {"files": len(files), "missing_columns": missing,
            "pyarrow": [table.num_rows, arrow_pass], "pandas": [len(frame), pandas_pass],
            "duckdb": [duck_rows, duck_pass], "pass_rows_have_tokens": tokens_ok}
    print(json.dumps(seen))
    ok = (not missing and tokens_ok and table.num_rows == len(frame) == duck_rows == args.rows
          and arrow_pass == pandas_pass == duck_pass
          and (args.passed is None or arrow_pass == args.passed))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
