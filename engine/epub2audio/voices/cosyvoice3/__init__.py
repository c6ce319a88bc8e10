"""CosyVoice3 (Fun-CosyVoice3-0.5B-2512) voice."""
