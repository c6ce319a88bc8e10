"""Audio checks: the M4B decoded once into 10 ms energy frames, then near-silent segments,
segments far shorter or longer than their text, segments of a voice that looped, and long
silences inside a chapter."""

from __future__ import annotations

import math
import subprocess
from pathlib import Path

import numpy as np

from ..ffmpeg import ffmpeg_exe
from .job import _Job
from .report import Problem, VerifyInputError, _clock, _quote
from .words import _alnum


# A segment's speech (10 ms frames) at or below this RMS is near-silent. Piper speech is about
# -20 dBFS RMS; digital silence stays at -inf through the AAC encode.
SILENT_SEGMENT_DBFS = -45.0
# Per-frame level under which a 10 ms frame counts as silence (gaps, voiced extent).
SILENCE_FRAME_DBFS = -50.0
# A silence inside a chapter longer than this is unexpected: the longest planned pause is 2 s
# (chapter end) plus the voice's own lead-in/out of ~0.3 s.
LONG_SILENCE_SECONDS = 3.0
# Pace, in letters+digits a second of voiced audio. Piper joe reads ~15/s (median); a segment cut to
# 10 % reads >100/s. A segment is "too short for its text" above max(25, min(40, 2.5 x median)).
PACE_FAST_FACTOR = 2.5
PACE_FAST_FLOOR = 25.0
PACE_FAST_CEILING = 40.0
PACE_MIN_CHARS = 8  # shorter texts ("One") say too little about pace
# "Far longer than its text" (a voice that babbles or loops): below median / 3, texts of >= 40 chars.
PACE_SLOW_FACTOR = 1 / 3
PACE_SLOW_MIN_CHARS = 40
# Repetition (a voice that loops). Only voices that generate their audio step by step from what
# they generated before can loop: CosyVoice3 and Qwen3-TTS (their length cap re-splits a runaway,
# but a loop that stops before the cap, or one kept under the "upstream" cap, would reach the M4B).
# Two shapes, on the 10 ms level envelope (dB, floored at -60) of a segment's voiced extent:
# - one steady sound: a stretch of REPEAT_STEADY_SECONDS whose level varies by less than
#   REPEAT_STEADY_DB (standard deviation). Speech never holds still that long: joe reading prose
#   varies by 8-17 dB in every 2 s stretch; a random-weight model's noise by 0.1 dB.
# - the same sound over and over: the envelope correlates with itself shifted by a lag of
#   REPEAT_MIN_LAG_SECONDS or more, at least 2.5 times within the segment, by REPEAT_MIN_R or
#   more. A phrase pasted 4 or 6 times over gives 0.99; joe's prose 0.1-0.3, and even text that
#   repeats itself ("No, no, no, no, no! I will not go, I will not go, ...") 0.83.
LOOPING_VOICES = ("cosyvoice3:", "qwen3:")
REPEAT_STEADY_SECONDS = 1.5
REPEAT_STEADY_DB = 3.0
REPEAT_MIN_LAG_SECONDS = 0.25
REPEAT_MIN_R = 0.95
# Text coverage: a run of at least this many book words missing from the plan is a drop.
DROP_MIN_WORDS = 1

FRAME_SECONDS = 0.01



def _frame_len(sample_rate: int) -> int:
    return max(1, int(sample_rate * FRAME_SECONDS))


def _decode_frames(path: Path, sample_rate: int) -> tuple[np.ndarray, int]:
    """Mean square (of full scale) per frame of the decoded audio, and the decoded sample count."""
    frame = _frame_len(sample_rate)
    cmd = [ffmpeg_exe(), "-v", "error", "-i", str(path), "-map", "0:a:0", "-f", "s16le", "-ac", "1",
           "-ar", str(sample_rate), "-"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    parts, carry, total = [], np.zeros(0, dtype=np.float32), 0
    block = frame * 2 * 4096
    while raw := proc.stdout.read(block):
        if len(raw) % 2:
            raw += proc.stdout.read(1)
        x = np.frombuffer(raw, dtype="<i2").astype(np.float32) / 32768.0
        total += len(x)
        x = np.concatenate([carry, x])
        whole = len(x) // frame * frame
        if whole:
            parts.append((x[:whole].reshape(-1, frame) ** 2).mean(axis=1))
        carry = x[whole:]
    if len(carry):
        parts.append(np.array([(carry ** 2).mean()], dtype=np.float32))
    err = proc.stderr.read().decode("utf-8", "replace")
    if proc.wait() != 0:
        raise VerifyInputError(f"{path.name}: ffmpeg cannot decode the audio: {err.strip()[-300:]}")
    return (np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)), total


def _rms_dbfs(frames: np.ndarray, a: int, b: int) -> float:
    chunk = frames[max(0, a):max(a, b)]
    if not len(chunk):
        return -math.inf
    ms = float(chunk.mean())
    return 10 * math.log10(ms) if ms > 0 else -math.inf


def _db(level: float) -> str:
    return "-inf dBFS" if level == -math.inf else f"{level:.1f} dBFS"


def _silent_mask(frames: np.ndarray) -> np.ndarray:
    return frames <= 10 ** (SILENCE_FRAME_DBFS / 10)


def _long_silences(frames, frame, start, end, rate, number, problems, limit=LONG_SILENCE_SECONDS) -> int:
    a, b = start // frame, end // frame
    quiet = np.concatenate([[False], _silent_mask(frames[a:b]), [False]]).astype(np.int8)
    edges = np.diff(quiet)
    runs = zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1))  # [first, past-last) frame
    found = 0
    for first, past in runs:
        seconds = (past - first) * frame / rate
        if seconds > limit:
            found += 1
            at = (a + first) * frame / rate - start / rate
            problems.append(Problem("gap", f"{seconds:.1f} s of silence at {_clock(at)} into the chapter", number))
    return found


def repetition(envelope_ms: np.ndarray) -> str | None:
    """How a segment's audio repeats itself, from its 10 ms mean-square frames, or None."""
    level = 10 * np.log10(np.maximum(envelope_ms.astype(np.float64), 1e-6))
    loud = np.flatnonzero(level > SILENCE_FRAME_DBFS)
    if not len(loud):
        return None
    e = np.maximum(level[loud[0]:loud[-1] + 1], -60.0)
    n, steady = len(e), int(round(REPEAT_STEADY_SECONDS / FRAME_SECONDS))
    if n >= steady:
        sums = np.concatenate([[0.0], np.cumsum(e)])
        squares = np.concatenate([[0.0], np.cumsum(e * e)])
        mean = (sums[steady:] - sums[:-steady]) / steady
        spread = np.sqrt(np.maximum((squares[steady:] - squares[:-steady]) / steady - mean**2, 0.0))
        if spread.min() < REPEAT_STEADY_DB:
            return (f"holds one steady sound for {REPEAT_STEADY_SECONDS:g} s or more (its level varies by "
                    f"{spread.min():.1f} dB; speech varies by 8 dB or more)")
    best_r, best_lag = 0.0, 0
    for lag in range(int(round(REPEAT_MIN_LAG_SECONDS / FRAME_SECONDS)), int(n / 2.5) + 1):
        a, b = e[:-lag], e[lag:]
        if a.std() > 0 and b.std() > 0:
            r = float(np.corrcoef(a, b)[0, 1])
            if r > best_r:
                best_r, best_lag = r, lag
    if best_r >= REPEAT_MIN_R:
        return f"repeats the same {best_lag * FRAME_SECONDS:.2f} s of sound over and over (r = {best_r:.2f})"
    return None


def _check_segments(job: _Job, frames, frame, rate, rows, problems) -> dict:
    measured = []  # (row, seg, level, voiced seconds)
    quiet = _silent_mask(frames)
    for row, (ci, _t) in zip(rows, job.chapters):
        for seg in job.segments.get(ci, []):
            a, b = seg.start // frame, -(-(seg.start + seg.samples) // frame)
            level = _rms_dbfs(frames, a, b)
            loud = np.flatnonzero(~quiet[a:b])
            voiced = (loud[-1] - loud[0] + 1) * frame / rate if len(loud) else 0.0
            measured.append((row, seg, level, voiced))
    paces = [_alnum(s.text) / v for _r, s, _l, v in measured if _alnum(s.text) >= 20 and v > 0]
    median = float(np.median(paces)) if paces else 15.0
    fast = max(PACE_FAST_FLOOR, min(PACE_FAST_CEILING, PACE_FAST_FACTOR * median))
    slow = median * PACE_SLOW_FACTOR
    stats = {"median": round(median, 1), "fast_limit": round(fast, 1), "measured": len(paces),
             "p99": round(float(np.percentile(paces, 99)), 1) if paces else None,
             "max": round(max(paces), 1) if paces else None}
    loops = str(job.meta.get("voice") or "").startswith(LOOPING_VOICES)
    for row, seg, level, voiced in measured:
        chars = _alnum(seg.text)
        where = dict(chapter=row.number, segment=seg.index + 1)
        quote = _quote(seg.text)
        if chars >= 2 and level <= SILENT_SEGMENT_DBFS:
            row.silent_segments += 1
            problems.append(Problem("silence", f"segment {seg.index + 1} {quote} is near-silent ({_db(level)})", **where))
            continue
        if loops and (how := repetition(frames[seg.start // frame:-(-(seg.start + seg.samples) // frame)])):
            problems.append(Problem("repetition", f"segment {seg.index + 1} {quote} {how}: the voice looped",
                                    **where))
            continue
        pace = chars / voiced if voiced else math.inf
        if chars >= PACE_MIN_CHARS and pace > fast:
            row.pace_segments += 1
            problems.append(Problem("pace", f"segment {seg.index + 1} {quote} is too short for its text: "
                                            f"{voiced:.2f} s for {chars} letters ({pace:.0f}/s, limit {fast:.0f}/s)",
                                    **where))
        elif chars >= PACE_SLOW_MIN_CHARS and pace < slow:
            row.pace_segments += 1
            problems.append(Problem("pace", f"segment {seg.index + 1} {quote} is far longer than its text: "
                                            f"{voiced:.1f} s for {chars} letters ({pace:.1f}/s, median {median:.1f}/s)",
                                    **where))
    return stats
