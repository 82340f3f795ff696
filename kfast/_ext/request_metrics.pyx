# cython: binding=False, boundscheck=False, wraparound=False, cdivision=True
# binding=False: ``record`` is a plain C method descriptor, called without
# building a bound method (it runs once per request); RequestTiming calls it
# in C.
"""RequestMetrics' per-request record (issue 21 items 1 and 3).

Every request, answered or not, adds one count per version and one value to
each of six fixed-bucket histograms (kfast.metrics.broker_stats.REQUEST_TIMES:
Total, RequestQueue, Local, Remote, ResponseQueue, ResponseSend). In Python
that was six bisects, eleven float operations and a dozen list item updates,
~1.5-3 us a request (the largest single cost of a warm one-record Produce
after its append); here it is six binary searches over a C array.

The kernel only counts. The bucket bounds are the caller's
(kfast.metrics.histogram.BOUNDS_MS, handed to the constructor), and
``raw_snapshot`` returns plain lists that kfast.metrics.broker_stats wraps in
its HistogramSnapshot objects. Bucket i holds the values v with
bounds[i-1] < v <= bounds[i] (bisect_left's index); the last bucket, past
every bound, is the overflow.

Called on the event loop; a scrape on another thread reads through
``raw_snapshot``, which runs under the GIL and copies, so it never sees half
a request.
"""

from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.string cimport memset

cdef enum:
    TIMES = 6  # len(REQUEST_TIMES)
    # Versions counted in the C array; a later one (none exists) goes to a dict.
    VERSIONS = 64


cdef class _ApiStats:
    """One API's counts: requests per version, and the six histograms'
    buckets (TIMES x slots, in REQUEST_TIMES order), sums and count."""

    cdef long long requests[VERSIONS]
    cdef dict other_versions
    cdef long long *counts
    cdef double sums[TIMES]
    cdef long long count
    cdef Py_ssize_t slots

    def __cinit__(self, Py_ssize_t slots):
        self.slots = slots
        self.counts = <long long *>PyMem_Malloc(TIMES * slots * sizeof(long long))
        if self.counts == NULL:
            raise MemoryError()
        memset(self.counts, 0, TIMES * slots * sizeof(long long))
        memset(self.requests, 0, sizeof(self.requests))
        memset(self.sums, 0, sizeof(self.sums))
        self.other_versions = {}
        self.count = 0

    def __dealloc__(self):
        PyMem_Free(self.counts)


cdef inline Py_ssize_t _bucket(const double *bounds, Py_ssize_t n, double value) noexcept:
    """bisect_left(bounds, value): the number of bounds below ``value``."""
    cdef Py_ssize_t lo = 0, hi = n, mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if bounds[mid] < value:
            lo = mid + 1
        else:
            hi = mid
    return lo


cdef class RequestRecorder:
    """Requests per API key and version, and their six times (ms)."""

    cdef dict _by_key
    cdef double *_bounds
    cdef Py_ssize_t _nbounds

    def __cinit__(self):
        self._bounds = NULL
        self._nbounds = 0
        self._by_key = {}

    def __init__(self, bounds):
        """``bounds``: the buckets' upper bounds in ms, ascending."""
        cdef Py_ssize_t i, n = len(bounds)
        if self._bounds != NULL:
            raise RuntimeError("RequestRecorder is initialised once")
        self._bounds = <double *>PyMem_Malloc((n + 1) * sizeof(double))
        if self._bounds == NULL:
            raise MemoryError()
        for i in range(n):
            self._bounds[i] = bounds[i]
        self._nbounds = n

    def __dealloc__(self):
        PyMem_Free(self._bounds)

    cpdef void record(
        self,
        int api_key,
        int version,
        double received,
        double started,
        double handled,
        double finished,
        double dequeued,
        double sent,
    ) except *:
        """One request's points in time, in seconds (see
        kfast.metrics.broker_stats.RequestMetrics)."""
        cdef _ApiStats stats
        cdef object found = self._by_key.get(api_key)
        if found is None:
            stats = _ApiStats(self._nbounds + 1)
            self._by_key[api_key] = stats
        else:
            stats = <_ApiStats>found
        if 0 <= version < VERSIONS:
            stats.requests[version] += 1
        else:
            stats.other_versions[version] = stats.other_versions.get(version, 0) + 1
        cdef double times[TIMES]
        times[1] = (started - received) * 1000.0
        times[2] = (handled - started) * 1000.0
        times[3] = (finished - handled) * 1000.0
        times[4] = (dequeued - finished) * 1000.0
        times[5] = (sent - dequeued) * 1000.0
        # Total: the sum of the five parts, as Kafka's endTime - startTime.
        times[0] = times[1] + times[2] + times[3] + times[4] + times[5]
        cdef Py_ssize_t i, slots = stats.slots, n = self._nbounds
        cdef const double *bounds = self._bounds
        for i in range(TIMES):
            stats.counts[i * slots + _bucket(bounds, n, times[i])] += 1
            stats.sums[i] += times[i]
        stats.count += 1

    def raw_snapshot(self):
        """{api key: (requests per version, count, [(bucket counts, sum)] in
        REQUEST_TIMES order)}, copies."""
        cdef _ApiStats stats
        cdef Py_ssize_t i, j, slots
        result = {}
        for key, found in self._by_key.items():
            stats = <_ApiStats>found
            slots = stats.slots
            versions = {v: stats.requests[v] for v in range(VERSIONS) if stats.requests[v]}
            versions.update(stats.other_versions)
            histograms = [
                ([stats.counts[i * slots + j] for j in range(slots)], stats.sums[i])
                for i in range(TIMES)
            ]
            result[key] = (versions, stats.count, histograms)
        return result


cdef class RequestTiming:
    """A request's points in time until its response is sent: the network
    layer (kfast.server.network.TimedResponse) calls ``sent(dequeued, now)``
    once the response's last byte went to the socket, which records it.
    One per answered request on a connection, so built and reported in C."""

    cdef RequestRecorder metrics
    cdef int api_key, version
    cdef double received, started, handled, finished

    def __init__(
        self,
        RequestRecorder metrics not None,
        int api_key,
        int version,
        double received,
        double started,
        double handled,
        double finished,
    ):
        self.metrics = metrics
        self.api_key = api_key
        self.version = version
        self.received = received
        self.started = started
        self.handled = handled
        self.finished = finished

    def sent(self, double dequeued, double now):
        """Its send began at ``dequeued``; its last byte was handed to the
        socket at ``now`` (time.perf_counter seconds)."""
        self.metrics.record(
            self.api_key,
            self.version,
            self.received,
            self.started,
            self.handled,
            self.finished,
            dequeued,
            now,
        )
