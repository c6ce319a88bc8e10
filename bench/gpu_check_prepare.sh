#!/usr/bin/env bash
# Puts what bench/gpu_check.py needs on a GPU machine that has no network into .gpu_check/ (ignored
# by git, about 2 MB), here, on a machine that has one:
#   .gpu_check/upstream/cosyvoice                          upstream CosyVoice's package (FunAudioLLM/CosyVoice)
#   .gpu_check/upstream/third_party/Matcha-TTS/matcha      Matcha-TTS at the commit upstream pins
#   .gpu_check/whl/*.whl                                   upstream's pure-Python dependencies
# Nothing of it is committed. Usage:
#   bench/gpu_check_prepare.sh COSYVOICE_GIT_DIR MATCHA_GIT_DIR
# (bare or normal git directories of FunAudioLLM/CosyVoice and shivammehta25/Matcha-TTS). Then one
# device call runs every section in one command, with carry [".gpu_check"] and timeout_s 600. Its
# length is an estimate, not yet measured: the first five sections took 82 s on an H200
# (bench/results/gpu_check-h200.log); llm_step, throughput and upstream should add about 5 minutes.
# The log has each section's elapsed time:
#
#   python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .gpu_check/whl/*.whl &&
#   PYTHONPATH=engine:/tmp/site PYTHONUNBUFFERED=1 python3 bench/gpu_check.py --out $OUT/gpu_check.json
#     --upstream-src .gpu_check/upstream 2>&1 | tee $OUT/gpu_check.log
#
# Each section is written to the JSON as soon as it is done, so a run cut short keeps its figures;
# --only throughput,upstream reruns a part. The dry run on any CPU, tiny weights, every section:
#   PYTHONPATH=engine:/tmp/site python3 bench/gpu_check.py --small --device cpu --workers 1,2 \
#     --upstream-src .gpu_check/upstream --out /tmp/gpu_check_dry.json
set -euo pipefail
cosyvoice=${1:?usage: bench/gpu_check_prepare.sh COSYVOICE_GIT_DIR MATCHA_GIT_DIR}
matcha=${2:?usage: bench/gpu_check_prepare.sh COSYVOICE_GIT_DIR MATCHA_GIT_DIR}
python=${PYTHON:-python3}
cd "$(dirname "$0")/.."
dest=.gpu_check
rm -rf "$dest"
mkdir -p "$dest/upstream/third_party/Matcha-TTS" "$dest/whl"
git --git-dir "$(git -C "$cosyvoice" rev-parse --absolute-git-dir)" archive HEAD cosyvoice | tar -x -C "$dest/upstream"
# the Matcha-TTS commit upstream's tree pins (its submodule), else Matcha's HEAD
pinned=$(git --git-dir "$(git -C "$cosyvoice" rev-parse --absolute-git-dir)" ls-tree HEAD third_party/Matcha-TTS | awk '{print $3}')
matcha_git=$(git -C "$matcha" rev-parse --absolute-git-dir)
git --git-dir "$matcha_git" cat-file -e "${pinned:-HEAD}^{commit}" 2>/dev/null || pinned=HEAD
git --git-dir "$matcha_git" archive "${pinned:-HEAD}" matcha | tar -x -C "$dest/upstream/third_party/Matcha-TTS"
git -C "$cosyvoice" rev-parse HEAD > "$dest/upstream/COMMIT"  # gpu_check.py reports it
# x-transformers: upstream's requirements.txt pin; the rest as bench/upstream.py installs them
"$python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux2014_x86_64 -d "$dest/whl" \
    x-transformers==2.11.24 einx==0.4.3 loguru==0.7.3 frozendict==2.5.1 einops==0.8.2
du -sh "$dest"
echo "upstream $(git -C "$cosyvoice" rev-parse --short HEAD), Matcha-TTS ${pinned:-HEAD}; carry .gpu_check"
