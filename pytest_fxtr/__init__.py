"""The fxtr pytest plugin."""
