"""Empty the django-webhook2 tables and point one webhook at the receiver.

``python -m benchmarks.dw2_project.prepare --url URL [--migrate]``, run by
the harness with the package's virtualenv. Prints the id of the item whose
``update`` events the emitters send. The webhook subscribes to that topic
only, with one signing secret, as a subscriber of the service's shared
scenario does.
"""

import argparse

from benchmarks.dw2_project import tasks_app  # noqa: F401 - the package's tasks bind to this app

import django

TOPIC = "items.Item/update"
SECRET = "whsec_bench-dw2-not-a-real-secret"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="where the webhook posts")
    parser.add_argument("--migrate", action="store_true", help="run Django's migrate first")
    args = parser.parse_args(argv)
    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django_webhook.models import Webhook, WebhookEvent, WebhookSecret, WebhookTopic

    from benchmarks.dw2_project.items.models import Item

    if args.migrate:
        call_command("migrate", verbosity=0)
    tables = [Item._meta.db_table, WebhookEvent._meta.db_table, WebhookSecret._meta.db_table,
              Webhook.topics.through._meta.db_table, Webhook._meta.db_table]
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY CASCADE")
    item = Item.objects.create(name="benchmark item", quantity=1)  # before any webhook: no event
    topic, _ = WebhookTopic.objects.get_or_create(name=TOPIC)
    webhook = Webhook.objects.create(url=args.url, active=True)
    webhook.topics.add(topic)
    WebhookSecret.objects.create(webhook=webhook, token=SECRET)
    print(item.pk)


if __name__ == "__main__":
    main()
