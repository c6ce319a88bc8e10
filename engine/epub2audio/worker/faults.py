"""Fault injection for the engine's own tests, driven by EPUB2AUDIO_FAULTS (never set in normal use).

It lets a test make a worker crash, hang, fail or grow in memory at a chosen request, to prove the
supervisor's recovery paths with a real process. Format: comma-separated `kind=value`, e.g.
`crash_on=Chapter two,leak_mb=50,marker=/tmp/x`. `marker` names a file whose existence arms the
one-shot faults (crash_on, hang_on, fail_on), which delete it when they fire: so "crash once" is
expressible across respawns.

`hold_on=TEXT,gate=DIR` holds a request at a point the test chooses, whatever the machine's speed:
while DIR exists, a request whose text contains TEXT writes DIR/<worker pid> (holding the text) and
waits until the test deletes that file. Deleting DIR opens the gate for good.

`cap_over=N` plays a voice with a length cap: a request whose text is longer than N characters
raises LengthCapReached, as CosyVoice3 does when its speech would be cut (every time: it is the
text that is too long, not bad luck).

`device_leak_mb=N` plays a worker whose GPU memory grows: it reports N MB more accelerator memory
after each of its requests, through the protocol, as a CUDA worker's growing cache would.
`device_name=NAME` plays a worker on a GPU called NAME (what `--workers auto` measures per).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Faults:
    crash_on: str = ""  # os._exit when a request's text contains this
    hang_on: str = ""  # sleep forever on such a request
    fail_on: str = ""  # raise on such a request (fails the request, worker survives)
    fail_first: bool = False  # the first request of every worker raises
    leak_mb: int = 0  # keep this many MB more after every request
    marker: str = ""
    hold_on: str = ""  # wait at the gate on such a request
    gate: str = ""
    cap_over: int = 0  # LengthCapReached for a text longer than this many characters; 0 = never
    device_leak_mb: int = 0  # report this many MB more accelerator memory after every request
    device_name: str = ""  # report this GPU name (a CPU voice then looks like a GPU one)
    _requests: int = 0
    _leak: list = field(default_factory=list)

    @classmethod
    def from_env(cls) -> "Faults":
        spec = os.environ.get("EPUB2AUDIO_FAULTS", "")
        faults = cls()
        for item in filter(None, spec.split(",")):
            key, _, value = item.partition("=")
            if key in ("leak_mb", "cap_over", "device_leak_mb"):
                setattr(faults, key, int(value))
            elif key == "fail_first":
                faults.fail_first = value not in ("", "0")
            else:
                setattr(faults, key, value)
        return faults

    def _armed(self) -> bool:
        if not self.marker:
            return True
        try:
            os.unlink(self.marker)
            return True
        except FileNotFoundError:
            return False

    def before(self, text: str) -> None:
        self._requests += 1
        raise_later = self.fail_first and self._requests == 1
        if self.crash_on and self.crash_on in text and self._armed():
            os._exit(9)
        if self.hang_on and self.hang_on in text and self._armed():
            time.sleep(3600)
        if self.cap_over and len(text) > self.cap_over:  # before the gate: only a piece short enough waits
            from ..voices.base import LengthCapReached

            raise LengthCapReached(f"injected length cap: the text has more than {self.cap_over} characters")
        if self.hold_on and self.hold_on in text and self.gate:
            _wait_at_gate(Path(self.gate), text)
        if raise_later or (self.fail_on and self.fail_on in text and self._armed()):
            raise RuntimeError("injected failure")

    def device_bytes(self) -> int:
        """The accelerator memory this fault adds to the worker's report so far."""
        return self.device_leak_mb * 1024 * 1024 * self._requests

    def after(self) -> None:
        if self.leak_mb:
            block = bytearray(self.leak_mb * 1024 * 1024)
            block[:: 4096] = b"x" * len(block[:: 4096])  # touch every page so it is really private
            self._leak.append(block)


def _wait_at_gate(gate: Path, text: str) -> None:
    """Announce this worker at the gate and wait until the test lets it through."""
    ticket = gate / str(os.getpid())
    try:
        ticket.write_text(text, encoding="utf-8")
    except FileNotFoundError:  # the gate is open (gone)
        return
    while ticket.exists():
        time.sleep(0.01)
