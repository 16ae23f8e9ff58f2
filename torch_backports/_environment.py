"""Facts about this environment that need no torch import."""

from __future__ import annotations

import os
import site
import sys
from typing import List, Optional

import torch_backports

STARTUP_FILES = ("torch_backports.pth", "torch_backports.start")


def torch_version() -> Optional[str]:
    """The installed torch's version from its metadata, without importing it.

    A torch without metadata (a source tree on sys.path) gives "unknown";
    no importable torch at all gives None.
    """
    from importlib import metadata
    from importlib.util import find_spec

    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "unknown" if find_spec("torch") is not None else None


def site_directories() -> List[str]:
    """The directories whose .pth files site processes for this interpreter."""
    found = []
    try:
        found.extend(site.getsitepackages())
    except AttributeError:  # very old virtualenv's site.py
        pass
    if site.ENABLE_USER_SITE:
        found.append(site.getusersitepackages())
    return [d for d in dict.fromkeys(found) if os.path.isdir(d)]


def startup_files() -> List[str]:
    """Our startup files that site will process at the next interpreter start."""
    return [
        os.path.join(directory, name)
        for directory in site_directories()
        for name in STARTUP_FILES
        if os.path.isfile(os.path.join(directory, name))
    ]


def package_location() -> str:
    return os.path.dirname(os.path.abspath(torch_backports.__file__))


def interpreter() -> str:
    return "%s %s" % (sys.executable, sys.version.split()[0])
