from collections.abc import Sequence

class RequestRecorder:
    def __init__(self, bounds: Sequence[float]) -> None: ...
    def record(
        self,
        api_key: int,
        version: int,
        received: float,
        started: float,
        handled: float,
        finished: float,
        dequeued: float,
        sent: float,
    ) -> None: ...
    def raw_snapshot(
        self,
    ) -> dict[int, tuple[dict[int, int], int, list[tuple[list[int], float]]]]: ...

class RequestTiming:
    def __init__(
        self,
        metrics: RequestRecorder,
        api_key: int,
        version: int,
        received: float,
        started: float,
        handled: float,
        finished: float,
    ) -> None: ...
    def sent(self, dequeued: float, now: float) -> None: ...
