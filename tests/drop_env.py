"""Delete the running tox env after its tests, when asked to.

The CUDA builds of torch 2.9.1 and 2.10.0 make envs of ~7 GB each, on top
of pip's ~4 GB download. Kept side by side they filled a CI machine's disk
(stop 5: "No space left on device" while installing torch 2.9.1), so CI
sets TORCH_BACKPORTS_DROP_TOX_ENVS=1 and each torch env removes itself once
its tests have run. Without the variable nothing is deleted, so a developer
keeps the envs and tox reuses them. tox runs this as commands_post, which
runs whether the tests passed or failed.
"""

import os
import shutil
import sys
from pathlib import Path


def main() -> int:
    if os.environ.get("TORCH_BACKPORTS_DROP_TOX_ENVS") != "1":
        return 0
    prefix = Path(sys.prefix)
    # Only ever a virtual environment: never the interpreter tox was given.
    if sys.prefix == sys.base_prefix or not (prefix / "pyvenv.cfg").is_file():
        print("drop_env: %s is not a virtual environment; kept" % prefix)
        return 0
    shutil.rmtree(prefix)
    print("drop_env: removed %s" % prefix)
    return 0


if __name__ == "__main__":
    sys.exit(main())
