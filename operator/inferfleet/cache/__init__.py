"""Weight pre-caching: the fetcher and its pod-side helpers."""
