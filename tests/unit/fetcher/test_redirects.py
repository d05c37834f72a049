"""Which redirects may carry the hub token (pure)."""

from __future__ import annotations

import pytest

from inferfleet.caching.fetcher.remote import keeps_credentials


@pytest.mark.parametrize(
    ("from_url", "to_url", "keeps"),
    [
        ("https://huggingface.co/a/b/resolve/main/x", "https://huggingface.co/a/c/resolve/main/x", True),
        ("https://huggingface.co/x", "https://HuggingFace.co:443/y", True),
        ("https://huggingface.co/x", "https://cdn-lfs.hf.co/repos/x?X-Amz-Signature=s", False),
        ("https://huggingface.co/x", "https://huggingface.co.evil.example/x", False),
        ("http://127.0.0.1:8000/x", "http://127.0.0.1:8001/x", False),  # another port, another origin
        ("http://127.0.0.1:8000/x", "http://127.0.0.2:8000/x", False),
        ("https://huggingface.co/x", "http://huggingface.co/x", False),  # never downgrade
        ("http://huggingface.co/x", "https://huggingface.co/x", True),  # the usual upgrade
        ("http://hub:8080/x", "https://hub:8443/x", False),
        ("https://hub/x", "https://hub:notaport/x", False),
    ],
)
def test_the_token_follows_only_to_the_same_origin(from_url: str, to_url: str, keeps: bool) -> None:
    assert keeps_credentials(from_url, to_url) is keeps
