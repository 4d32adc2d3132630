"""The encoder: model files resolved offline, the ONNX export and runtime, and queries
batched into one forward pass."""
