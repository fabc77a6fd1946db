"""What a primary identifier must look like: an ARK, ``ark:/NAAN/name``.

Checked at the submission door, and again before storage makes a directory or a URL of one:
the ARK a worker stores under is read from the tree, where another writer may have put
anything.
"""

from __future__ import annotations

import re

ARK_SHAPE = "ark:/NAAN/name, e.g. ark:/99999/fk4abc"
_ARK = re.compile(r"ark:/\d{5,}/\S+")


def is_ark(value: object) -> bool:
    # fullmatch: a pattern ending in ``$`` would let a trailing line end through.
    return isinstance(value, str) and _ARK.fullmatch(value) is not None
