"""Qwen3-TTS-12Hz (0.6B Base / CustomVoice): a port, one file per stage."""
