"""``python -m webhooks.cli``: the ``webhooks`` command line, as the console script runs it."""

from webhooks.cli.commands import main

main()
