"""Signal / Wait between streams: token signal times and per-waiter cursors."""

from __future__ import annotations

from collections.abc import Iterator

__all__ = ["SyncTable", "signal", "wait"]


class SyncTable:
    """Signal times (ns) of every token, in order, and a count of signals produced."""

    def __init__(self) -> None:
        self.signals: dict[str, list[float]] = {}
        self.produced = 0


def signal(st, env: dict, index: int) -> None:
    """Signal node ``index`` of ``st``: the next signal time of its token in every stream
    ``st`` stands for (``st.tokens[index]``) is the completion of everything ``st`` issued."""
    t, signals = st.signal_ns(), st.sync.signals
    for token in st.tokens[index]:
        signals.setdefault(token, []).append(t)
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
