"""The file system's limit on one name, which every name built from a depositor's value
meets: a file's own name with the suffix it is downloaded under, an ARK escaped for storage.
"""

from __future__ import annotations

# The usual limit of Linux file systems (ext4, xfs) on one name, in bytes of the encoded name:
# beyond it the kernel answers ENAMETOOLONG, which would reach a librarian as an internal
# error.
NAME_MAX = 255
