#!/usr/bin/env python3
"""The garbled half of the fluency judge's calibration set (docs/lab.md, "The fluency judge").

  python3 tools/judge/make_garbled.py > tests/fixtures/judge/garbled.txt

Each line of tests/fixtures/judge/fluent.txt is broken the ways a broken sharded run breaks
text, one way per line in turn (seeded, so the output is the same every time):
  shuffled   the sentence's words in a random order;
  scrambled  each word's letters in a random order;
  loop       a short phrase of it repeated (a decode stuck in a loop);
  repeated   one of its words over and over;
  fragments  random pieces of its words glued together (wrong token ids);
  mixed      its words interleaved with random punctuation and digits.
"""
import pathlib
import random

FLUENT = pathlib.Path(__file__).resolve().parents[2] / "tests/fixtures/judge/fluent.txt"


def shuffled(words, rng):
    w = words[:]
    rng.shuffle(w)
    return " ".join(w)


def scrambled(words, rng):
    out = []
    for w in words:
        letters = list(w)
        rng.shuffle(letters)
        out.append("".join(letters))
    return " ".join(out)


def loop(words, rng):
    start = rng.randrange(max(1, len(words) - 3))
    phrase = " ".join(words[start:start + 3])
    return " ".join([phrase] * 8)


def repeated(words, rng):
    return " ".join([rng.choice(words)] * 20)


def fragments(words, rng):
    pieces = []
    for w in words:
        a = rng.randrange(len(w))
        pieces.append(w[a:a + rng.randint(1, 3)])
    rng.shuffle(pieces)
    return "".join(p + ("" if rng.random() < 0.6 else " ") for p in pieces)


def mixed(words, rng):
    junk = list("#%&*+/<=>@[]^_{|}~0123456789")
    out = []
    for w in words:
        out.append(w if rng.random() < 0.5 else "".join(rng.choice(junk) for _ in range(3)))
    rng.shuffle(out)
    return " ".join(out)


def main():
    rng = random.Random(17)
    ways = [shuffled, scrambled, loop, repeated, fragments, mixed]
    for i, line in enumerate(FLUENT.read_text().splitlines()):
        words = line.rstrip(".").split()
        print(ways[i % len(ways)](words, rng))


if __name__ == "__main__":
    main()
