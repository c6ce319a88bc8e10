"""Quality: DistillMOS (Microsoft's compact speech-quality model, `distillmos` on PyPI) scores the
windows verify hears, 1 (bad) to 5 (excellent), in a child process: torch never enters the parent.

The parent (`MosScorer`) sends 16 kHz float32 arrays on the child's stdin and reads one JSON line
per array from a pipe of its own; the child points fd 1 at stderr before it loads the model, so
what the package prints on load ("DistillMOS variant 7 weights loaded ...") never reaches the
answers. `distillmos/sqa.py` imports torchaudio at its top but uses it only to load and resample
files (its command line); we hand it arrays, so where torchaudio is missing (it has no wheel for
our torch pin) a placeholder module stands in while the package is imported.

Run as `python -m epub2audio.audiobook.verify.quality` it is that child.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile

import numpy as np

from .report import Problem, QualityWindow, _clock

RATE = 16000
# The model hears 122880 samples (7.68 s) at a time; a longer input is cut into crops at most 1 s
# apart and their scores averaged, so a 30 s window costs 24 crops (11 s on one thread here) where
# its first 7.68 s cost one (0.5 s). verify scores the first MODEL_SAMPLES of each window.
MODEL_SAMPLES = 122880


# Norms: (median of good chapters, doubtful below) per voice family, measured by
# bench/verify_quality.py (bench/results/verify-distillmos.md): 8 chapters of 4 books a voice, 2
# windows each, and the Aesop chapters (all 8 of joe's) broken in every segment. Good chapters:
# joe 4.31-4.49, hibari 4.51-4.71, kokoro:af_heart 4.42-4.68 (and on the Aesop chapters alone
# kokoro:am_adam 4.35-4.72, kokoro:bf_emma 4.45-4.67). Broken, best chapter: clipped (x8) joe 3.71,
# hibari 4.20, kokoro 3.66 (am_adam 2.83, bf_emma 3.15); wrong rate (1.38x fast) hibari 2.73, kokoro 3.48, but joe
# 4.61 (DistillMOS judges the sound, not the pace: the pace check is for that); white noise at 5
# dB SNR 1.80-2.16 and choppy audio (40 ms on, 40 ms off) 1.10-1.17 for all. Each floor lies
# midway between the voice's worst good chapter and its best broken one (clipped), rounded to 0.05;
# Kokoro's from its three English voices together. Japanese Kokoro voices are not measured.
VOICE_NORMS: dict[str, tuple[float, float]] = {
    "joe": (4.43, 4.0),
    "hibari": (4.68, 4.35),
    "kokoro": (4.57, 4.0),
}
# The test tone is not speech: its good chapters (1.41-1.89) score no better than broken ones
# (1.24-2.63), so it is scored and never judged.
NOT_SPEECH = frozenset({"tone"})
# A chapter this far below the median of the book's other scored chapters is doubtful too, whatever
# the voice (a voice with no norm here is judged by this alone), given BOOK_MIN_CHAPTERS others.
# Good chapters lay at most 0.18 below the median of their voice's others; the mildest breakage,
# hibari's clipped chapters, 0.48 below it (joe's 0.72, kokoro's 0.91): 0.35 lies between.
BOOK_MARGIN = 0.35
BOOK_MIN_CHAPTERS = 3


def voice_family(voice: str | None) -> str | None:
    """"kokoro" for kokoro:af_heart, joe and hibari by name; None for a voice we have no norm of."""
    family = (voice or "").split(":")[0]
    return family if family in VOICE_NORMS else None


def distillmos_installed() -> bool:
    return importlib.util.find_spec("distillmos") is not None  # finds it without importing torch


class MosUnavailable(RuntimeError):
    """The scorer cannot run (not installed, or its child failed): one line saying why."""


class MosScorer:
    """One child holding the model for the life of this object: `score(samples16k) -> MOS`."""

    def __init__(self):
        if not distillmos_installed():
            raise MosUnavailable("distillmos is not installed (make test installs it; see NOTICE.md)")
        answers_read, answers_write = os.pipe()
        self._stderr = tempfile.TemporaryFile()
        self._proc = subprocess.Popen([sys.executable, "-m", __name__, str(answers_write)], stdin=subprocess.PIPE,
                                      stdout=subprocess.DEVNULL, stderr=self._stderr, pass_fds=(answers_write,))
        os.close(answers_write)
        self._answers = os.fdopen(answers_read, "r", encoding="utf-8")
        self._answer()  # {"ok": true} once the model is loaded

    def score(self, samples: np.ndarray) -> float:
        data = np.ascontiguousarray(samples, dtype="<f4")
        if not data.size:
            raise ValueError("no audio to score")
        try:
            self._proc.stdin.write(len(data).to_bytes(4, "little") + data.tobytes())
            self._proc.stdin.flush()
        except BrokenPipeError:
            pass  # the child is gone: _answer says why
        return self._answer()["mos"]

    def _answer(self) -> dict:
        line = self._answers.readline()
        answer = json.loads(line) if line.startswith("{") else None
        if answer is None or not answer.get("ok"):
            self.close()
            if answer is None:
                self._stderr.seek(0)
                tail = self._stderr.read().decode(errors="replace").strip().splitlines()
                raise MosUnavailable(f"the DistillMOS child stopped: {(tail or ['no output'])[-1]}")
            raise MosUnavailable(answer["message"])
        return answer

    def close(self) -> None:
        if self._proc.poll() is None:
            try:
                self._proc.stdin.close()  # end of input: the child exits
            except BrokenPipeError:
                pass
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._answers.close()
        self._stderr.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def check_quality(path, job, rows, rate, per_chapter, window_seconds, seed, problems, notes) -> str:
    """Score the first MODEL_SAMPLES of each chapter's windows (speech.choose_windows, the same seed:
    in an English book the windows the transcriber hears), the chapter's figure their mean; then
    call doubtful a chapter far below its voice's norm or the book's other chapters."""
    from .speech import _window_audio, choose_windows

    try:
        scorer = MosScorer()
    except MosUnavailable as error:
        notes.append(f"speech quality not scored: {error}")
        return "unavailable"
    with scorer:
        for row, (ci, _t) in zip(rows, job.chapters):
            rng = random.Random(f"{seed}:{ci}")
            for block in choose_windows(job.segments.get(ci, []), rate, per_chapter, window_seconds, rng):
                start, end = block[0].start, block[-1].start + block[-1].samples
                audio = _window_audio(path, start, end, rate)[:MODEL_SAMPLES]
                if not audio.size:
                    continue
                try:
                    score = scorer.score(audio)
                except MosUnavailable as error:  # the child died mid-book: what was scored stands
                    notes.append(f"speech quality scored only up to chapter {row.number}: {error}")
                    quality_doubts(rows, job.meta.get("voice"), problems)
                    return "failed"
                row.quality_windows.append(QualityWindow(round(start / rate, 3), round(len(audio) / RATE, 3),
                                                         round(score, 3)))
            if row.quality_windows:
                row.distillmos = round(statistics.fmean(w.distillmos for w in row.quality_windows), 3)
    quality_doubts(rows, job.meta.get("voice"), problems)
    return "done"


def quality_doubts(rows, voice: str | None, problems: list[Problem]) -> None:
    family = voice_family(voice)
    if (voice or "").split(":")[0] in NOT_SPEECH:
        return
    scored = [r for r in rows if r.distillmos is not None]
    for row in scored:
        others = [r.distillmos for r in scored if r is not row]
        why = []
        if family is not None and row.distillmos < VOICE_NORMS[family][1]:
            why.append(f"{family}'s good chapters score {VOICE_NORMS[family][0]:.2f}, doubtful below "
                       f"{VOICE_NORMS[family][1]:.2f}")
        if len(others) >= BOOK_MIN_CHAPTERS and row.distillmos < statistics.median(others) - BOOK_MARGIN:
            why.append(f"the book's other chapters {statistics.median(others):.2f}")
        if why:
            worst = min(row.quality_windows, key=lambda w: w.distillmos)
            problems.append(Problem("quality", f"DistillMOS {row.distillmos:.2f} ({'; '.join(why)}): the audio "
                                               f"may be noisy, clipped or distorted; listen "
                                               f"{_clock(worst.start_seconds - row.start_seconds)} into the chapter "
                                               f"(window {worst.distillmos:.2f})",
                                    row.number, None, "doubt", worst.start_seconds))


# --- the child ----------------------------------------------------------------------------------


def load_model():
    """DistillMOS on one thread, in eval mode: the same audio gives the same score."""
    import types

    import torch

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    placeholder = importlib.util.find_spec("torchaudio") is None
    if placeholder:
        sys.modules["torchaudio"] = types.ModuleType("torchaudio")
    try:
        from distillmos import ConvTransformerSQAModel
    finally:
        if placeholder:
            del sys.modules["torchaudio"]
    return ConvTransformerSQAModel().eval()


def score_with(model, samples: np.ndarray) -> float:
    import torch

    with torch.inference_mode():
        return float(model(torch.from_numpy(np.asarray(samples, dtype=np.float32))[None]).item())


def _read_exactly(stream, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = stream.read(size - len(data))
        if not chunk:
            break
        data += chunk
    return bytes(data)


def _serve(answers_fd: int) -> int:
    answers = os.fdopen(answers_fd, "w", encoding="utf-8")
    os.dup2(2, 1)  # anything printed from here on is stderr, never an answer
    sys.stdout = sys.stderr

    def answer(**fields) -> None:
        answers.write(json.dumps(fields) + "\n")
        answers.flush()

    try:
        model = load_model()
    except Exception as error:
        answer(ok=False, message=f"DistillMOS did not load: {type(error).__name__}: {error}")
        return 1
    answer(ok=True)
    requests = sys.stdin.buffer
    while len(head := _read_exactly(requests, 4)) == 4:
        count = int.from_bytes(head, "little")
        samples = np.frombuffer(_read_exactly(requests, 4 * count), dtype="<f4")
        if len(samples) != count:
            return 1
        answer(ok=True, mos=score_with(model, samples))
    return 0


if __name__ == "__main__":
    sys.exit(_serve(int(sys.argv[1])))
