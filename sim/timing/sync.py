"""Signal / Wait between streams: token signal times and per-waiter cursors."""

from __future__ import annotations

from collections.abc import Iterator

__all__ = ["SyncTable", "signal", "wait"]


class SyncTable:
    """Signal times (ns) of every token, in order, and a count of signals produced."""

    def __init__(self) -> None:
        self.signals: dict[str, list[float]] = {}
        self.produced = 0


def signal(st, env: dict, token: str) -> None:
    """The token's next signal time is the completion of everything ``st`` issued."""
    st.sync.signals.setdefault(token, []).append(st.signal_ns())
    st.sync.produced += 1


def wait(st, env: dict, tokens: tuple[str, ...]) -> Iterator[str]:
    """Generator: yields a token while its next unseen signal does not exist yet."""
    signals, cursor = st.sync.signals, st.cursor
    for tok in tokens:
        k = cursor.get(tok, 0)
        while len(signals.get(tok, ())) <= k:
            yield tok
        cursor[tok] = k + 1
        st.wait_until(signals[tok][k])
