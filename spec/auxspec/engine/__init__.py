"""The engine: the op alphabet and its table, the byte codec, the trace
format, targets, and the one differential check."""
