#!/usr/bin/env python3
"""Writes the golden of bitsandbytes' dynamic quantisation maps for zerofit's 8-bit AdamW (optim/dynamic_map.h).

The maps are computed with torch exactly as bitsandbytes' functional.create_dynamic_map computes them (its
source, transcribed below: fp32 torch.linspace midpoints per decade, the Python float products, torch.tensor's
rounding to fp32, the sort), for signed=True (AdamW's first moment) and signed=False (the second), and written
as the fp32 bit patterns of their 256 codes:
  {"signed": [uint32 x 256], "unsigned": [uint32 x 256], "torch": "<version>"}
DynamicMapTest.MapsEqualTorchsGolden compares optim::MakeDynamicMap with it bit for bit. Needs torch only (not
bitsandbytes); run it where torch is (the GPU machine):

  python3 scripts/make_dynamic_map_golden.py --out tests/optim/golden/dynamic_map.json
"""
import argparse
import json
import os
import struct

import torch


def create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8):
    # bitsandbytes' functional.create_dynamic_map (bitsandbytes-foundation/bitsandbytes, 2026), as it is.
    data = []
    non_sign_bits = total_bits - 1
    additional_items = 2 ** (non_sign_bits - max_exponent_bits) - 1
    for i in range(max_exponent_bits):
        fraction_items = int(
            2 ** (i + non_sign_bits - max_exponent_bits) + 1
            if signed
            else 2 ** (i + non_sign_bits - max_exponent_bits + 1) + 1,
        )
        boundaries = torch.linspace(0.1, 1, fraction_items, dtype=torch.float32)
        means = (boundaries[:-1] + boundaries[1:]) / 2.0
        data += ((10 ** (-(max_exponent_bits - 1) + i)) * means).tolist()
        if signed:
            data += (-(10 ** (-(max_exponent_bits - 1) + i)) * means).tolist()
    if additional_items > 0:
        boundaries = torch.linspace(0.1, 1, additional_items + 1, dtype=torch.float32)
        means = (boundaries[:-1] + boundaries[1:]) / 2.0
        data += ((10 ** (-(max_exponent_bits - 1) + i)) * means).tolist()
        if signed:
            data += (-(10 ** (-(max_exponent_bits - 1) + i)) * means).tolist()
    data.append(0)
    data.append(1.0)
    assert len(data) == 2**total_bits
    for _ in range(256 - len(data)):
        data.append(0)
    data.sort()
    return torch.tensor(data, dtype=torch.float32)


def bits(t):
    return [struct.unpack("<I", struct.pack("<f", x))[0] for x in t.tolist()]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="the golden JSON to write")
    args = ap.parse_args()
    golden = {"signed": bits(create_dynamic_map(True)), "unsigned": bits(create_dynamic_map(False)),
              "torch": torch.__version__}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(golden, f)
        f.write("\n")


if __name__ == "__main__":
    main()
