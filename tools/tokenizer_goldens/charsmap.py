"""Builds a SentencePiece-style precompiled charsmap (a darts-clone double-array trie plus
NUL-terminated replacement strings), so the Precompiled normalizer can be tested with a blob
that the `tokenizers` package itself then interprets for the goldens.

Layout: u32 LE trie size in bytes, the trie units (u32 LE), the replacement strings.
A unit holds: label (bits 0-7), has_leaf (bit 8), offset (bits 10-31); a value unit has bit 31
set and the value (offset into the strings) in bits 0-30. From node index i with unit u, the
child labelled c sits at (i ^ offset(u)) ^ c, and the value at (i ^ offset(u)).
"""
import base64
import struct


def build(mapping):
    """mapping: {source string: replacement string} -> base64 blob."""
    strings = b""
    values = {}
    for src, dst in sorted(mapping.items()):
        values[src.encode()] = len(strings)
        strings += dst.encode() + b"\0"

    # Trie as nested dicts: byte -> child; None key holds the value.
    root = {}
    for key, val in values.items():
        node = root
        for b in key:
            node = node.setdefault(b, {})
        node[None] = val

    units = [0]
    used = {0}

    def ensure(n):
        while len(units) < n:
            units.append(0)

    def place(node, index):
        labels = sorted(k for k in node if k is not None)
        need = ([0] if None in node else []) + labels
        base = 1
        while True:
            if all((base ^ c) not in used for c in need) and (base ^ index) < (1 << 21):
                break
            base += 1
        offset = base ^ index
        has_leaf = 1 if None in node else 0
        label = units[index] & 0xFF
        units[index] = (offset << 10) | (has_leaf << 8) | label
        for c in need:
            used.add(base ^ c)
        ensure(max(base ^ c for c in need) + 1 if need else 0)
        if has_leaf:
            units[base] = (1 << 31) | node[None]
        for c in labels:
            units[base ^ c] = c
        for c in labels:
            place(node[c], base ^ c)

    place(root, 0)
    # Lookups probe base ^ byte for any byte: cover every 256-unit block a base lies in.
    ensure(((len(units) - 1) // 256 + 1) * 256)
    trie = b"".join(struct.pack("<I", u) for u in units)
    return base64.b64encode(struct.pack("<I", len(trie)) + trie + strings).decode()


# A small NFKC-like table with the quirks worth testing: multi-character sources, a source
# that is a prefix of longer graphemes, expansions and deletions.
MAPPING = {
    "\ufb01": "fi", "\ufb02": "fl", "\u2460": "1", "\u2461": "2", "\u00a0": " ",
    "\u2026": "...", "\u3000": " ", "\uff46": "f", "\uff55": "u", "\uff4c": "l",
    "e\u0301": "\u00e9", "\u00df": "ss", "\u200b": "", "\ufeff": "", "\u2122": "TM",
    "\u00bd": "1\u20442", "A": "a", "\u0130": "i\u0307", "\u212b": "\u00c5", "\t": " ",
}
