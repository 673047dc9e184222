#!/usr/bin/env python3
"""Names the program's own frames in CUDA allocation reports (worker/torch/train/cuda_allocations.h).

A program linked without -rdynamic exports no symbols, so a report writes its frames as
"?  PROGRAM+0xOFFSET". This asks addr2line (binutils) for each offset's function and source line, once per
report, and rewrites the report in place: "FUNCTION (FILE:LINE)  PROGRAM+0xOFFSET".

  symbolize_allocation_report.py PROGRAM REPORT [REPORT ...]
"""
import os
import re
import subprocess
import sys


def symbolize(program, report):
    base = os.path.basename(program)
    pattern = re.compile(r"\?  %s\+0x([0-9a-f]+)" % re.escape(base))
    text = open(report).read()
    offsets = sorted(set(pattern.findall(text)))
    if not offsets:
        return 0
    # A recorded frame is a return address: one byte back lies inside the call instruction.
    query = ["%x" % (int(o, 16) - 1) for o in offsets]
    lines = subprocess.run(["addr2line", "-f", "-C", "-e", program] + query, capture_output=True, text=True,
                           check=True).stdout.split("\n")
    names = {}
    for i, offset in enumerate(offsets):
        function, where = lines[2 * i], lines[2 * i + 1]
        names[offset] = "%s (%s)" % (function, os.path.basename(where)) if function != "??" else "?"
    text = pattern.sub(lambda m: "%s  %s+0x%s" % (names[m.group(1)], base, m.group(1)), text)
    with open(report, "w") as f:
        f.write(text)
    return len(offsets)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    for report in sys.argv[2:]:
        print("%s: %d offsets named" % (report, symbolize(sys.argv[1], report)))


if __name__ == "__main__":
    main()
