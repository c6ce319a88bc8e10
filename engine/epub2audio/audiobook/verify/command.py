"""The command: epub2audio verify BOOK.m4b [--work-dir DIR] [--no-asr] [--no-quality] [--windows N] [--json]"""

from __future__ import annotations

import argparse
from pathlib import Path

from . import verify_m4b
from .report import VerifyInputError, doubts, format_report


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("m4b", type=Path, help="the audiobook to check")
    parser.add_argument("--work-dir", type=Path, help="the conversion's job folder (default: where the "
                                                      "conversion to this path kept it)")
    parser.add_argument("--no-asr", action="store_true", help="skip the speech-recognition check")
    parser.add_argument("--no-quality", action="store_true",
                        help="skip the speech-quality score (DistillMOS: about 3 s to start, 0.5 s a window)")
    parser.add_argument("--windows", type=int, default=2, metavar="N",
                        help="windows of about 30 s transcribed per chapter (default 2)")
    parser.add_argument("--seed", type=int, default=0, help="which windows are sampled (default 0)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--strict", action="store_true",
                        help="exit 1 on doubtful speech too (by default only a broken M4B fails)")


def run(args: argparse.Namespace) -> int:
    """Exit 0 when every check passes (doubtful speech is reported, not failed, unless --strict),
    1 when one fails, 2 when the input cannot be verified."""
    import sys

    from ...store import job_dir_for

    if args.windows < 1:
        print("epub2audio: error: --windows must be at least 1", file=sys.stderr)
        return 2
    if args.work_dir is not None and not (Path(args.work_dir) / "job.sqlite3").exists():
        print(f"epub2audio: error: {args.work_dir}: no conversion job there", file=sys.stderr)
        return 2
    job_dir = args.work_dir or job_dir_for(args.m4b)
    if not (Path(job_dir) / "job.sqlite3").exists():
        job_dir = None
    try:
        report = verify_m4b(args.m4b, job_dir, windows_per_chapter=args.windows, seed=args.seed,
                            asr=not args.no_asr, quality=not args.no_quality)
    except VerifyInputError as error:
        print(f"epub2audio: error: {error}", file=sys.stderr)
        return 2
    print(report.to_json() if args.json else format_report(report))
    return 0 if report.passed and not (args.strict and doubts(report.problems)) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="epub2audio verify",
                                     description="Check that an M4B is complete and says what the book says.")
    add_arguments(parser)
    return run(parser.parse_args(argv))

