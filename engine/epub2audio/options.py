"""The job options every front door builds: the flags they share and what they become.

The book command, `library` and `watch` all take --voice, --model-dir, --workers and --ray and read
the same config.toml keys; this module turns both into a `render.ConvertOptions`, so the front
doors import it instead of each other.
"""

from __future__ import annotations

import argparse
import sys

from .errors import InputError


def add_ray_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ray", nargs="?", const="", metavar="ADDRESS",
                   help="render on Ray actors: the cluster at ADDRESS (host:port, or auto for the one "
                        "`ray start` began here), or without ADDRESS a private Ray on this machine "
                        "(needs pip install 'epub2audio[ray]')")


AUTO_WORKERS = "auto"


def workers_flag(value: str) -> int | str:
    """--workers N or --workers auto (argparse type)."""
    if value == AUTO_WORKERS:
        return value
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or auto, got {value!r}") from None


def _workers_setting(args: argparse.Namespace, config: dict) -> int | str | None:
    if args.workers is not None:
        return args.workers
    raw = config.get("workers")
    if raw is None or raw == AUTO_WORKERS:
        return raw
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise InputError(f"setting workers must be a number or \"auto\", got {raw!r}") from None


def workers(args: argparse.Namespace, config: dict) -> int:
    """--workers, else config.toml's; with --ray and no --workers (or auto), 0: one per free CPU of
    the cluster. auto without Ray starts with 1, today's default: on a GPU the job then measures how
    many (auto_workers, render._auto_workers); on the CPU it stays 1."""
    if getattr(args, "ray", None) is not None and args.workers in (None, AUTO_WORKERS):
        return 0
    count = _workers_setting(args, config)
    if count in (None, AUTO_WORKERS):
        return 1
    if count < 1:
        raise InputError("--workers must be at least 1")
    return count


def auto_workers(args: argparse.Namespace, config: dict) -> bool:
    """--workers auto (or config.toml's workers = "auto") on local workers: Ray sizes its own."""
    return getattr(args, "ray", None) is None and _workers_setting(args, config) == AUTO_WORKERS


def cosyvoice3_options(args: argparse.Namespace, config: dict) -> dict:
    # watch and library have no per-voice flags: config.toml alone sets these there
    def flag(name):
        return getattr(args, name, None)

    options = {"llm_backend": flag("llm_backend") or config.get("llm_backend", "auto"),
               "llm_precision": flag("llm_precision") or config.get("llm_precision", "fp32"),
               "flow_precision": flag("flow_precision") or config.get("flow_precision", "fp32"),
               "hift_precision": config.get("hift_precision", "fp32"),
               # a job re-splits a segment that reaches the cap, so it can afford the tight one
               "length_cap": config.get("length_cap", "tight"),
               # the torch LLM's decode step: static (a CUDA graph) on CUDA under auto (llm_static.py)
               "llm_step": config.get("llm_step", "auto"),
               "device": flag("device") or config.get("device", "auto")}
    if options["llm_precision"] == "int4":  # an expert choice, never a preset (bench/llm_lengths.py)
        print("warning: --llm-precision int4 may change the pacing: it lowers the stop-token log-prob by 0.11 on "
              "average (about 12 % longer speech) on full-size random weights; int8 changes it by 0.005", file=sys.stderr)
    if flag("device") is None:  # per-stage keys refine config.toml's device; --device overrides them all
        options.update({f"device_{s}": config[f"device_{s}"] for s in ("llm", "flow", "hift") if config.get(f"device_{s}")})
    return options


def job_options(args: argparse.Namespace, **reading):
    """The voice, workers, policy and pool a conversion runs with, from the flags and config.toml.
    Flags a front door does not have (--seed, --no-verify, the CosyVoice3 ones) count as not given,
    so the watcher's CosyVoice3 voice runs with config.toml's settings, as the book command's does."""
    from .config import load_config, outputs, worker_policy
    from .library import worker_pool
    from .render import ConvertOptions
    from .voices.catalog import AUTO, VoiceChoice, resolve

    config = load_config()
    count = workers(args, config)
    name = args.voice or config.get("voice", AUTO)
    if name == AUTO:  # the book's language decides; render.convert resolves it once the book is read
        voice = VoiceChoice(AUTO, {"model_dir": str(args.model_dir) if args.model_dir else None,
                                   "extra": cosyvoice3_options(args, config)})
    else:
        voice = resolve(name, config=config, model_dir=args.model_dir,
                        workers=max(1, count), extra=cosyvoice3_options(args, config))
    options = ConvertOptions(voice=voice.name, voice_options=voice.options, threads_per_worker=voice.threads,
                             workers=count, auto_workers=auto_workers(args, config), policy=worker_policy(config),
                             verify=not getattr(args, "no_verify", False), pool=worker_pool(args.ray), **reading,
                             # config.toml's format / subtitles / readalong, the flags over them
                             **outputs(config, getattr(args, "subtitles", None), getattr(args, "readalong", None),
                                       getattr(args, "format", None)))
    if getattr(args, "seed", None) is not None:
        options.job_seed = args.seed
    options.layout = getattr(args, "layout", None) or config.get("layout") or "flat"
    if options.layout not in ("flat", "audiobookshelf"):
        raise InputError(f"setting layout must be flat or audiobookshelf, got {options.layout!r}")
    return options
