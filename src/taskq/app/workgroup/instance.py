"""A UUIDv7 for the workgroup instance (RFC 9562), as Python 3.11's ``uuid`` has none.

Version 7 so instances sort by start time in ``taskq workers list`` and in SQL.
"""

from __future__ import annotations

import os
import time
import uuid


def new_instance_id() -> str:
    """A fresh UUIDv7: 48 bits of Unix milliseconds, then version, variant and random bits."""
    millis = time.time_ns() // 1_000_000
    value = (millis & ((1 << 48) - 1)) << 80 | int.from_bytes(os.urandom(10), "big")
    value = (value & ~(0xF << 76)) | (0x7 << 76)  # version 7
    value = (value & ~(0x3 << 62)) | (0x2 << 62)  # RFC 4122 variant
    return str(uuid.UUID(int=value))
