#!/usr/bin/env python3
"""Of the main thread's CPU samples under jffi's Foreign.invokeL4 (a Java
native method calling C that calls back into Ruby), how many keep the
native frames between it and the upcall (the next frame is
Java_com_kenai_jffi_Foreign_invokeL4), from collapsed stacks split by
thread (async-profiler's jfr-converter: `one.convert.Main -o collapsed
--cpu -t REC.jfr OUT`), and what follows it in the others.

Usage: ffi_upcall_frames.py FILE.collapsed...
"""
import collections
import sys

for path in sys.argv[1:]:
    others = collections.Counter()
    total = kept = 0
    for line in open(path):
        if not line.startswith(("[main ", "[DestroyJavaVM ")):
            continue
        stack, count = line.rsplit(" ", 1)
        count = int(count)
        frames = stack.split(";")
        at = [i for i, f in enumerate(frames) if "Foreign.invokeL4" in f]
        if not at:
            continue
        total += count
        after = frames[at[-1] + 1:]
        if after and after[0].startswith("Java_com_kenai_jffi_Foreign_invokeL4"):
            kept += count
        else:
            others[";".join(after[:2])] += count
    share = lambda n: 100.0 * n / max(total, 1)
    print("%s: %d samples under Foreign.invokeL4, %d (%.1f%%) keep the native frames, %d (%.1f%%) do not"
          % (path, total, kept, share(kept), total - kept, share(total - kept)))
    for frames, count in others.most_common(5):
        print("    %6d  %s" % (count, frames[:120]))
