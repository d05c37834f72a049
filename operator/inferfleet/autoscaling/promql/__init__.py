"""What to ask Prometheus and what its answers mean (pure): PromQL query text, parsing
of query results, the autoscaler's per-tier signals derived from them, the rate-history
cache's arithmetic and the retry backoff. No network: the client in metrics/ sends the
queries and hands the answers back here."""
