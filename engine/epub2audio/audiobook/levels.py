"""How loud the book is: one gain for the whole book, chosen by measuring it, then a limiter.

The target, measured on the decoded M4B with ffmpeg's ebur128 filter: integrated loudness -19 LUFS
(we hold -20 ... -18) and a true peak at or below -3 dBTP, ACX's limit.

The M4B is one streamed AAC encode, so the gain must be known before it starts. Rather than a fixed
gain calibrated per voice, we measure the stored PCM (ebur128: BS.1770 K-weighting and gating) in
analysis passes that stream the same segment WAVs as the encode: Piper's joe comes out near -23 LUFS,
a cloned CosyVoice3 voice at whatever level its reference recording had, the tone voice is a bare
sine. Measuring suits all of them, and voices to come, with no calibration to go stale.

1. Measure the raw book: integrated loudness L, sample peak P. The plain gain is g = target - L.
2. If P + g stays under the limiter's ceiling, the limiter never acts and g is the answer.
3. Otherwise (speech: Piper's peaks sit 22 dB above its loudness, the target allows 14) the limiter
   shaves the peaks and some loudness with them, the more the harder it works: on Piper speech it
   takes 1.6 LU at g, and each further dB of gain adds only about 0.5 LU; where loud clicks carry
   much of the loudness it takes far more. So one more pass measures the limited loudness at g,
   g + 3, ... g + 12 dB (branches of one filter graph) and we take the gain where that curve
   crosses the target, interpolating linearly between the points.
Both passes stream like the encode (flat memory). They cost about a third of the encode's CPU time
(Moby-Dick chapter 2, 9 min: 0.4 s raw, 2.4 s through five limiters, 8.4 s to encode); the tone
voice, which never reaches the limiter, needs only the first.

The gain is applied in double precision before the limiter, so peaks it lifts past full scale are
not clipped: the limiter sees the true waveform and brings it under its ceiling.

Identical input gives identical output: ebur128 reports to 0.1 LU, the gain is worked out from
those numbers and rounded to 0.01 dB, so the same PCM always gets the same filter chain.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

TARGET_LUFS = -19.0

# Sample peaks leave the limiter at -5 dBFS at most. AAC at 64 kb/s overshoots them by 0.7-1.5 dB on
# limited Piper speech (1.6 dB on full-scale clicks), so decoded M4Bs measured -3.4 to -4.3 dBTP.
# A lower ceiling does not buy margin: it needs more gain into the limiter, and the overshoot grows
# with it (-5.5 dBFS: -3.9 dBTP worst; -6 dBFS: -3.6 dBTP, same three books).
# `latency=true` is essential: without it alimiter delays the audio by its look-ahead (attack, 5 ms)
# and drops the last 5 ms, which would shift every chapter mark; with it the output is sample-aligned
# and exactly as long as the input (tests/test_m4b.py). `level=false` stops alimiter from scaling its
# output back up to full scale.
CEILING_DBFS = -5.0
LIMITER_FILTER = f"alimiter=limit={10 ** (CEILING_DBFS / 20):.4f}:level=false:attack=5:release=50:latency=true"

# Where the second pass measures, in dB above the plain gain. Beyond the last point the limiter
# would be flattening the voice; a book that needs more lands under the target instead.
PROBE_OFFSETS_DB = (0.0, 3.0, 6.0, 9.0, 12.0)
MAX_GAIN_DB = 30.0  # a nearly silent book is not raised into audible noise
ABSOLUTE_GATE_LUFS = -70.0  # ebur128 reports this when nothing in the book is loud enough to count


@dataclass(frozen=True)
class Level:
    integrated_lufs: float
    sample_peak_dbfs: float


def gain_stage(gain_db: float) -> str:
    # Double precision from the start: s16 would clip at full scale before the limiter saw the peak.
    return f"aformat=sample_fmts=dbl,volume={gain_db:.2f}dB:precision=double"


def filter_chain(gain_db: float) -> str:
    """What the encode runs on the PCM: the book's gain, then the limiter."""
    return f"{gain_stage(gain_db)},{LIMITER_FILTER}"


def book_gain(measure: Callable[[Mapping[str, str]], Mapping[str, Level]]) -> float:
    """The one gain (dB) that brings the book to the target through the limiter.

    `measure` runs the book's PCM through each named filter chain and returns each one's Level."""
    raw = measure({"raw": "anull"})["raw"]
    if raw.integrated_lufs <= ABSOLUTE_GATE_LUFS:
        return 0.0
    gain = _clamp(TARGET_LUFS - raw.integrated_lufs, -MAX_GAIN_DB, MAX_GAIN_DB)
    if raw.sample_peak_dbfs + gain <= CEILING_DBFS:
        return round(gain, 2)
    gains = [gain + offset for offset in PROBE_OFFSETS_DB]
    limited = measure({f"g{i}": filter_chain(g) for i, g in enumerate(gains)})
    loudness = [limited[f"g{i}"].integrated_lufs for i in range(len(gains))]
    return round(_crossing(gains, loudness, TARGET_LUFS), 2)


def _crossing(gains: list[float], loudness: list[float], target: float) -> float:
    """The gain at which the measured (rising) loudness curve first reaches the target."""
    if loudness[0] >= target:
        return gains[0]
    for (g0, l0), (g1, l1) in zip(zip(gains, loudness), zip(gains[1:], loudness[1:])):
        if l0 < target <= l1:
            return g0 + (g1 - g0) * (target - l0) / (l1 - l0)
    return gains[-1]


def _clamp(value: float, low: float, high: float) -> float:
    return min(max(value, low), high)


# --------------------------------------------------------------------------------------------
# The analysis pass: ffmpeg's ebur128 over PCM on stdin, one branch per chain


def analysis_command(ffmpeg: str, sample_rate: int, chains: Mapping[str, str]) -> list[str]:
    """An ffmpeg command that reads s16le PCM on stdin and prints one ebur128 summary per chain."""
    names = list(chains)
    branches = [f"{chains[name]},ebur128@{name}=peak=sample:framelog=quiet" for name in names]
    if len(branches) == 1:
        graph = f"[0:a]{branches[0]}[out]"
    else:
        split = f"[0:a]asplit={len(branches)}" + "".join(f"[in{i}]" for i in range(len(branches)))
        # One branch goes to the (null) output; the others end in a sink.
        ends = ["[out]"] + [",anullsink"] * (len(branches) - 1)
        graph = ";".join([split] + [f"[in{i}]{b}{end}" for i, (b, end) in enumerate(zip(branches, ends))])
    # -loglevel info: the summaries are info messages.
    return [ffmpeg, "-hide_banner", "-nostats", "-loglevel", "info",
            "-f", "s16le", "-ar", str(sample_rate), "-ac", "1", "-i", "pipe:0",
            "-filter_complex", graph, "-map", "[out]", "-f", "null", "-"]


def parse_levels(stderr: str, names: list[str]) -> dict[str, Level]:
    """Each named ebur128 summary's integrated loudness and sample peak; ValueError if one is missing."""
    levels = {}
    for name in names:
        found = re.search(
            rf"\[ebur128@{re.escape(name)} @ [^\]]*\] Summary:.*?\bI:\s+(\S+) LUFS.*?Sample peak:\s+Peak:\s+(\S+) dBFS",
            stderr, re.DOTALL,
        )
        if not found:
            raise ValueError(f"no loudness summary for {name!r} in ffmpeg's output")
        levels[name] = Level(float(found.group(1)), float(found.group(2)))
    return levels
