"""Fake torch._subclasses.fake_tensor: only the name the
fake-tensor-parameter-subclass backport patches, imitating the shape of real
2.6.0 - 2.12.1 (a module-level `_check_for_subclass_arg(x) -> bool`), written
here, not copied. Its source differs from torch's, so its fingerprint is not
one the backport verified: it stands for a vendor build that changed the
function, which must be left alone and reported as unrecognised.
"""


def _check_for_subclass_arg(x: object) -> bool:
    # A vendor's own variant: every argument with a type of its own counts.
    return type(x).__module__ not in ("builtins", "torch")
