"""Run the `epub2audio` command as a user would: a separate process, real exit code and streams."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "examples" / "aesop-three-fables.epub"
# The title page (epub:type="titlepage") is skipped.
SAMPLE_TITLES = ["The Fox and the Grapes", "The Hare and the Tortoise",
                 "The North Wind and the Sun"]


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str

    def events(self, kind: str | None = None) -> list[dict]:
        found = [json.loads(line) for line in self.stdout.splitlines() if line.startswith("{")]
        return [e for e in found if kind is None or e["event"] == kind]


def epub2audio(*args, env: dict | None = None, timeout: float = 1800, memory_limit: int | None = None) -> Run:
    """`timeout` is a safety limit against hangs (a loaded machine took minutes), never a speed test.
    memory_limit: bytes of address space the command may use (RLIMIT_AS), None for no limit."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))

    proc = subprocess.run([sys.executable, "-m", "epub2audio.cli", *map(str, args)], capture_output=True,
                          text=True, env=env, timeout=timeout, preexec_fn=limit if memory_limit else None)
    return Run(proc.returncode, proc.stdout, proc.stderr)


def story_epub(folder: Path, chapters: list[tuple[str, list[str]]], name: str = "story.epub") -> Path:
    """A small EPUB 3 with one file per chapter."""
    from epub_factory import make_epub, xhtml

    docs, nav = {}, []
    for i, (title, paragraphs) in enumerate(chapters, 1):
        body = f"<h1>{title}</h1>" + "".join(f"<p>{p}</p>" for p in paragraphs)
        docs[f"c{i}.xhtml"] = xhtml(body, title)
        nav.append((title, f"c{i}.xhtml"))
    return make_epub(folder, docs, nav=nav, title="A Story", name=name,
                     metadata="<dc:creator>Ann Author</dc:creator>")


THREE_CHAPTERS = [
    ("One", ["The morning was cold. Mist lay on the river.", "Nobody spoke."]),
    ("Two", ["By noon the mist had gone. The boats came out.", "A bell rang twice."]),
    ("Three", ["Evening fell. The lamps were lit one by one.", "Then it was night."]),
]
