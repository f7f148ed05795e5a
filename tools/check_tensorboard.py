#!/usr/bin/env python3
"""Reads a tfevents file written by frugal with TensorBoard's own loaders and
prints its scalars, to show that TensorBoard accepts the file.

Needs the `tensorboard` Python package (pip install tensorboard); not part of
CI. Usage: tools/check_tensorboard.py EVENT_FILE_OR_DIR
Exits 1 if the file cannot be read or holds no scalars.
"""
import os
import sys

from tensorboard.backend.event_processing import event_accumulator, event_file_loader
from tensorboard.util import tensor_util


def event_files(path):
    if os.path.isfile(path):
        return [path]
    return sorted(os.path.join(path, f) for f in os.listdir(path) if "tfevents" in f)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    files = event_files(sys.argv[1])
    if not files:
        sys.exit(f"no tfevents file at {sys.argv[1]}")
    for path in files:
        # The raw events, through TensorBoard's record reader (which checks
        # both CRCs of every record) and its proto migration.
        print(f"{path}:")
        for event in event_file_loader.EventFileLoader(path).Load():
            if event.HasField("file_version"):
                print(f"  file_version {event.file_version!r}")
            for v in event.summary.value:
                value = v.simple_value if v.HasField("simple_value") else tensor_util.make_ndarray(v.tensor).item()
                print(f"  step {event.step:6d}  {v.tag} = {value:g}")
    # The same through the accumulator the TensorBoard UI uses.
    acc = event_accumulator.EventAccumulator(sys.argv[1])
    acc.Reload()
    tags = acc.Tags()["scalars"]
    if not tags:
        sys.exit("TensorBoard found no scalars")
    for tag in tags:
        points = ", ".join(f"{s.step}:{s.value:g}" for s in acc.Scalars(tag))
        print(f"scalars {tag}: {points}")


if __name__ == "__main__":
    main()
