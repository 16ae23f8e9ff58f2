"""Which torch release is running, as (major, minor, micro)."""

from typing import Optional

from ._backport import Release


class UnknownRelease(ValueError):
    """torch's version string could not be read as a release."""


def release_of(version: Optional[str]) -> Release:
    """Return (major, minor, micro) of a torch version string.

    Patch releases differ (2.7.0 and 2.7.1 carry different fixes), so the
    micro counts; a missing one is 0. Local, pre-release and dev parts do
    not: 2.10.0+cu128, 2.10.0+cpu, 2.10.0a0+git449b176 (source and NGC
    builds), 2.10.0.dev20260101 and 2.10.0rc1 are all (2, 10, 0).
    packaging is imported here, not at start-up, since this runs only once
    torch itself is being imported.
    """
    from packaging.version import InvalidVersion, Version

    if not isinstance(version, str):
        raise UnknownRelease("torch.__version__ is %r, not a string" % (version,))
    try:
        parsed = Version(version)
    except InvalidVersion:
        raise UnknownRelease("torch.__version__ %r is not a valid version" % version) from None
    if len(parsed.release) < 2:
        raise UnknownRelease("torch.__version__ %r has no minor release" % version)
    major, minor, micro = (parsed.release + (0,))[:3]
    return (major, minor, micro)
