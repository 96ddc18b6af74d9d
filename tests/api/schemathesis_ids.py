"""One pytest node id per generated API check (tests/api/test_schemathesis.py).

``@schema.parametrize()`` makes one test item per operation of the OpenAPI
document, named ``test_…[GET /api/webhooks/…]``. schemathesis 4.32.5 builds
each item with ``originalname`` set to the bare function name, and pytest 9.2
builds a node id from ``originalname`` (pytest 8 built it from ``name``), so
under pytest 9.2 all the items share one id. pytest-xdist schedules by node id:
of the 14 items, ``-n 2`` ran 1 and the summary counted 1 passed.

:func:`use_own_ids` (called from tests/api/conftest.py's
``pytest_pycollect_makeitem``) swaps schemathesis's collector for
:func:`case_with_own_ids`, which makes the same items again with ``name`` as the
base of their id: ``…::test_every_operation_conforms[GET /api/webhooks/…]``.
Under pytest 8 that id is the one pytest gave anyway. Made at collection, so a
fresh collection (the count test in test_schemathesis.py) sees the same ids as
the scheduler.
"""

from __future__ import annotations

import functools
import sys

__all__ = ["case_with_own_ids", "use_own_ids", "with_own_id"]

# schemathesis's pytest plugin. Imported only once pytest has loaded it: importing it costs
# about 0.3 s of CPU per process, for nothing in the fast tier (-p no:schemathesis).
_PLUGIN = "schemathesis.pytest.plugin"


def with_own_id(item):
    """``item`` again, built so that its node id ends with its name (the operation's label).

    The same function, fixtures and schemathesis attributes; only the id differs.
    An item whose id already ends with its name is returned as it is.
    """
    if item.nodeid.endswith("::" + item.name):
        return item
    return sys.modules[_PLUGIN].SchemathesisFunction.from_parent(
        item.parent,
        name=item.name,  # no originalname: pytest takes the id from the name
        callobj=item.obj,
        fixtureinfo=item._fixtureinfo,
        test_func=item.test_function,
        test_name=item.test_name,
        operation_label=item.operation_label,
        operation_tags=item.operation_tags,
    )


@functools.cache
def case_with_own_ids():
    """schemathesis's collector of a ``@schema.parametrize()`` test, with one id per item
    (made once schemathesis's plugin is loaded)."""
    plugin = sys.modules[_PLUGIN]

    class CaseWithOwnIds(plugin.SchemathesisCase):
        def collect(self):
            return [with_own_id(item) if isinstance(item, plugin.SchemathesisFunction) else item
                    for item in super().collect()]

    return CaseWithOwnIds


def use_own_ids(collector, name: str, obj, collected):
    """What ``pytest_pycollect_makeitem`` should answer for the test function ``obj``
    named ``name``: ``collected`` (the answer so far), or, in place of schemathesis's
    collector, a :func:`case_with_own_ids` of the same schema."""
    plugin = sys.modules.get(_PLUGIN)  # not loaded: nothing schemathesis collected
    if plugin is None or type(collected) is not plugin.SchemathesisCase:
        return collected
    return case_with_own_ids().from_parent(collector, test_function=obj, name=name,
                                           schema=collected.schema)
