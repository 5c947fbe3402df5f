"""Reading a server's /metrics (with prometheus-client's own parser), /health and /ready."""

from __future__ import annotations

import json
import re
from typing import Any

from prometheus_client.parser import text_string_to_metric_families
from support.server import wait_for
from support.wire import send

__all__ = ["Scrape", "get", "health", "scrape", "wait_for"]


class Scrape:
    """One scrape: every sample by name and labels."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.samples: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                self.samples[(sample.name, frozenset(sample.labels.items()))] = sample.value

    def value(self, name: str, **labels: str) -> float:
        key = (name, frozenset(labels.items()))
        assert key in self.samples, f"no sample {name}{labels} in the scrape:\n{self.text}"
        return self.samples[key]

    def labelled(self, name: str) -> dict[frozenset[tuple[str, str]], float]:
        """Every sample of `name`, by its labels."""
        return {labels: value for (sample, labels), value in self.samples.items() if sample == name}

    def queue(self, name: str, queue: str, region: str = "us-east-1", account: str = "000000000000") -> float:
        return self.value(name, queue=queue, region=region, account=account)

    def buckets(self, name: str, **labels: str) -> dict[float, float]:
        """A histogram's cumulative buckets, by upper bound."""
        found = {}
        for (sample, sample_labels), value in self.samples.items():
            if sample != f"{name}_bucket":
                continue
            rest = dict(sample_labels)
            bound = rest.pop("le")
            if rest == labels:
                found[float(bound)] = value
        assert found, f"no buckets of {name}{labels}:\n{self.text}"
        return dict(sorted(found.items()))


def get(endpoint: str, path: str, timeout: float = 30,
        headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """(status, headers with lower-case names, body) of a GET."""
    response = send(endpoint + path, "GET", None, headers or {}, timeout)
    return response.status, response.headers, response.body


def scrape(endpoint: str) -> Scrape:
    status, headers, body = get(endpoint, "/metrics")
    assert status == 200, (status, body)
    assert headers["content-type"].startswith("text/plain"), headers
    return Scrape(body.decode())


def health(endpoint: str, path: str, timeout: float = 30) -> tuple[int, dict[str, Any]]:
    """(status, document) of /health or /ready."""
    status, _, body = get(endpoint, path, timeout)
    return status, json.loads(body)


def metrics_address(server: Any) -> str:
    """The metrics listener's URL, from the line the server logs at start (its port was 0)."""
    found = wait_for(lambda: re.search(r"metrics listener on (http://[0-9.]+:\d+)", server.stderr_text()),
                     "the metrics listener's log line")
    return str(found.group(1))
