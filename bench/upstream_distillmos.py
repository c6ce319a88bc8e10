"""DistillMOS's own command line (`distillmos DIR -o scores.csv`, distillmos.sqa:command_line_inference)
on the WAVs of tests/distillmos_wavs.py, recorded in tests/distillmos_reference.json for
tests/test_verify_quality.py to compare our child's scores with.

The command line loads and resamples with real torchaudio, which has no wheel for our torch pin,
so it runs in a throwaway venv OUTSIDE the repo with a pair that has wheels and whose
torchaudio.load still works without torchcodec (2.9 moved it there):

    python3.11 -m venv /tmp/distillmos-ref-venv
    /tmp/distillmos-ref-venv/bin/pip install torch==2.8.0 torchaudio==2.8.0 soundfile numpy \
        distillmos==0.9.1 xls-r-sqa==0.1.0
    .venv/bin/python bench/upstream_distillmos.py --venv /tmp/distillmos-ref-venv

(torch 2.8.0 from PyPI is its CUDA build, about 3 GB with its nvidia wheels; it runs on the CPU.)
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "distillmos_reference.json"


def main() -> None:
    import sys

    sys.path.insert(0, str(ROOT / "tests"))
    from distillmos_wavs import write_wavs

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, required=True, help="the side venv with torch + torchaudio + distillmos")
    args = parser.parse_args()
    python = args.venv / "bin" / "python"
    versions = subprocess.run([python, "-c", "import importlib.metadata as m; print(*(m.version(p) for p in "
                               "('torch', 'torchaudio', 'distillmos', 'xls-r-sqa')))"],
                              capture_output=True, text=True, check=True).stdout.split()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "wavs"
        hashes = write_wavs(folder)
        scores_csv = Path(tmp) / "scores.csv"
        subprocess.run([args.venv / "bin" / "distillmos", folder, "-o", scores_csv], check=True,
                       capture_output=True)
        with scores_csv.open() as f:
            rows = list(csv.reader(f, skipinitialspace=True))[1:]
    scores = {Path(name).name: float(score) for name, score in rows}
    record = {"command": "distillmos DIR -o scores.csv",
              "versions": dict(zip(("torch", "torchaudio", "distillmos", "xls-r-sqa"), versions)),
              "files": {name: {"sha256": hashes[name], "distillmos": scores[name]} for name in sorted(hashes)}}
    OUT.write_text(json.dumps(record, indent=1) + "\n")
    for name in sorted(hashes):
        print(f"{name:24} {scores[name]:.6f}")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
