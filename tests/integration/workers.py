"""A user program with worker processes: `python workers.py spawn|forkserver`.
It never imports torch_backports; each worker reports whether the dumps it
sees is the backport's wrapper."""

import json
import multiprocessing
import sys


def dumps_is_patched(_):
    import torch._inductor.codecache as codecache

    return "FunctionWrapper" in type(codecache.FxGraphCachePickler.__dict__["dumps"]).__name__


if __name__ == "__main__":
    with multiprocessing.get_context(sys.argv[1]).Pool(2) as pool:
        print(json.dumps(pool.map(dumps_is_patched, range(2))))
