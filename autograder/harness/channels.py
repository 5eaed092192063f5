"""The grader's connection to a kernel, reading every message within a size limit before putting it together.

Why: a display message of 1 GiB was received and copied whole before its size was counted (the grader
went from 0.32 to 2.84 GB for one cell). Two bounds now hold before anything is materialised:

- ZeroMQ refuses a frame larger than the socket's ``MAXMSGSIZE`` from its size header, before reading it,
  and disconnects the kernel's socket (every socket of the client's context has it: :func:`client_context`);
  :class:`Disconnects` notices, so the cell fails instead of losing a message silently;
- a message's frames are read one at a time and dropped once their sum passes the channel's limit
  (:class:`MessageTooLarge`), so many frames under the frame limit cannot add up either.

``last_bytes`` on a channel is the size of the content (and buffers) of the message it read last: the output
limit counts bytes as they arrive instead of measuring the parsed message again.
"""
from __future__ import annotations

from typing import Any

import zmq
from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.channels import ZMQSocketChannel
from traitlets import Type
from zmq.utils.monitor import recv_monitor_message

#: Slack on top of a limit for the message's headers, signature and JSON escapes.
ENVELOPE_BYTES = 1 << 20


class UnreadableMessage(Exception):
    """A kernel sent a message the grader will not read (too large, or not a message); the text says which."""


class MessageTooLarge(UnreadableMessage):
    """A kernel sent a message over its channel's limit; ``size`` bytes were seen (at least)."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"a single message of more than {limit / 1e6:g} MB ({size / 1e6:,.1f} MB seen)")
        self.size, self.limit = size, limit


class BoundedChannel(ZMQSocketChannel):
    """A channel whose messages are read frame by frame and refused past ``limit`` bytes in all."""

    limit = 64 << 20
    last_bytes = 0

    def _recv(self, **kwargs: Any) -> dict[str, Any]:
        assert self.socket is not None
        frames: list[bytes] = []
        size = 0
        while True:
            frame = self.socket.recv(**kwargs)        # each frame within MAXMSGSIZE: refused unread otherwise
            size += len(frame)
            if size <= self.limit:
                frames.append(frame)
            if not self.socket.getsockopt(zmq.RCVMORE):
                break
        self.last_bytes = size
        if size > self.limit:
            raise MessageTooLarge(size, self.limit)
        try:
            _ident, message = self.session.feed_identities(frames)
            self.last_bytes = sum(len(f) for f in message[4:])   # content and buffers, after signature and headers
            return self.session.deserialize(message)
        except (ValueError, TypeError, KeyError, IndexError, RecursionError) as exc:
            raise UnreadableMessage(f"a message the grader cannot read ({type(exc).__name__})") from None


def client_class(iopub_bytes: int, shell_bytes: int) -> type[BlockingKernelClient]:
    """A blocking client whose iopub messages (outputs) are bounded by ``iopub_bytes`` and whose shell replies
    (answers to requests such as the description of the answers) by ``shell_bytes``, envelopes included."""
    iopub = type("BoundedIopub", (BoundedChannel,), {"limit": iopub_bytes + ENVELOPE_BYTES})
    shell = type("BoundedShell", (BoundedChannel,), {"limit": shell_bytes + ENVELOPE_BYTES})
    return type("BoundedKernelClient", (BlockingKernelClient,),
                {"iopub_channel_class": Type(iopub), "shell_channel_class": Type(shell)})


def client_context(frame_bytes: int) -> zmq.Context:
    """A ZeroMQ context whose sockets refuse any frame over ``frame_bytes`` (plus an envelope) unread."""
    context = zmq.Context()
    context.setsockopt(zmq.MAXMSGSIZE, int(frame_bytes + ENVELOPE_BYTES))
    return context


class Disconnects:
    """Watches sockets for a disconnection (what ZeroMQ does when a frame is over ``MAXMSGSIZE``)."""

    def __init__(self, sockets: list[zmq.Socket]) -> None:
        self._monitors = [s.get_monitor_socket(zmq.EVENT_DISCONNECTED) for s in sockets]
        self._sockets = sockets

    def seen(self) -> bool:
        """Whether any watched socket was disconnected since the last look (events are consumed)."""
        found = False
        for monitor in self._monitors:
            while monitor.poll(0):
                event = recv_monitor_message(monitor)
                found = found or event.get("event") == zmq.EVENT_DISCONNECTED
        return found

    def close(self) -> None:
        for socket, monitor in zip(self._sockets, self._monitors):
            try:
                socket.disable_monitor()
            except zmq.ZMQError:
                pass
            monitor.close(linger=0)


__all__ = ["BoundedChannel", "Disconnects", "ENVELOPE_BYTES", "MessageTooLarge", "UnreadableMessage", "client_class",
           "client_context"]
