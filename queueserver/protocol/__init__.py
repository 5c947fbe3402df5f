"""The protocol layer: wire formats in, QueueEngine calls, wire formats out."""

from queueserver.protocol.dispatch import Dispatcher, HttpRequest, HttpResponse

__all__ = ["Dispatcher", "HttpRequest", "HttpResponse"]
