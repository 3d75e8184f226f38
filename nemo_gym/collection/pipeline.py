"""A bounded pipeline: at most N awaitables in flight over a lazy stream of items, results in completion
order; used by collection and by reverification."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable
from typing import Any, TypeVar

ItemT = TypeVar("ItemT")
ResultT = TypeVar("ResultT")


async def completed_in_any_order(
    items: Iterable[ItemT] | AsyncIterable[ItemT],
    work: Callable[[ItemT], Awaitable[ResultT]],
    max_in_flight: int,
) -> AsyncIterator[tuple[ItemT, ResultT]]:
    """`(item, await work(item))` in completion order, with at most `max_in_flight` under way. Items are
    pulled only as slots free up (so `items` may be lazy and endless); stopping the iteration cancels
    what is in flight."""

    async def paired(item: ItemT) -> tuple[ItemT, ResultT]:
        return item, await work(item)

    pending: set[asyncio.Task[tuple[ItemT, ResultT]]] = set()
    try:
        async for item in _as_async_iterator(items):
            if len(pending) >= max_in_flight:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    yield task.result()
            pending.add(asyncio.create_task(paired(item)))
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                yield task.result()
    finally:
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)


async def _as_async_iterator(rows: Iterable[Any] | AsyncIterable[Any]) -> AsyncIterator[Any]:
    if isinstance(rows, AsyncIterable):
        async for row in rows:
            yield row
    else:
        for row in rows:
            yield row
