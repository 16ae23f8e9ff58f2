"""Which torch release is running, as (major, minor, micro)."""

from __future__ import annotations

import re
from typing import Optional

from ._backport import Release

# PEP 440's public version with an optional local label, as torch builds
# spell it: 2.10.0, 2.10.0+cu128, 2.10.0a0+git449b176, 2.10.0.dev20260101,
# 2.10.0rc1, 2.10.0.post1. Only the release numbers are captured.
#
# A regular expression, not packaging.version: this runs while torch is
# being imported, where `re` is loaded already, and packaging.version
# costs ~9.9 M instructions to import (callgrind, Python 3.11,
# 2026-12-03), 0.2 % of `import torch` on its own against a 1 % budget
# for everything torch-backports adds there. Validity matters less than
# the release: a version no build prints is refused, not guessed.
#
# Spelled out in both cases instead of re.IGNORECASE, which doubles the
# cost of compiling it (2.7 against 1.4 ms here). Compiled only for a
# version _plain_release() does not read, which a release build never is.
_PATTERN = (
    r"[vV]?(\d+)\.(\d+)(?:\.(\d+))?(?:\.\d+)*"  # release; parts past micro ignored
    r"(?:[-_.]?(?:[aA]|[bB]|[rR][cC])\d*)?"  # pre-release
    r"(?:[-_.]?[pP][oO][sS][tT]\d*)?"
    r"(?:[-_.]?[dD][eE][vV]\d*)?"
    r"(?:\+[a-zA-Z0-9]+(?:[-_.][a-zA-Z0-9]+)*)?"  # local label
)
_compiled: "list[re.Pattern[str]]" = []


def _version() -> "re.Pattern[str]":
    if not _compiled:
        _compiled.append(re.compile(_PATTERN))
    return _compiled[0]


def _plain_release(version: str) -> Optional[Release]:
    """The release of a version spelled as release builds spell it (2.13.0,
    2.13.0+cpu, 2.10.0+cu128), read without the regular expression, whose
    compilation costs 1.4 M instructions inside `import torch`; None for
    any other spelling, which the expression then reads."""
    public, plus, local = version.partition("+")
    parts = public.split(".")
    if len(parts) < 2 or not all(part.isascii() and part.isdigit() for part in parts):
        return None
    if plus and not all(piece.isascii() and piece.isalnum()
                        for piece in local.replace("-", ".").replace("_", ".").split(".")):
        return None
    return (int(parts[0]), int(parts[1]), int(parts[2]) if len(parts) > 2 else 0)


def _pre_release(version: str) -> Optional[Release]:
    """The release of a pre-release, dev or source build spelled as torch
    spells them (2.13.0a0+git8145d63, 2.15.0.dev20260901, 2.15.0rc1), read
    without the regular expression, as _plain_release reads release builds;
    None for any other spelling."""
    public, plus, local = version.partition("+")
    stem, dot, dev = public.rpartition(".dev")
    if dot:
        if not (dev.isascii() and dev.isdigit()):
            return None
        public = stem
    parts = public.split(".")
    last = parts[-1]
    for mark in ("rc", "a", "b"):
        number, found, serial = last.partition(mark)
        if found:
            if not (serial.isascii() and serial.isdigit()):
                return None
            parts[-1] = number
            break
    plain = _plain_release(".".join(parts) + plus + local)
    return plain if len(parts) <= 3 else None


class UnknownRelease(ValueError):
    """torch's version string could not be read as a release."""


def release_of(version: Optional[str]) -> Release:
    """Return (major, minor, micro) of a torch version string.

    Patch releases differ (2.7.0 and 2.7.1 carry different fixes), so the
    micro counts; a missing one is 0. Local, pre-release and dev parts do
    not: 2.10.0+cu128, 2.10.0+cpu, 2.10.0a0+git449b176 (source and NGC
    builds), 2.10.0.dev20260101 and 2.10.0rc1 are all (2, 10, 0).
    """
    if not isinstance(version, str):
        raise UnknownRelease("torch.__version__ is %r, not a string" % (version,))
    plain = _plain_release(version)
    if plain is None:
        plain = _pre_release(version)
    if plain is not None:
        return plain
    match = _version().fullmatch(version.strip())
    if match is None:
        raise UnknownRelease("torch.__version__ %r is not a valid version" % version)
    major, minor, micro = match.groups()
    return (int(major), int(minor), int(micro or 0))


def judged_by_code(version: Optional[str]) -> bool:
    """Whether `version` is a build whose release number may be wrong about
    the fixes of that very release: a pre-release (2.13.0a0, 2.13.0rc1), a
    dev build (2.15.0.dev20260901) or a source build (2.13.0+git8145d63,
    NGC's 2.13.0a0+8145d630e8). Such a build may have been cut before a fix
    of its release landed, so the fingerprint of its code decides, not the
    version. Release builds, local labels such as +cu128 and .post
    releases included, are judged by their release."""
    if not isinstance(version, str):
        return False
    public, _, local = version.strip().lower().partition("+")
    public = public.replace("post", "")
    return any(mark in public for mark in ("a", "b", "rc", "dev")) or local.startswith("git")
