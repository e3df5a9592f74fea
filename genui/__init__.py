"""genui: web sites whose pages are written on the fly by a text-diffusion language model."""

__version__ = "0.1.0"
