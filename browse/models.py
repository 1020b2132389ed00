"""The browse surface keeps no tables of its own: recent searches live in ``presets.models``."""
