"""Connections spread over gunicorn's workers by free threads: a gthread worker whose threads
are all busy leaves the next new connection to a worker with a free thread.

gunicorn's gthread workers all poll the one listening socket and each accepts while it
holds fewer than ``--worker-connections`` (1,000) connections, so which worker takes a
new connection is a race, not a choice: 8 kept-alive clients on the Procfile's 2 workers
of 4 threads were seen split 6 to 2 (``ss``), so two connections of the busy worker
waited for a thread while the other worker had two idle. Here a worker stops polling the
listening socket while as many of its connections are being served as it has threads,
and polls it again as soon as one is answered. A connection that finds every worker busy
waits in the kernel's backlog instead of in a worker's queue of requests, and the first
worker to free a thread takes it. Kept-alive connections waiting for their next request
take no thread and do not count, so idle clients never stop a worker from accepting.
"""

from __future__ import annotations

from gunicorn.workers.gthread import ThreadWorker

__all__ = ["BalancedAcceptWorker"]


class BalancedAcceptWorker(ThreadWorker):
    """gunicorn's gthread worker that accepts new connections only while it has a free
    thread. Its requests in flight are counted in the worker's main thread, where gunicorn
    submits each request (``enqueue_req``) and learns it finished (``finish_request``)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.in_flight = 0  # requests submitted to the thread pool and not yet finished

    def enqueue_req(self, conn):
        super().enqueue_req(conn)  # its finish is deferred to this thread: counted after
        self.in_flight += 1
        if self.in_flight >= self.cfg.threads:
            self.set_accept_enabled(False)

    def finish_request(self, conn, fs):
        self.in_flight -= 1
        super().finish_request(conn, fs)

    def set_accept_enabled(self, enabled):
        # gunicorn's loop asks for "accept" on each turn while it is not accepting and holds
        # fewer than --worker-connections, so a worker that stopped here accepts again on
        # the turn after one of its threads was freed.
        super().set_accept_enabled(enabled and self.in_flight < self.cfg.threads)
