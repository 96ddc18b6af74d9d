"""Marshmallow schemas of the HTTP API's request bodies, query strings and responses.

They load (and validate) what clients send, dump what the API answers, and
are the source of the OpenAPI document (web/openapi.py). The event data
schemas themselves live in the core (webhooks.events.schemas).
"""

from .common import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    ErrorSchema,
    PageQuerySchema,
    Text,
    UTCTimestamp,
    describe_errors,
)
from .deliveries import (
    PUBLIC_STATUSES,
    AttemptSchema,
    DeliveryListSchema,
    DeliveryQuerySchema,
    DeliverySchema,
    delivery_resource,
)
from .events import ENVELOPE_SCHEMAS, EventTypeListSchema, EventTypeSchema, SampleQuerySchema
from .portal_links import PortalLinkCreateSchema, PortalLinkSchema
from .publisher import (
    AccountCreatedSchema,
    AccountCreateSchema,
    AccountKeySchema,
    AccountListSchema,
    AccountQuerySchema,
    AccountSchema,
    EventAcceptedSchema,
    EventBatchAcceptedSchema,
    EventBatchSchema,
    EventInSchema,
)
from .public_keys import KeySetSchema, PublicKeySchema
from .subscriptions import (
    MAX_DESCRIPTION_LENGTH,
    RecoveredSchema,
    RecoverSchema,
    RotateSecretSchema,
    subscription_resource,
    SubscriptionChangedSchema,
    SubscriptionCreateSchema,
    SubscriptionListSchema,
    SubscriptionQuerySchema,
    SubscriptionSchema,
    SubscriptionUpdateSchema,
    SubscriptionWithSecretSchema,
    TestSentSchema,
)

__all__ = [
    "ErrorSchema", "PageQuerySchema", "Text", "UTCTimestamp", "describe_errors",
    "DEFAULT_LIMIT", "MAX_LIMIT", "PUBLIC_STATUSES", "AttemptSchema", "DeliveryListSchema",
    "DeliveryQuerySchema", "DeliverySchema", "delivery_resource",
    "AccountCreatedSchema", "AccountCreateSchema", "AccountKeySchema", "AccountListSchema",
    "AccountQuerySchema", "AccountSchema", "EventAcceptedSchema", "EventBatchAcceptedSchema",
    "EventBatchSchema", "EventInSchema",
    "ENVELOPE_SCHEMAS", "EventTypeListSchema", "EventTypeSchema", "SampleQuerySchema",
    "MAX_DESCRIPTION_LENGTH", "SubscriptionChangedSchema", "SubscriptionCreateSchema", "SubscriptionListSchema",
    "SubscriptionQuerySchema",
    "SubscriptionSchema", "SubscriptionUpdateSchema", "SubscriptionWithSecretSchema",
    "TestSentSchema", "RecoveredSchema",
    "RecoverSchema", "RotateSecretSchema", "subscription_resource",
    "PortalLinkCreateSchema", "PortalLinkSchema", "KeySetSchema", "PublicKeySchema",
]
