"""The page templates (Jinja2) and stylesheet, shipped as package data: loaded through importlib.resources."""
