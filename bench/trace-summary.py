#!/usr/bin/env python3
"""Summarizes a pmpd-run --trace file: where the wall time of the run went.

A job is what the worker pool ran at once: parts that overlap in time
(on a loaded machine a late worker's part can fall outside and count as a
job of its own).  Per kind of job (category, and whether several threads or
one took part) it prints the count, the wall time, and for jobs of several
threads the straggler wait: how long, on average over the threads that took
part, a thread had finished its part before the job's last part did.
Gaps are the wall time between one job's end and the next one's start
(work the trace does not see, on the calling thread, and waking the
workers), grouped by the kinds of job on either side.

The out-of-order prefill (docs/prefill.md) runs steps of several chunks at
once, so its events run together into few "jobs"; for it, read the
second part: per thread the share of the wall time it was busy, and per
category (product, quantize, attention, elementwise) the thread time.

usage: bench/trace-summary.py TRACE.json
"""
import collections
import json
import sys


def main(path):
    with open(path) as f:
        doc = json.load(f)
    events = sorted((e for e in doc["traceEvents"] if e.get("ph") == "X"), key=lambda e: e["ts"])
    if not events:
        print("no events")
        return
    jobs, current, current_end = [], [], None
    for e in events:
        if current and e["ts"] > current_end:
            jobs.append(current)
            current, current_end = [], None
        current.append(e)
        end = e["ts"] + e["dur"]
        current_end = end if current_end is None else max(current_end, end)
    jobs.append(current)
    span = max(e["ts"] + e["dur"] for e in events) - events[0]["ts"]
    threads = 1 + max(e["tid"] for e in events)
    kinds = collections.defaultdict(lambda: [0, 0.0, 0.0])
    gaps = collections.defaultdict(lambda: [0, 0.0])
    previous = None
    for job in jobs:
        begin = min(e["ts"] for e in job)
        end = max(e["ts"] + e["dur"] for e in job)
        shared = len({e["tid"] for e in job}) > 1
        kind = "%s (%s)" % (job[0]["cat"], "threads" if shared else "1 thread")
        k = kinds[kind]
        k[0] += 1
        k[1] += end - begin
        if shared:
            per_thread = collections.defaultdict(float)
            for e in job:
                per_thread[e["tid"]] = max(per_thread[e["tid"]], e["ts"] + e["dur"])
            k[2] += sum(end - t for t in per_thread.values()) / len(per_thread)
        if previous is not None:
            g = gaps[(previous[0], kind)]
            g[0] += 1
            g[1] += begin - previous[1]
        previous = (kind, end)
    dropped = doc.get("otherData", {}).get("dropped_events", 0)
    print("%d events on %d threads, %d jobs, %.1f ms of wall time%s" %
          (len(events), threads, len(jobs), span / 1e3, ", %d events dropped" % dropped if dropped else ""))
    print("jobs:")
    for kind, (n, wall, wait) in sorted(kinds.items(), key=lambda item: -item[1][1]):
        line = "  %-24s %6d jobs %9.1f ms (%4.1f%%), mean %7.1f us" % (kind, n, wall / 1e3, 100 * wall / span, wall / n)
        if wait:
            line += ", straggler wait %4.1f%%" % (100 * wait / wall)
        print(line)
    total_gap = sum(g[1] for g in gaps.values())
    print("gaps between jobs: %.1f ms (%.1f%%); the largest:" % (total_gap / 1e3, 100 * total_gap / span))
    for (before, after), (n, t) in sorted(gaps.items(), key=lambda item: -item[1][1])[:6]:
        print("  %-24s -> %-24s %6d, %8.1f ms, mean %5.1f us" % (before, after, n, t / 1e3, t / n))
    busy = collections.defaultdict(float)
    by_category = collections.defaultdict(float)
    for e in events:
        busy[e["tid"]] += e["dur"]
        by_category[e["cat"]] += e["dur"]
    total = sum(busy.values())
    print("threads busy (share of the wall time): mean %.1f%%, least %.1f%% (thread %d), most %.1f%%" %
          (100 * total / threads / span, 100 * min(busy.get(t, 0.0) for t in range(threads)) / span,
           min(range(threads), key=lambda t: busy.get(t, 0.0)), 100 * max(busy.values()) / span))
    print("thread time by category: " + ", ".join("%s %.1f ms (%.1f%%)" % (c, t / 1e3, 100 * t / total)
                                                  for c, t in sorted(by_category.items(), key=lambda i: -i[1])))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
