"""Voices run only inside the worker process: importing this package may import onnxruntime,
torch or mlx, so the parent side never imports it."""
