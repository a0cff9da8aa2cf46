"""The supervisor's exit codes (docs/workgroup.md, "Exit codes").

Kept apart from the worker's 0-5 so a process manager above the supervisor can tell
"the workgroup gave up on a child" from anything one worker says.
"""

from __future__ import annotations

#: Every child's last exit was 0 (a signal stopped them all cleanly).
OK = 0
#: The supervisor refused to start: bad file, unknown key, bad setting, database unreachable.
REFUSED = 1
#: A child crashed more often than the burst limit allows; the others were stopped.
GAVE_UP = 6
#: Stopped by a signal, but some child exited non-zero or was SIGKILLed after its grace.
UNCLEAN_STOP = 7
