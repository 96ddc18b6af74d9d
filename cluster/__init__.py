"""A cluster of the service on one machine, for real: hosts as network namespaces, real
PostgreSQL (primary and streaming replica), Redis with Sentinel, the Procfile's processes,
load, a fault schedule and a checker (``make cluster``; docs/reliability.md has the figures)."""
