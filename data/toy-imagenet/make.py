#!/usr/bin/env python3
"""A tiny ImageNet-like image set, generated, packed with `frugal im2rec`.

Writes OUT/{train,val}/classK/N.bmp colour images (standard library only) and
packs each split into OUT/train.{rec,idx} and OUT/val.{rec,idx} with
`frugal im2rec` (JPEG, as ImageNet's files), ready for
models/resnet/resnet_imagenet.prototxt:

  python3 data/toy-imagenet/make.py --frugal build/frugal --out data/toy-imagenet
  build/frugal train --config models/resnet/resnet_imagenet.prototxt \\
      --define train=data/toy-imagenet/train --define val=data/toy-imagenet/val \\
      --define depth=50 --define size=64 --define classes=4 --define batch=8 --max-iters 5

Class k is a random-coloured disc in quadrant k on a noisy background, so
that a network can learn it, and every image is different (the generator is
seeded: the same arguments give the same files). Images are rectangular, as
real photographs, so the iterator's resize and crops have work to do.
"""
import argparse
import os
import random
import struct
import subprocess
import sys


def image(cls, rng, width, height):
    """BMP bytes (24-bit, bottom-up rows padded to 4 bytes) of one image of class cls."""
    cx = (0.25 if cls % 2 == 0 else 0.75) * width
    cy = (0.25 if cls // 2 % 2 == 0 else 0.75) * height
    r2 = (min(width, height) * rng.uniform(0.12, 0.2)) ** 2
    colour = [rng.randrange(128, 256) for _ in range(3)]  # B, G, R
    row_bytes = (3 * width + 3) // 4 * 4
    pixels = bytearray()
    for y in reversed(range(height)):
        row = bytearray()
        for x in range(width):
            if (x - cx) ** 2 + (y - cy) ** 2 < r2:
                row += bytes(min(255, c + rng.randrange(20)) for c in colour)
            else:
                row += bytes(rng.randrange(70) for _ in range(3))
        pixels += row + bytes(row_bytes - len(row))
    header = b"BM" + struct.pack("<IHHI", 54 + len(pixels), 0, 0, 54)
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 24, 0, len(pixels), 2835, 2835, 0, 0)
    return header + info + bytes(pixels)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--frugal", default="build/frugal", help="the frugal binary (for im2rec)")
    p.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    p.add_argument("--classes", type=int, default=4, help="at most 4 (one quadrant each)")
    p.add_argument("--train", type=int, default=16, help="training images per class")
    p.add_argument("--val", type=int, default=4, help="validation images per class")
    p.add_argument("--width", type=int, default=80)
    p.add_argument("--height", type=int, default=64)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    if not 1 <= a.classes <= 4:
        sys.exit("make.py: --classes must be in 1..4, got %d" % a.classes)
    rng = random.Random(a.seed)
    for split, count in (("train", a.train), ("val", a.val)):
        for cls in range(a.classes):
            folder = os.path.join(a.out, split, "class%d" % cls)
            os.makedirs(folder, exist_ok=True)
            for i in range(count):
                with open(os.path.join(folder, "%d.bmp" % i), "wb") as f:
                    f.write(image(cls, rng, a.width, a.height))
        cmd = [a.frugal, "im2rec", "--input", os.path.join(a.out, split),
               "--output", os.path.join(a.out, split), "--encoding", ".jpg", "--quality", "90"]
        subprocess.run(cmd, check=True)
    print("make.py: %s/{train,val}.{rec,idx}: %d classes, %d + %d images per class"
          % (a.out, a.classes, a.train, a.val))


if __name__ == "__main__":
    main()
