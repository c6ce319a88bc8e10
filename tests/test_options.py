"""The job options the front doors share (epub2audio/options.py): the book command, `library` and
`watch` turn the same flags and config.toml into the same ConvertOptions."""

from __future__ import annotations

import argparse

import pytest

from epub2audio import options
from epub2audio.cli import convert_parser, library_parser
from epub2audio.errors import InputError
from epub2audio.render import ConvertOptions
from epub2audio.watch import add_arguments as add_watch_arguments


def watch_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="epub2audio watch")
    add_watch_arguments(parser)
    return parser


@pytest.fixture(autouse=True)
def no_config(tmp_path, monkeypatch):
    monkeypatch.setenv("EPUB2AUDIO_CONFIG", str(tmp_path / "no-config.toml"))


def test_every_front_door_builds_the_same_job_from_the_same_flags(tmp_path):
    flags = ["--voice", "tone", "--workers", "2"]
    built = [options.job_options(convert_parser().parse_args(["b.epub", *flags])),
             options.job_options(library_parser().parse_args([str(tmp_path), "--out", str(tmp_path), *flags])),
             options.job_options(watch_parser().parse_args([str(tmp_path), "--out", str(tmp_path), *flags]))]
    assert {(o.voice, o.workers, o.threads_per_worker, o.verify, o.job_seed, o.pool) for o in built} == {
        ("tone", 2, 1, True, ConvertOptions().job_seed, None)}


def test_workers_come_from_the_flag_then_config_and_ray_asks_the_cluster(tmp_path):
    def parsed(*flags):
        return watch_parser().parse_args([str(tmp_path), "--out", str(tmp_path), *flags])

    assert options.workers(parsed(), {}) == 1
    assert options.workers(parsed(), {"workers": 3}) == 3
    assert options.workers(parsed("--workers", "2"), {"workers": 3}) == 2
    assert options.workers(parsed("--ray"), {"workers": 3}) == 0  # one per free CPU of the cluster
    assert options.workers(parsed("--ray", "--workers", "4"), {}) == 4
    with pytest.raises(InputError, match="^--workers must be at least 1$"):
        options.workers(parsed("--workers", "0"), {})


def test_the_book_commands_seed_and_no_verify_reach_the_job():
    built = options.job_options(convert_parser().parse_args(["b.epub", "--voice", "tone", "--seed", "7",
                                                             "--no-verify"]))
    assert (built.job_seed, built.verify) == (7, False)


def test_watch_and_library_take_the_cosyvoice3_settings_from_config_toml(tmp_path, monkeypatch):
    """They have no per-voice flags, so config.toml alone sets these (the watcher once passed none)."""
    (tmp_path / "config.toml").write_text('llm_backend = "torch"\nllm_precision = "bf16"\ndevice = "cpu"\n')
    monkeypatch.setenv("EPUB2AUDIO_CONFIG", str(tmp_path / "config.toml"))
    # --voice auto (the default) carries them to render.convert, which resolves the book's voice with them
    seen = []
    for args in (watch_parser().parse_args([str(tmp_path), "--out", str(tmp_path)]),
                 library_parser().parse_args([str(tmp_path), "--out", str(tmp_path)]),
                 convert_parser().parse_args(["b.epub", "--llm-precision", "fp32"])):
        built = options.job_options(args)
        assert built.voice == "auto"
        seen.append(built.voice_options["extra"])
    assert [(e["llm_backend"], e["llm_precision"], e["device"]) for e in seen] == [
        ("torch", "bf16", "cpu"), ("torch", "bf16", "cpu"), ("torch", "fp32", "cpu")]  # the book's flag wins


def test_workers_auto_from_the_flag_or_config_starts_one_worker_and_asks_the_job_to_measure(tmp_path):
    def parsed(*flags):
        return watch_parser().parse_args([str(tmp_path), "--out", str(tmp_path), *flags])

    assert (options.workers(parsed("--workers", "auto"), {}), options.auto_workers(parsed("--workers", "auto"), {})) == (1, True)
    assert (options.workers(parsed(), {"workers": "auto"}), options.auto_workers(parsed(), {"workers": "auto"})) == (1, True)
    assert options.auto_workers(parsed("--workers", "2"), {"workers": "auto"}) is False  # the flag wins
    assert options.auto_workers(parsed(), {}) is False and options.auto_workers(parsed(), {"workers": 3}) is False
    # Ray sizes its own pool: auto there is its default, one actor per free CPU
    assert (options.workers(parsed("--ray", "--workers", "auto"), {}), options.auto_workers(parsed("--ray", "--workers", "auto"), {})) == (0, False)
    with pytest.raises(InputError, match="^setting workers must be a number or \"auto\", got 'many'$"):
        options.workers(parsed(), {"workers": "many"})
    built = options.job_options(convert_parser().parse_args(["b.epub", "--voice", "tone", "--workers", "auto"]))
    assert (built.workers, built.auto_workers, built.threads_per_worker) == (1, True, 1)


def test_workers_flag_takes_a_number_or_auto_on_every_front_door(tmp_path, capsys):
    for parser, head in ((convert_parser(), ["b.epub"]), (library_parser(), [str(tmp_path), "--out", str(tmp_path)]),
                         (watch_parser(), [str(tmp_path), "--out", str(tmp_path)])):
        assert parser.parse_args([*head, "--workers", "auto"]).workers == "auto"
        assert parser.parse_args([*head, "--workers", "3"]).workers == 3
        with pytest.raises(SystemExit) as exit_:
            parser.parse_args([*head, "--workers", "lots"])
        assert exit_.value.code == 2
        assert "expected a number or auto, got 'lots'" in capsys.readouterr().err


def test_half_precision_flow_and_hift_stay_opt_in_on_a_gpu(tmp_path):
    """bf16 / fp16 change the audio (their deviation is in docs/cosyvoice3.md's GPU table): --device cuda
    alone keeps the flow and HiFT at fp32; only a flag or config.toml's key lowers them."""
    on_gpu = options.cosyvoice3_options(convert_parser().parse_args(["b.epub", "--device", "cuda"]), {})
    assert (on_gpu["device"], on_gpu["flow_precision"], on_gpu["hift_precision"], on_gpu["llm_precision"]) == (
        "cuda", "fp32", "fp32", "fp32")
    asked = options.cosyvoice3_options(convert_parser().parse_args(["b.epub", "--device", "cuda", "--flow-precision", "bf16"]),
                                       {"hift_precision": "fp16"})
    assert (asked["flow_precision"], asked["hift_precision"]) == ("bf16", "fp16")
