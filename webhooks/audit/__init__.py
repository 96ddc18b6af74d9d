"""The audit log (CONTRACT 10.5): who changed what, one entry per change, never altered.

- ``entries.py``: the vocabulary (actors, actions, targets) and what an entry may say of
  a change: ``{"from", "to"}`` per field, secrets, private keys, client secrets, header
  values and URL passwords ``"[redacted]"`` (pure, no I/O).
- ``log.py``: write an entry in the caller's transaction (so a change and its entry
  commit together or not at all), and read an account's entries a page at a time.

Entries are written by the one owner of each change (webhooks/services, the operational
endpoints, the attempt's record for automatic pauses), so the API, the dashboard and the
command line share them; the entrances only say who acts (an :class:`~entries.Actor`).
No code path updates or deletes an entry except retention (lifecycle/retention.py); on
PostgreSQL a trigger refuses anything else (migration 0024).
"""
