"""Loaded by the worker processes of the address-guard tests (PYTHONPATH): a network jail.

Every TCP connect to an address outside this machine (anything but
127.0.0.0/8, ::1, their IPv4-mapped forms and the unspecified addresses,
which the kernel routes to this machine) is refused here, before any packet
leaves, and written to the file named by WEBHOOKS_TEST_NETJAIL_LOG. The
guard under test must refuse such addresses itself; the jail only makes sure
that a broken guard fails the test instead of sending traffic off the machine.
"""

import importlib.util
import os

_path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "netjail_rules.py")
_spec = importlib.util.spec_from_file_location("_webhooks_test_netjail", _path)
_rules = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_rules)
_rules.install()
