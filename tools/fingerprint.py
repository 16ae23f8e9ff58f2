"""Fingerprint a function in torch wheels, without installing them.

usage: python tools/fingerprint.py MODULE_PATH QUALNAME WHEEL...
  e.g. python tools/fingerprint.py torch/_inductor/codegen/cpp.py \
           CppVecKernel.indirect_assert torch-2.1*.whl

Prints one line per wheel: its file name and the fingerprint that
torch_backports._fingerprint.of_function gives for the installed function.
Paste the lines of the releases you verified into the backport's module.
"""

import sys
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from torch_backports import _fingerprint  # noqa: E402


def main(path: str, qualname: str, wheels) -> int:
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            try:
                text = archive.read(path).decode("utf-8")
                print(Path(wheel).name, _fingerprint.of_file(text, qualname))
            except (KeyError, LookupError) as exc:
                print(Path(wheel).name, "absent (%s)" % exc)
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 4:
        raise SystemExit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
