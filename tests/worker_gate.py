"""Hold a worker at a chosen segment until the test lets it go, so that a test signals or kills a
run at a known point however fast or busy the machine is. It drives the worker's `hold_on`/`gate`
fault (epub2audio/worker/faults.py): a held worker writes a ticket into the gate folder and waits
until the ticket is deleted."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

# Only a hung run ever waits this long; a slow machine never decides a test's outcome (a whole
# watcher run of the long test book took 6 min beside two busy loops on a loaded 2-core machine).
SAFETY_SECONDS = 1800


def wait_for(condition, what: str, alive=lambda: True, seconds: float = SAFETY_SECONDS):
    """Poll until condition() is truthy and return it; fail if `alive()` turns false first or
    the safety limit passes (a hang, not slowness)."""
    deadline = time.monotonic() + seconds
    while True:
        result = condition()
        if result:
            return result
        if not alive():
            raise AssertionError(f"the process ended while waiting for {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"still waiting for {what} after {seconds} s: a hang")
        time.sleep(0.02)


class Gate:
    def __init__(self, folder: Path, hold_on: str):
        folder.mkdir()
        self.folder = folder
        self.faults = f"hold_on={hold_on},gate={folder}"  # the EPUB2AUDIO_FAULTS value

    def held(self) -> list[Path]:
        """The tickets of the workers waiting at the gate now."""
        try:
            return sorted(self.folder.iterdir())
        except FileNotFoundError:
            return []

    def wait_held(self, alive=lambda: True) -> Path:
        [ticket, *_] = wait_for(self.held, "a worker to reach the gate", alive)
        return ticket

    @staticmethod
    def release(ticket: Path) -> None:
        ticket.unlink(missing_ok=True)

    def open(self) -> None:
        """Let every worker through, now and from now on."""
        parked = self.folder.with_name(self.folder.name + ".open")
        self.folder.rename(parked)  # atomic: a worker sees either the gate or no gate
        shutil.rmtree(parked)
