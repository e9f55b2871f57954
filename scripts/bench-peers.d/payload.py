#!/usr/bin/env python3
"""Writes COUNT JSON records of exactly SIZE bytes each, one per line, from a fixed seed: the
payload every client of `scripts/bench-peers --compression` sends, so that they all compress
the same bytes. The records look like application events (ids, users, paths, amounts, a
session id, a free-text note): compressible the way real payloads are, unlike a run of 'x'.

    payload.py SIZE [COUNT] > file
"""
import json
import random
import sys

WORDS = (
    "the of and to in is was for on that with as by at from this have are be or an not which "
    "order item cart checkout payment shipped delivered returned customer account session "
    "search result page view click scroll banner promo discount coupon review rating stock "
    "warehouse region store mobile desktop tablet browser android ios linux windows mac "
    "error retry timeout latency request response cache hit miss queue worker batch"
).split()
EVENTS = ["page_view", "click", "add_to_cart", "remove_from_cart", "checkout", "purchase", "search"]
COUNTRIES = ["DE", "FR", "US", "GB", "IN", "BR", "JP", "CA", "ES", "IT", "NL", "PL"]
DEVICES = ["mobile", "desktop", "tablet"]


def record(rnd: random.Random, i: int, size: int) -> str:
    fields = {
        "id": i,
        "ts": 1_796_000_000_000 + rnd.randrange(10_000_000),
        "user": "user-%05d" % rnd.randrange(5000),
        "event": rnd.choice(EVENTS),
        "path": "/catalog/%d/item/%d" % (rnd.randrange(50), rnd.randrange(100_000)),
        "amount": round(rnd.random() * 500, 2),
        "country": rnd.choice(COUNTRIES),
        "device": rnd.choice(DEVICES),
        "session": "%016x" % rnd.getrandbits(64),
    }
    keys = list(fields)
    while True:
        head = json.dumps({k: fields[k] for k in keys}, separators=(",", ":"))[:-1]
        room = size - len(head) - len(',"note":""}')
        if room >= 0 or len(keys) == 1:
            break
        keys.pop()  # a small size keeps the first fields only
    note = []
    while len(" ".join(note)) < room:
        note.append(rnd.choice(WORDS))
    text = " ".join(note)[: max(room, 0)]
    line = head + ',"note":"' + text + '"}'
    return line[:size]


def main() -> None:
    size = int(sys.argv[1])
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
    rnd = random.Random(20261130)
    out = sys.stdout
    for i in range(count):
        out.write(record(rnd, i, size) + "\n")


if __name__ == "__main__":
    main()
