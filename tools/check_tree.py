#!/usr/bin/env python3
"""Checks two rules of the source tree that no compiler checks (run by ctest as `tree_rules`).

1. Layers: src/ is layered, each folder may include only from folders of lower layers (and its
   own). The order is LAYERS below; an include that runs back up a layer, or sideways to a
   folder of the same layer, fails.
2. References: a file path named in the sources, tests, tools or docs (`src/graph/graph.h`,
   `models/rope.h`, `op_harness.cpp`) must exist, so that comments and docs never point at
   files that are gone.

Usage: tools/check_tree.py [ROOT]   (default: the checkout this script is in)
       tools/check_tree.py --self-test   (checks that a tree breaking each rule fails)
Exit 0 when both hold; 1 with one line per violation.
"""
import re
import sys
from pathlib import Path

# Lowest first. A folder may include its own headers and those of any lower layer.
LAYERS = [
    ["core"],
    ["io"],
    ["tokenizer", "graph"],
    ["backends"],
    ["compile"],
    ["models"],
    ["shard", "generate"],
    ["lab"],
    ["serve"],
    ["cli"],
]
RANK = {folder: i for i, layer in enumerate(LAYERS) for folder in layer}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z0-9_]+)/', re.M)
# A path: an optional run of folders, then a file name with a source or doc extension. Not
# preceded by a path character (so "transformers/models/x.py" is not read as "models/x.py").
PATH = re.compile(
    r"(?<![\w./<-])((?:[\w.-]+/)*[\w-]+\.(?:h|cpp|inc|cc|py|sh|md|js|css|html))\b(?!\.\w)")
# System and library headers: #include <...>.
SYSTEM_INCLUDE = re.compile(r"^\s*#\s*include\s*<.*$", re.M)
# Code lines (not comments) of C++ sources: bare names there are code (`h.h`), not references.
COMMENT = re.compile(r"^\s*(//|#|\*|/\*)")
# Top-level folders of the repository and src/'s folders: a path starting elsewhere names
# something outside the tree (a transformers module, a system header) and is not checked.
SCANNED = ["src", "tests", "tools", "bench", "fuzz", "web", "docs", "cmake"]
SUFFIXES = {".h", ".cpp", ".inc", ".cc", ".py", ".sh", ".md", ".js", ".css", ".html", ".txt"}


def layer_violations(root: Path):
    out = []
    for f in sorted((root / "src").rglob("*")):
        if f.suffix not in {".h", ".cpp", ".inc"}:
            continue
        own = f.relative_to(root / "src").parts[0]
        if own not in RANK:
            out.append(f"{f.relative_to(root)}: folder src/{own} is in no layer (tools/check_tree.py)")
            continue
        text = f.read_text(errors="replace")
        for m in INCLUDE.finditer(text):
            dep = m.group(1)
            if dep == own or dep not in RANK:
                continue
            if RANK[dep] >= RANK[own]:
                line = text.count("\n", 0, m.start()) + 1
                out.append(f"{f.relative_to(root)}:{line}: src/{own} includes src/{dep}, "
                           f"which is not in a lower layer")
    return out


def reference_violations(root: Path):
    files = [p for d in SCANNED if (root / d).is_dir() for p in (root / d).rglob("*")
             if p.is_file() and p.suffix in SUFFIXES and "fixtures" not in p.parts]
    files += [root / "README.md", root / "CMakeLists.txt"]
    names = {p.name for p in root.rglob("*") if ".git" not in p.parts}
    tops = {p.name for p in root.iterdir() if p.is_dir()}
    src_dirs = {p.name for p in (root / "src").iterdir() if p.is_dir()}
    out = []
    for f in files:
        if f.resolve() == Path(__file__).resolve():
            continue
        cpp = f.suffix in {".h", ".cpp", ".inc"}
        hashed = f.suffix in {".py", ".sh", ".txt"}  # comments only: their strings are data
        text = SYSTEM_INCLUDE.sub("", f.read_text(errors="replace"))
        for m in PATH.finditer(text):
            ref = m.group(1)
            parts = ref.split("/")
            start = text.rfind("\n", 0, m.start()) + 1
            before = text[start:m.start()]
            if cpp and not COMMENT.match(before) and "//" not in before:
                continue  # code, not a comment
            if hashed and not before.lstrip().startswith("#"):
                continue
            line = text.count("\n", 0, m.start()) + 1
            if len(parts) == 1:
                # A bare file name, checked in C++ comments only: docs and scripts name other
                # projects' files bare.
                if cpp and Path(ref).suffix in {".h", ".cpp", ".inc", ".cc"} and ref not in names:
                    out.append(f"{f.relative_to(root)}:{line}: names {ref}, which no file is")
                continue

            def found(p):  # a file, or the template CMake configures it from (core/version.h)
                return p.exists() or p.with_name(p.name + ".in").exists()

            if parts[0] in tops:
                exists = found(root / ref)
            elif parts[0] in src_dirs:
                exists = found(root / "src" / ref) or found(root / "tests" / ref)
            else:
                continue
            if not exists:
                out.append(f"{f.relative_to(root)}:{line}: names {ref}, which does not exist")
    return out


def self_test():
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for d in ["src/core", "src/graph", "src/backends/cpu", "docs"]:
            (root / d).mkdir(parents=True)
        (root / "README.md").write_text("see src/graph/graph.h\n")
        (root / "CMakeLists.txt").write_text("")
        (root / "src/core/tensor.h").write_text("// a tensor\n")
        (root / "src/graph/graph.h").write_text('#include "core/tensor.h"\n')
        (root / "src/backends/cpu/k.cpp").write_text('#include "graph/graph.h"\n')
        assert not layer_violations(root) and not reference_violations(root), "a clean tree"
        (root / "src/backends/cpu/k.h").write_text("")
        (root / "src/graph/executor.h").write_text('#include "backends/cpu/k.h"\n')
        (root / "docs/a.md").write_text("the executor (src/graph/gone.h)\n")
        (root / "src/core/dtype.h").write_text("// kernels in kernels_gone.cpp\n")
        layers, refs = layer_violations(root), reference_violations(root)
        assert len(layers) == 1 and "src/graph includes src/backends" in layers[0], layers
        assert len(refs) == 2 and any("src/graph/gone.h" in r for r in refs), refs
        assert any("kernels_gone.cpp" in r for r in refs), refs
    print("check_tree: the self-test caught a back include and two dangling names")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent)
    problems = layer_violations(root) + reference_violations(root)
    for p in problems:
        print(p)
    if problems:
        print(f"check_tree: {len(problems)} problems", file=sys.stderr)
        return 1
    print("check_tree: layers and file references hold")
    return 0


if __name__ == "__main__":
    sys.exit(main())
