#!/usr/bin/env python3
"""Every #include between the tree's top-level folders points down (issue 31, ../shared/ARCHITECTURE.md).

Each folder may include the folders its row below names, and what those may include in turn (the closure);
an include of any other project folder is a wrong-way arrow and fails, listing file, line and target. The
table itself must have no cycle. An arrow that still has to be turned may be listed as KNOWN, with its reason
(issue 31 turned the last one; the list is empty); the check fails as well when a KNOWN arrow is no longer
there, so the list only shrinks.

  check_layering.py <repository root>
"""
import os
import re
import sys

EVERYTHING = {"core", "optim", "device", "kernels", "comm", "offload", "sharding", "planner", "jobspec", "text", "launch",
              "proto", "client", "coordinator", "worker"}
# folder -> folders it may include directly (generated protobuf code, "zerofit/v1/...", counts as proto).
ALLOWED = {
    "core": set(),
    # AdamW's hyper-parameters, arithmetic and CPU kernels: the host device runs them, the CUDA kernel takes
    # their constants, the offload pipeline runs them by tile.
    "optim": {"core"},
    "device": {"core", "optim"},
    # The fused model kernels (RMSNorm, SwiGLU) on flat buffers; worker/torch's model calls them.
    "kernels": {"core"},
    "comm": {"core", "device"},
    # offload/offload_shard_updater.h implements the engine's sharding::OffloadUpdater interface.
    "offload": {"core", "device", "optim", "sharding"},
    "sharding": {"core", "device", "comm", "optim"},
    "planner": {"core"},
    # The step scheduler lives here: the coordinator hands its assignments out, zerofit_train_prefs follows it.
    # A GRPO spec's regex reward is compiled with text::Regex when the spec is read, so a bad pattern is
    # refused at submit with its line, not on every rank at start.
    "jobspec": {"core", "planner", "text"},
    "text": {"core"},
    "launch": {"jobspec"},
    "proto": set(),
    # The one coordinator client; its rendezvous implements comm's Rendezvous interface.
    "client": {"proto", "comm", "core"},
    "coordinator": {"core", "proto", "jobspec"},
    # The rank's environment (launch/) is read by the loop. worker/torch/ composes the ZeRO-2 engine with its
    # offload updater (offload::OffloadShardUpdater::Create into Zero2Devices::offload_updater).
    "worker": {"client", "jobspec", "text", "sharding", "offload", "launch", "kernels"},
    "cli": EVERYTHING,
    "bench": EVERYTHING,
}
# Arrows that still point the wrong way, with why; issue 31 removes them. None are left: new ones are turned,
# not listed.
KNOWN = {}
SOURCES = (".h", ".cc", ".cu", ".cuh", ".hpp", ".cpp")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([A-Za-z0-9_]+)/')


def closure(folder, seen=None):
    seen = set() if seen is None else seen
    for dep in ALLOWED[folder]:
        if dep not in seen:
            seen.add(dep)
            closure(dep, seen)
    return seen


def scan(root):
    """Yields (folder, path, line number, included folder, the line) for every project include."""
    for folder in ALLOWED:
        top = os.path.join(root, folder)
        for dirpath, _, files in os.walk(top):
            for name in sorted(files):
                if not name.endswith(SOURCES):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if m:
                            target = "proto" if m.group(1) == "zerofit" else m.group(1)
                            yield folder, os.path.relpath(path, root), number, target, line.strip()


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    reach = {f: closure(f) for f in ALLOWED}
    cyclic = sorted(f for f in ALLOWED if f in reach[f])  # a folder that reaches itself
    if cyclic:
        print("layering: the ALLOWED table has a cycle through " + ", ".join(cyclic))
        return 1
    wrong, used_known = [], set()
    for folder, path, number, target, text in scan(root):
        if target == folder or target not in ALLOWED:
            # Within a folder; or not a project folder (absl/, nlohmann/, grpcpp/ ...). worker/ (no LibTorch)
            # must not include worker/torch/ (the only LibTorch code).
            if folder == "worker" and "/torch/" not in path and '"worker/torch/' in text:
                wrong.append(f"{path}:{number}: worker/ outside worker/torch/ includes worker/torch/: {text}")
            continue
        if target in reach[folder]:
            continue
        if (folder, target) in KNOWN:
            used_known.add((folder, target))
            continue
        wrong.append(f"{path}:{number}: {folder}/ may not include {target}/: {text}")
    stale = [f"{a}/ -> {b}/" for (a, b) in KNOWN if (a, b) not in used_known]
    for line in wrong:
        print(line)
    if stale:
        print("layering: KNOWN lists arrows that are gone (remove them): " + ", ".join(stale))
    if wrong or stale:
        return 1
    left = ": " + ", ".join(f"{a}/ -> {b}/" for (a, b) in sorted(used_known)) if used_known else ""
    print(f"layering: ok ({len(ALLOWED)} folders; {len(used_known)} known wrong-way arrows left{left})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
