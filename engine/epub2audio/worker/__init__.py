"""The process boundary: the TTS model lives in a disposable child process."""
