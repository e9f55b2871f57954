#!/usr/bin/env python3
"""The fault schedule of scripts/chaos-peers: made from a seed, printed, and applied.

    faults.py plan SEED     print the schedule, one event per line
    faults.py run SEED      apply it to the three-broker test bed, then heal everything

One event of each kind, in an order and on brokers drawn from SEED, one after another with a
short calm between them (every client of a seed meets the same schedule):

- latency:    every proxy delays each chunk by L ms with up to L/2 ms of jitter, both ways;
- slicer:     one broker's answers cut into chunks of a few bytes, each a little late;
- reset_peer: one broker's connections reset (TCP RST) after T ms, new ones too;
- timeout:    one broker's answers stop (its requests still arrive: acknowledgements are lost)
              and the connection closes after T ms, or never (T = 0) until the toxic goes;
- cut:        one broker's proxy disabled: its connections closed, new ones refused;
- kill:       one broker SIGKILLed, and started again (same data) after the event.

Toxics go through Toxiproxy's HTTP API (TOXIPROXY_URL) on the proxies scripts/testbed names
b3-tv2-broker<i>; brokers are stopped and started with `scripts/testbed stop-broker N --kill`
and `start-broker N`. Whatever happens (an error, SIGTERM), `run` ends by removing every toxic,
enabling every proxy and starting every broker it stopped, and it prints each step with its
time since the start.
"""

import json
import os
import random
import signal
import subprocess
import sys
import time
import urllib.request

BROKERS = 3
CLUSTER = "b3-tv2"
KINDS = ["latency", "slicer", "reset_peer", "timeout", "cut", "kill"]
TESTBED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testbed")


def plan(seed):
    """The schedule of SEED: a list of events (dicts with at, kind, broker, seconds, attributes)."""
    rng = random.Random(seed)
    kinds = list(KINDS)
    rng.shuffle(kinds)
    at, events = 2.0, []
    for kind in kinds:
        broker = rng.randrange(BROKERS)
        seconds = round(rng.uniform(3.0, 6.0), 1)
        if kind == "latency":
            latency = rng.randint(20, 200)
            attributes = {"latency": latency, "jitter": latency // 2}
        elif kind == "slicer":
            size = rng.randint(8, 64)
            attributes = {"average_size": size, "size_variation": size // 2, "delay": rng.randint(10, 500)}
        elif kind == "reset_peer":
            attributes = {"timeout": rng.choice([0, rng.randint(10, 500)])}
        elif kind == "timeout":
            attributes = {"timeout": rng.choice([0, rng.randint(500, 3000)])}
        else:
            attributes = {}
        events.append({"at": round(at, 1), "kind": kind, "broker": "all" if kind == "latency" else broker,
                       "seconds": seconds, "attributes": attributes})
        at += seconds + rng.uniform(0.5, 2.0)
    return events


def describe(event):
    attributes = " ".join(f"{k}={v}" for k, v in event["attributes"].items())
    return f"t+{event['at']:.1f}s {event['kind']} broker={event['broker']} for {event['seconds']}s {attributes}".rstrip()


def api(method, path, body=None):
    url = os.environ["TOXIPROXY_URL"] + path
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        return answer.read()


def proxy(broker):
    return f"{CLUSTER}-broker{broker}"


def testbed(*args):
    subprocess.run([TESTBED, *args, "--brokers", str(BROKERS)], check=True, stdout=subprocess.DEVNULL)


class Schedule:
    """Applies events and remembers what to undo."""

    def __init__(self):
        self.killed = set()
        self.start = time.monotonic()

    def log(self, what):
        print(f"[{time.monotonic() - self.start:6.1f}s] {what}", flush=True)

    def apply(self, event):
        kind, broker = event["kind"], event["broker"]
        if kind == "cut":
            api("POST", f"/proxies/{proxy(broker)}", {"enabled": False})
        elif kind == "kill":
            self.killed.add(broker)
            testbed("stop-broker", str(broker), "--kill")
        else:
            # latency both ways; the others on the answers (downstream) only, the direction
            # where a lost or mangled byte leaves the client not knowing what was written.
            streams = ["upstream", "downstream"] if kind == "latency" else ["downstream"]
            for target in range(BROKERS) if broker == "all" else [broker]:
                for stream in streams:
                    api("POST", f"/proxies/{proxy(target)}/toxics",
                        {"name": f"chaos-{kind}-{stream}", "type": kind, "stream": stream,
                         "toxicity": 1.0, "attributes": event["attributes"]})

    def heal(self):
        """Removes every toxic, enables every proxy and starts every broker this run stopped."""
        for broker in range(BROKERS):
            toxics = json.loads(api("GET", f"/proxies/{proxy(broker)}/toxics"))
            for toxic in toxics:
                api("DELETE", f"/proxies/{proxy(broker)}/toxics/{toxic['name']}")
            api("POST", f"/proxies/{proxy(broker)}", {"enabled": True})
        for broker in sorted(self.killed):
            testbed("start-broker", str(broker))
        self.killed.clear()

    def run(self, events):
        # Each fault lasts its seconds from when it took effect, and the calm after it is kept:
        # a step that takes time itself (stopping or starting a broker) pushes the rest later.
        late = 0.0
        try:
            for event in events:
                time.sleep(max(0.0, self.start + event["at"] + late - time.monotonic()))
                self.log("apply " + describe(event))
                self.apply(event)
                time.sleep(event["seconds"])
                self.heal()
                self.log(f"healed {event['kind']}")
                planned_end = self.start + event["at"] + event["seconds"]
                late = max(late, time.monotonic() - planned_end)
        finally:
            self.heal()
            self.log("all healed")


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("plan", "run") or not sys.argv[2].isdigit():
        sys.exit("usage: faults.py plan|run SEED")
    events = plan(int(sys.argv[2]))
    if sys.argv[1] == "plan":
        for event in events:
            print(describe(event))
        return
    # SIGTERM (the caller giving up) unwinds through run's finally, which heals.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    Schedule().run(events)


if __name__ == "__main__":
    main()
