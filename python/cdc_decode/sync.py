"""``python -m cdc_decode.sync …``: the same as ``cdc-decode sync …`` (docs/sync.md), for
``spark-submit`` of a module."""

import sys

if __name__ == "__main__":
    from .cli import main

    sys.exit(main(["sync", *sys.argv[1:]]))
