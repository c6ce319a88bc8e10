"""The `epub2audio` command: arguments → engine calls, exit codes, progress.

Exit codes: 0 success, 1 internal error or a failed job, 2 bad input, 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import traceback
from pathlib import Path

from . import __version__
from .errors import InputError, JobFailed
from .options import add_ray_argument, job_options, workers_flag

from .progress import CHARS_PER_SECOND, format_duration

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's own exit code 2 is ours too
        self.exit(EXIT_BAD_INPUT, f"epub2audio: error: {message}\n")


def convert_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="epub2audio", description="Turn an EPUB into an M4B audiobook with chapters, read by a local voice.")
    p.add_argument("book", type=Path, help="the EPUB file (MOBI, AZW3, DOCX, FB2, ODT, RTF, TXT, HTML and PDF are "
                                           "converted to EPUB first with calibre's ebook-convert)")
    p.add_argument("-o", "--output", type=Path, help="the audiobook to write (default: next to the book, "
                                                     "BOOK.m4b or the --format's suffix)")
    p.add_argument("--list-chapters", action="store_true", help="show the chapters and what is skipped, then stop")
    p.add_argument("--preview", action="store_true",
                   help="with --list-chapters: the first words of each chapter and of each skipped part")
    p.add_argument("--chapters", metavar="LIST", help="only these chapters, e.g. 1-3,7 (numbers from --list-chapters)")
    p.add_argument("--voice", help="auto (default: an installed voice that speaks the book's language; hibari for "
                                   "English), hibari, joe, kokoro:NAME, piper:NAME, cosyvoice3:NAME, qwen3:SPEAKER "
                                   "(or qwen3:FOLDER:SPEAKER) or tone (see `epub2audio voice list`)")
    p.add_argument("--model-dir", type=Path, help="the Fun-CosyVoice3-0.5B folder (for CosyVoice3 voices)")
    p.add_argument("--llm-backend", choices=("auto", "torch", "mlx", "onnx"),
                   help="CosyVoice3 LLM stage: auto = the fastest measured: MLX on Apple Silicon, ONNX Runtime elsewhere; "
                        "torch = the faithful reference. Qwen3-TTS Talker and Code Predictor: auto = MLX on Apple "
                        "Silicon, torch elsewhere; onnx = the Talker on ONNX Runtime")
    p.add_argument("--flow-precision", choices=("fp32", "onnx-fp32", "int8", "onnx-int8", "bf16", "fp16"),
                   help="CosyVoice3 flow: fp32 (reference), onnx-fp32 (within 1e-4), int8 or onnx-int8 (faster, not exact), "
                        "bf16 or fp16 (for GPUs)")
    p.add_argument("--llm-precision", choices=("fp32", "bf16", "fp16", "int8", "int4"),
                   help="CosyVoice3 LLM weights: fp32 (reference), bf16, fp16 (torch on a GPU, or MLX), int8 (torch on the CPU, "
                        "ONNX or MLX), int4 (ONNX or MLX; expert only, may change pacing, warns)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda", "mps"),
                   help="where CosyVoice3 runs: auto = CUDA if present; on Apple Silicon the LLM on MLX, the flow on MPS, "
                        "the vocoder on the CPU; else the CPU. Wins over config.toml's device and device_llm/_flow/_hift")
    p.add_argument("--workers", type=workers_flag, metavar="N|auto",
                   help="worker processes rendering in parallel (default 1; with --ray: one per free CPU of the "
                        "cluster); auto: on a GPU as many as still add 10 %% throughput, measured once per GPU "
                        "and voice; on the CPU 1")
    add_ray_argument(p)
    p.add_argument("--progress", choices=("auto", "bar", "json", "none"), default="auto",
                   help="progress display; json writes one event per line to stdout")
    p.add_argument("--meta", type=Path, help="JSON file of metadata that overrides the book's (title, authors, ...)")
    p.add_argument("--seed", type=int, help="job seed for voices that sample (default 1986)")
    p.add_argument("--work-dir", type=Path, help="where the resumable job lives (default: a cache folder)")
    p.add_argument("--notes", choices=("skip", "inline", "chapter-end"),
                   help="footnotes and endnotes: skip (default; note sections stay chapters), inline "
                        "(read after the paragraph that cites them) or chapter-end")
    p.add_argument("--say-titles", choices=("yes", "no"),
                   help="read each chapter's heading aloud (default yes)")
    add_image_alt_argument(p)
    p.add_argument("--keep-front-matter", action="store_true", default=None,
                   help="also read what is skipped by default: title, half-title and copyright pages, "
                        "transcriber's notes and publisher's adverts (--list-chapters names them)")
    p.add_argument("--lexicon", type=Path, metavar="FILE",
                   help="pronunciations: `word = respelling` or `word = /ipa/` lines (adds to config.toml's "
                        "lexicon and BOOK.epub2audio.toml's, and wins over them)")
    p.add_argument("--no-verify", action="store_true",
                   help="skip the check of the finished M4B (chapters, tags, silent or cut segments, speech recognition)")
    add_output_arguments(p)
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    p.add_argument("--version", action="version", version=f"epub2audio {__version__}")
    return p


def add_image_alt_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--image-alt", choices=("yes", "no"),
                   help="read the description the book gives a picture, as a short note (\"Image: a map of the "
                        "river.\"); decorative pictures never (default yes; config.toml and BOOK.epub2audio.toml: "
                        "image_alt)")


def add_format_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=("m4b", "mp3", "opus"),
                   help="the audiobook's format: m4b (default; AAC, chapters Apple and Android read), mp3 "
                        "(ID3v2.4 chapters) or opus (Ogg Opus, Vorbis-comment chapters); the same chapters, "
                        "tags, cover and loudness in each (config.toml: format; -o NAME.mp3 implies it)")


def add_layout_argument(p: argparse.ArgumentParser, where: str) -> None:
    p.add_argument("--layout", choices=("flat", "audiobookshelf"),
                   help=f"audiobookshelf: write each book as {where}/Author/Series/Book N - Title/Title.m4b (no "
                        "series level without a series), with cover.jpg, desc.txt and reader.txt beside it, as "
                        "Audiobookshelf's folder scanner expects (config.toml: layout)")


def add_output_arguments(p: argparse.ArgumentParser) -> None:
    add_format_argument(p)
    add_layout_argument(p, "OUT (-o, a folder; default: the book's)")
    p.add_argument("--subtitles", choices=("srt", "vtt"),
                   help="also write BOOK.srt or BOOK.vtt beside the M4B: one cue per sentence, on the M4B's timeline")
    p.add_argument("--readalong", nargs="?", const="sentences", choices=("sentences", "words"),
                   help="also write BOOK.readalong.epub beside the M4B: the book as EPUB 3 with media overlays, "
                        "each sentence highlighted as it is read; `--readalong words`: each word, where the "
                        "voice says when it starts (Piper voices), else sentences")


def library_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="epub2audio library",
                description="Convert every EPUB under a folder (calibre's library layout included), "
                            "skipping those already done; run it again to resume.")
    p.add_argument("in_dir", type=Path, metavar="IN_DIR", help="the folder of EPUBs (searched through)")
    p.add_argument("--out", "-o", dest="out_dir", type=Path, required=True, metavar="OUT_DIR",
                   help="where the M4Bs go, in the same folders as the EPUBs under IN_DIR")
    p.add_argument("--voice", help="auto (default: each book's language decides; hibari for English), hibari, joe, "
                                   "kokoro:NAME, piper:NAME, cosyvoice3:NAME or tone (see `epub2audio voice list`)")
    p.add_argument("--model-dir", type=Path, help="the Fun-CosyVoice3-0.5B folder (for CosyVoice3 voices)")
    p.add_argument("--workers", type=workers_flag, metavar="N|auto",
                   help="workers shared by all books (default 1; with --ray: one per free CPU of the cluster); "
                        "auto: on a GPU as many as still add 10 %% throughput (measured once), on the CPU 1")
    add_ray_argument(p)
    p.add_argument("--seed", type=int, help="job seed for voices that sample (default 1986)")
    p.add_argument("--no-verify", action="store_true", help="skip the check of each finished M4B")
    add_image_alt_argument(p)
    p.add_argument("--progress", choices=("auto", "bar", "json", "none"), default="auto",
                   help="progress display; json writes one event per line to stdout")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    return p


def run_library(args: argparse.Namespace) -> int:
    from .library import convert_library
    from .progress import for_mode

    in_dir, out_dir = args.in_dir.expanduser().resolve(), args.out_dir.expanduser().resolve()
    for folder, what in ((in_dir, "IN_DIR"), (out_dir, "--out")):
        if not folder.is_dir():
            raise InputError(f"{folder}: {what} is not an existing folder")
    options = job_options(args, image_alt=_yes_no(args.image_alt))
    progress = for_mode(args.progress)
    result = convert_library(in_dir, out_dir, options, progress)
    print(f"epub2audio: library: {len(result.converted)} converted, {len(result.skipped)} done already, "
          f"{len(result.refused)} refused, {len(result.failed)} failed", file=sys.stderr)
    if result.failed:
        return EXIT_FAILED
    return EXIT_BAD_INPUT if result.refused else EXIT_OK


def regen_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="epub2audio regen",
                description="Re-make one segment of a finished or interrupted job with its own seed, then the M4B.")
    p.add_argument("output", type=Path, help="the M4B the job makes")
    p.add_argument("--segment", required=True, metavar="CHAPTER.SEGMENT",
                   help="e.g. 3.17: segment 17 of chapter 3 (chapter numbers as in --list-chapters)")
    p.add_argument("--work-dir", type=Path, help="the job folder, if it was given to the conversion")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    return p


def run_regen(args: argparse.Namespace) -> int:
    from .config import load_config, worker_policy
    from .render import regen

    chapter, dot, segment = args.segment.partition(".")
    if not (dot and chapter.isdigit() and segment.isdigit() and int(chapter) > 0 and int(segment) > 0):
        raise InputError(f"--segment: {args.segment!r} is not CHAPTER.SEGMENT, e.g. 3.17")
    result = regen(args.output, int(chapter) - 1, int(segment) - 1, work_dir=args.work_dir,
                   policy=worker_policy(load_config()))
    verdict = "identical to" if result.identical else "DIFFERENT from"
    print(f"Segment {args.segment} ({result.text!r}) re-made: {verdict} the stored audio. Wrote {args.output}")
    return EXIT_OK


def voice_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="epub2audio voice", description="Manage voices.")
    sub = p.add_subparsers(dest="action", required=True)
    add = sub.add_parser("add", help="make a CosyVoice3 voice from a short recording (3–30 s), a Kokoro "
                                     "voice from your own Kokoro files (--kokoro), or use a Piper model (--piper) or a "
                                     "Qwen3-TTS folder's speakers (--qwen3)")
    add.add_argument("name")
    add.add_argument("--piper", type=Path, metavar="FILE.onnx",
                     help="Piper: a voice model, with its FILE.onnx.json beside it (any language espeak-ng speaks)")
    add.add_argument("--qwen3", type=Path, metavar="MODEL_DIR",
                     help="Qwen3-TTS: a Qwen3-TTS-12Hz CustomVoice folder, whose built-in speakers become "
                          "qwen3:SPEAKER (a Base folder with --wav clones a voice)")
    add.add_argument("--wav", type=Path, help="CosyVoice3: the reference recording (≥16 kHz, ≤30 s); "
                                              "Qwen3-TTS: with a Base folder, the recording to clone (0.5–30 s)")
    add.add_argument("--kokoro", type=Path, metavar="MODEL.onnx",
                     help="Kokoro: the model file (kokoro-v1.0.onnx or its int8 export)")
    add.add_argument("--voices", type=Path, metavar="VOICES.bin", help="Kokoro: the style packs (voices-v1.0.bin)")
    add.add_argument("--style", help="Kokoro: a style, or a blend with weights (normalised to sum to 1), "
                                     "e.g. af_heart or af_sarah:0.6,am_adam:0.4")
    add.add_argument("--speed", type=float, default=1.0, help="Kokoro: speaking speed, 0.5–2.0 (default 1.0)")
    add.add_argument("--text", help="what the recording says (default: transcribed with the packaged Whisper; "
                                    "Qwen3-TTS: without it the clone uses the speaker embedding only)")
    add.add_argument("--model-dir", type=Path, help="the Fun-CosyVoice3-0.5B folder")
    add.add_argument("--max-seconds", type=float,
                     help="cut the recording at a pause before this length (a shorter prompt makes every segment faster)")
    sub.add_parser("list", help="the voices you can use, with the speed `voice try` measured here")
    trial = sub.add_parser("try", help="say a short text with a voice into a WAV, and measure its speed here")
    trial.add_argument("name", help="a voice from `epub2audio voice list`")
    trial.add_argument("text", nargs="?", help="what to say (default: a sentence in the voice's language)")
    trial.add_argument("-o", "--output", type=Path, help="the WAV to write (default: NAME-sample.wav)")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    return p


def run_voice(args: argparse.Namespace) -> int:
    from .config import load_config
    from .voices.catalog import add_kokoro, add_piper, add_profile, add_qwen3, listing

    from .voices.trial import measured_speeds, try_voice

    if args.action == "list":
        speeds = measured_speeds()
        print(f"{'NAME':<24} {'FAMILY':<16} {'LANGUAGES':<26} {'RATE':>8}  {'SPEED':<14} ABOUT")
        for row in listing():
            speed = f"RTF {speeds[row.name]:.3f}" if row.name in speeds else "not measured"
            print(f"{row.name:<24} {row.family:<16} {','.join(row.languages) or '-':<26} "
                  f"{row.sample_rate:>5} Hz  {speed:<14} {row.about}")
        return EXIT_OK
    if args.action == "try":
        out = args.output or Path(f"{args.name.replace(':', '-')}-sample.wav")
        trial = try_voice(args.name, args.text, out)
        print(f"Wrote {trial.path}: {trial.audio_seconds:.1f} s of audio in {trial.synth_seconds:.2f} s "
              f"(RTF {trial.rtf:.3f} on this machine).")
        return EXIT_OK
    if args.qwen3 is not None:
        if any(v is not None for v in (args.piper, args.kokoro, args.voices, args.style, args.model_dir)):
            raise InputError("voice add: --qwen3 takes no --piper, --kokoro, --voices, --style or --model-dir")
        saved = add_qwen3(args.name, args.qwen3, args.wav, args.text)
        if saved["kind"] == "base":
            mode = "with its transcript" if saved["mode"] == "icl" else "x-vector only: no --text"
            print(f"Saved voice qwen3:{args.name} (cloned from {args.wav}, {saved['seconds']:.1f} s, {mode}; "
                  f"{', '.join(saved['languages'])}).")
        else:
            print(f"Saved Qwen3-TTS folder {args.name} ({', '.join(saved['languages'])}; speakers: "
                  f"{', '.join(saved['speakers'])}). Read with --voice qwen3:SPEAKER.")
        return EXIT_OK
    if args.piper is not None:
        if any(v is not None for v in (args.wav, args.kokoro, args.voices, args.style)):
            raise InputError("voice add: --piper takes no --wav, --kokoro, --voices or --style")
        saved = add_piper(args.name, args.piper)
        print(f"Saved voice {saved.name} ({', '.join(saved.languages)}, {saved.sample_rate} Hz).")
        return EXIT_OK
    if args.kokoro is not None or args.voices is not None or args.style is not None:
        if args.wav is not None:
            raise InputError("voice add: give --wav (CosyVoice3) or --kokoro/--voices/--style (Kokoro), not both")
        missing = [flag for flag, value in (("--kokoro", args.kokoro), ("--voices", args.voices),
                                            ("--style", args.style)) if value is None]
        if missing:
            raise InputError(f"voice add: a Kokoro voice also needs {' and '.join(missing)}")
        saved = add_kokoro(args.name, args.kokoro, args.voices, args.style, args.speed)
        blend = " + ".join(f"{w:.3g} {n}" for n, w in saved["weights"])
        print(f"Saved voice kokoro:{args.name} ({blend}, speed {args.speed:g}).")
        return EXIT_OK
    if args.wav is None:
        raise InputError("voice add: give --wav FILE (CosyVoice3) or --kokoro MODEL.onnx --voices FILE --style NAME")
    model_dir = args.model_dir or load_config().get("cosyvoice3_model_dir")
    if not model_dir:
        raise InputError("voice add: say where Fun-CosyVoice3-0.5B is with --model-dir (or cosyvoice3_model_dir)")
    if args.max_seconds is not None and args.max_seconds < 3:
        raise InputError("--max-seconds: keep at least 3 seconds of the reference")
    result = add_profile(args.name, args.wav, args.text, Path(model_dir), args.max_seconds)
    print(f"Saved voice cosyvoice3:{args.name} ({result['seconds']:.1f} s, {result['tokens']} speech tokens). "
          f"Transcript: {result['transcript']!r}")
    return EXIT_OK


def model_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="epub2audio model", description="Manage CosyVoice3 and Qwen3-TTS model folders.")
    sub = p.add_subparsers(dest="action", required=True)
    c = sub.add_parser("compress", help="write a smaller copy of a Fun-CosyVoice3-0.5B or Qwen3-TTS-12Hz folder")
    c.add_argument("--model-dir", type=Path, required=True,
                   help="the Fun-CosyVoice3-0.5B or Qwen3-TTS-12Hz-0.6B folder (the family is read from it)")
    c.add_argument("--out", type=Path, required=True, help="the new folder (must not exist)")
    c.add_argument("--llm", choices=("fp32", "bf16", "int8", "int4"), default="int8",
                   help="LLM layers (default int8; Qwen3-TTS: the Talker and Code Predictor); the embeddings "
                        "and heads stay at 8 bits or more")
    c.add_argument("--tables", choices=("fp32", "int8"), default=None,
                   help="the text and speech embeddings and the speech head with --llm int8: fp32 (default; the "
                        "runtime int8 LLM exactly) or int8 with a scale per row (0.4 GB less); int4 always stores them int8")
    c.add_argument("--flow", choices=("fp32", "fp16", "bf16"), default="fp32", help="flow weights (default fp32)")
    c.add_argument("--hift", choices=("fp32", "fp16"), default="fp32", help="vocoder weights (default fp32)")
    c.add_argument("--decoder", choices=("fp32", "fp16"), default=None,
                   help="Qwen3-TTS: the 12 Hz decoder's weights (default fp32); fp16 keeps any tensor beyond "
                        "fp16's range at fp32")
    c.add_argument("--vocab", "--languages", nargs="+", default=["all"], metavar="LANG",
                   help="all (default) or languages (e.g. en fr): keep only the text-embedding rows they need; "
                        "a text needing another token is refused")
    c.add_argument("--prompt-parts", choices=("keep", "drop"), default="keep",
                   help="drop leaves out what only voice cloning reads: campplus.onnx and speech_tokenizer_v3.onnx "
                        "(CosyVoice3), the speech tokenizer's encoder and Base's speaker encoder (Qwen3-TTS)")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    return p


def run_model(args: argparse.Namespace) -> int:
    from .voices.catalog import compress_model

    result = compress_model(args.model_dir, args.out, llm=args.llm, tables=args.tables, flow=args.flow, hift=args.hift,
                            vocab=args.vocab, prompt_parts=args.prompt_parts, decoder=args.decoder)
    sizes = result["sizes"]
    parts = ", ".join(f"{name} {size / 1e6:.1f} MB" for name, size in sorted(sizes.items()) if name.endswith(".safetensors"))
    print(f"Wrote {args.out} ({sum(sizes.values()) / 1e9:.2f} GB without the tokenizer: {parts})")
    return EXIT_OK


def parse_chapter_list(spec: str) -> list[int]:
    """'1-3,7' → [0, 1, 2, 6] (0-based)."""
    chosen = []
    for part in filter(None, (s.strip() for s in spec.split(","))):
        first, _, last = part.partition("-")
        try:
            lo, hi = int(first), int(last or first)
        except ValueError:
            raise InputError(f"--chapters: {part!r} is not a chapter number or range like 2-5") from None
        if lo < 1 or hi < lo:
            raise InputError(f"--chapters: {part!r} is not a valid range (chapters count from 1)")
        chosen.extend(range(lo - 1, hi))
    if not chosen:
        raise InputError("--chapters: no chapters given")
    return chosen


def chapter_table(book, preview: bool = False) -> str:
    from .book.listing import chapter_preview
    from .book.skips import summary

    lines = [f"{book.title} — {', '.join(book.authors) or 'unknown author'}" + (f" [{book.language}]" if book.language else "")]
    width = max([len(c.title) for c in book.chapters] + [5])
    width = min(width, 60)
    lines.append(f"{'#':>4}  {'Title':<{width}}  {'Characters':>10}  {'Est. time':>9}")
    for i, chapter in enumerate(book.chapters, 1):
        title = chapter.title if len(chapter.title) <= width else chapter.title[: width - 1] + "…"
        lines.append(f"{i:>4}  {title:<{width}}  {chapter.char_count:>10,}  "
                     f"{format_duration(chapter.char_count / CHARS_PER_SECOND):>9}")
        if preview:
            lines.append(f"      “{chapter_preview(chapter)}”")
    total = sum(c.char_count for c in book.chapters)
    lines.append(f"Total: {len(book.chapters)} chapters, {total:,} characters, "
                 f"about {format_duration(total / CHARS_PER_SECOND)} with the embedded voice")
    lines.append(summary(book))
    if book.skipped:
        lines.append("Skipped:")
        for s in book.skipped:
            lines.append(f"  - {s.title}: {s.reason}, {s.chars:,} characters")
            if preview and s.preview:
                lines.append(f"      “{s.preview}”")
    if book.warnings:
        lines.append("Warnings:")
        lines.extend(f"  - {w}" for w in book.warnings)
    return "\n".join(lines)


def chapter_listing(book, preview: bool = False) -> dict:
    """The same facts as chapter_table, for programs (`--list-chapters --progress json`)."""
    from .book.listing import listing

    return listing(book, preview)


def _read_metadata(path: Path | None) -> dict:
    if path is None:
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise InputError(f"{path}: not a readable JSON metadata file ({error})") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: metadata must be a JSON object")
    return data


def _yes_no(value: str | None) -> bool | None:
    return None if value is None else value == "yes"


def _passage_voices_line(args: argparse.Namespace, book) -> str:
    """Under --voice auto, the line saying which other voices read which passages ('' if none)."""
    from .config import load_config
    from .render import passage_readings
    from .voices.catalog import AUTO, choose_voice
    from .voices.passages import passage_readers

    config = load_config()
    if (args.voice or config.get("voice", AUTO)) != AUTO:
        return ""
    voice, _warning = choose_voice(book.language, config)
    return passage_readers(voice, book.language, *passage_readings(book, list(range(len(book.chapters)))),
                           config).summary()


def run_convert(args: argparse.Namespace) -> int:
    from .book.epub import load_book
    from .render import ConvertOptions, convert, reading_for

    reading_options = ConvertOptions(
        notes=args.notes, say_titles=_yes_no(args.say_titles),
        keep_front_matter=args.keep_front_matter, lexicon=args.lexicon, image_alt=_yes_no(args.image_alt),
    )
    if args.lexicon is not None and not args.lexicon.is_file():
        raise InputError(f"--lexicon: {args.lexicon}: no such file")
    if args.list_chapters:
        # The same notes policy as the conversion, so chapter numbers match --chapters.
        reading = reading_for(args.book, reading_options)
        book = load_book(args.book, notes=reading.notes, keep_front_matter=reading.keep_front_matter,
                         image_alt=reading.image_alt)
        from .progress import json_line

        voices = _passage_voices_line(args, book)  # --voice auto: the other voices that would read passages
        if args.progress == "json":
            print(json_line({**chapter_listing(book, args.preview), **({"voices": voices} if voices else {})}))
        else:
            print(chapter_table(book, args.preview) + (f"\n{voices}" if voices else ""))
        return EXIT_OK
    if args.preview:
        raise InputError("--preview goes with --list-chapters (it shows what will be read, and converts nothing)")
    if not args.book.is_file():
        raise InputError(f"{args.book}: no such file")
    suffix = args.output.suffix.lower().lstrip(".") if args.output else ""
    if args.format is None and suffix in ("mp3", "opus", "m4b") and not (args.output and args.output.is_dir()):
        args.format = suffix  # -o book.mp3 says which format
    options = job_options(
        args,
        chapters=parse_chapter_list(args.chapters) if args.chapters else None,
        metadata=_read_metadata(args.meta),
        work_dir=args.work_dir,
        notes=reading_options.notes,
        say_titles=reading_options.say_titles,
        keep_front_matter=reading_options.keep_front_matter,
        lexicon=reading_options.lexicon,
        image_alt=reading_options.image_alt,
    )
    from .progress import for_mode

    if options.layout == "audiobookshelf":  # -o is the library folder
        output = args.output or args.book.parent
    else:
        output = args.output or args.book.with_suffix(f".{options.audio_format}")
    convert(args.book, output, options, for_mode(args.progress))
    return EXIT_OK


def _on_sigterm(signum, frame):
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # A file name that is not UTF-8 reaches us with lone surrogates; shown as \udcXX, not a crash.
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="backslashreplace")
    signal.signal(signal.SIGTERM, _on_sigterm)  # a front door stopping us = Ctrl-C: leave a resumable job
    json_mode = "--progress" in argv and argv[argv.index("--progress") + 1 : argv.index("--progress") + 2] == ["json"]
    debug = "--debug" in argv
    try:
        if argv[:1] == ["regen"]:
            return run_regen(regen_parser().parse_args(argv[1:]))
        if argv[:1] == ["model"]:
            return run_model(model_parser().parse_args(argv[1:]))
        if argv[:1] == ["voice"]:
            return run_voice(voice_parser().parse_args(argv[1:]))
        if argv[:1] == ["verify"]:
            from .audiobook import verify

            parser = _Parser(prog="epub2audio verify", description="Check an M4B made by epub2audio.")
            verify.add_arguments(parser)
            return verify.run(parser.parse_args(argv[1:]))
        if argv[:1] == ["library"]:
            return run_library(library_parser().parse_args(argv[1:]))
        if argv[:1] == ["watch"]:
            from .watch import command as watch

            parser = _Parser(prog="epub2audio watch", description="Watch a folder: every book dropped into it becomes an M4B.")
            watch.add_arguments(parser)
            return watch.run(parser.parse_args(argv[1:]))
        return run_convert(convert_parser().parse_args(argv))
    except InputError as error:
        return _fail(EXIT_BAD_INPUT, str(error), json_mode)
    except JobFailed as error:
        return _fail(EXIT_FAILED, str(error), json_mode)
    except KeyboardInterrupt:
        return _fail(EXIT_INTERRUPTED, "interrupted; run the same command again to resume", json_mode)
    except Exception as error:
        from .render import Interrupted

        if isinstance(error, Interrupted):
            return _fail(EXIT_INTERRUPTED, f"{error}; run the same command again to resume", json_mode)
        if debug:
            traceback.print_exc()
        return _fail(EXIT_FAILED, f"internal error: {type(error).__name__}: {error}", json_mode)


def _fail(code: int, message: str, json_mode: bool) -> int:
    message = " ".join(message.split())  # always one line
    if json_mode:
        print(json.dumps({"event": "error", "message": message, "exit_code": code}), flush=True)
    print(f"epub2audio: error: {message}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
