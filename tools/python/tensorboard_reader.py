"""TensorBoard's own readers of a logging.tensorboard directory, for the tests: the
`tensorboard` package from PyPI (pinned in tools/python/requirements.txt), with their
default purge of what a restarted run (SessionLog START) superseded.

- "scalars": event_accumulator.EventAccumulator, the classic Python reader.
- "server_scalars": plugin_event_accumulator.EventAccumulator, the loader of the
  TensorBoard server itself (`tensorboard --logdir`, Python loading), which stores
  scalars as tensors and takes only a second START in a run as a restart.

Usage (run with scripts/setup's virtualenv python):
  tensorboard_reader.py DIR
prints one JSON object:
  {"files": [event file names, sorted],
   "scalars": {tag: [[step, value], ...] in the order the reader keeps them},
   "server_scalars": {the same, from the server's loader}}

Exit status: 0 ok, 2 the reader itself could not run (bad arguments, no directory).
"""
import json
import os
import sys


def classic_scalars(directory):
    from tensorboard.backend.event_processing import event_accumulator as ea

    # size_guidance 0: keep every point (the default samples down per tag).
    accumulator = ea.EventAccumulator(directory, size_guidance={ea.SCALARS: 0})
    accumulator.Reload()
    return {
        tag: [[event.step, event.value] for event in accumulator.Scalars(tag)]
        for tag in accumulator.Tags()[ea.SCALARS]
    }


def server_scalars(directory):
    from tensorboard.backend.event_processing import plugin_event_accumulator as pea
    from tensorboard.util import tensor_util

    accumulator = pea.EventAccumulator(directory, size_guidance={pea.TENSORS: 0})
    accumulator.Reload()
    return {
        tag: [
            [event.step, float(tensor_util.make_ndarray(event.tensor_proto).item())]
            for event in accumulator.Tensors(tag)
        ]
        for tag in accumulator.Tags()[pea.TENSORS]
    }


def main(argv):
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        print(__doc__, file=sys.stderr)
        return 2
    directory = argv[1]
    files = sorted(name for name in os.listdir(directory) if "tfevents" in name)
    print(
        json.dumps(
            {
                "files": files,
                "scalars": classic_scalars(directory),
                "server_scalars": server_scalars(directory),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
