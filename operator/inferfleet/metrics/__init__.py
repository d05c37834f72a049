"""The operator's own /metrics exporter (I/O): what the operator reports about itself
(passes, ticks, queries, decisions) and serves on its metrics port."""
