"""An emitting process of the django_webhook2 leg: ``python -m benchmarks.dw2_project.emit``.

Calls the package's public ``emit_event(instance, "update")`` for one
stored item, the counterpart of ``webhooks.emit_event``: the package stores
a ``WebhookEvent`` row and publishes its ``fire_webhook`` task (the item
itself is not written, as the service's emitters write nothing of an app's
own). Same options and back-pressure as ``benchmarks/emitter.py``, plus
``--item``.
"""

from benchmarks.dw2_project import tasks_app  # noqa: F401 - the package's tasks bind to this app

import django

from benchmarks.emitter import gated, parse


def main(argv=None) -> None:
    parser = parse(__doc__)
    parser.add_argument("--item", type=int, required=True, help="the item's id (prepare prints it)")
    args = parser.parse_args(argv)
    django.setup()
    from django_webhook.api import UPDATE, emit_event

    from benchmarks.dw2_project.items.models import Item

    item = Item.objects.get(pk=args.item)
    gated(args, lambda _i: emit_event(item, UPDATE))


if __name__ == "__main__":
    main()
