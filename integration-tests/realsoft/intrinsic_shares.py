#!/usr/bin/env python3
"""Shares of CPU samples ending in a method-handle intrinsic
(MethodHandle.invokeBasic, linkTo*), from collapsed stacks (async-profiler's
jfr-converter: `one.convert.Main -o collapsed --cpu REC.jfr OUT`), and how
many of them are named against their caller: linkTo* is called by direct
method handles' lambda forms (DirectMethodHandle$Holder, LambdaForm$DMH),
invokeBasic by the others.

Usage: intrinsic_shares.py FILE.collapsed...
"""
import collections
import re
import sys


def direct(frame):
    return "DirectMethodHandle" in frame or "LambdaForm$DMH" in frame


for path in sys.argv[1:]:
    total = 0
    kinds = collections.Counter()
    mismatched = 0
    for line in open(path):
        stack, count = line.rsplit(" ", 1)
        count = int(count)
        total += count
        frames = stack.split(";")
        m = re.match(r"java/lang/invoke/MethodHandle\.(invokeBasic|linkTo[A-Za-z]+)", frames[-1])
        if not m:
            continue
        kind = m.group(1)
        kinds[kind] += count
        caller = frames[-2] if len(frames) > 1 else ""
        if (kind == "invokeBasic") == direct(caller):
            mismatched += count
    share = lambda n: 100.0 * n / max(total, 1)
    print(
        "%-28s samples %6d  in intrinsics %5.2f%%  %s  named against the caller %.2f%%"
        % (path, total, share(sum(kinds.values())),
           " ".join("%s=%.2f%%" % (k, share(v)) for k, v in sorted(kinds.items())), share(mismatched))
    )
