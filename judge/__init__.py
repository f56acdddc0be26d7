"""judge: train, validate and serve learned judges for multimodal benchmarks."""

__version__ = "0.1.0"
