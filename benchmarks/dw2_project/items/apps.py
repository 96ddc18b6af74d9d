from django.apps import AppConfig


class ItemsConfig(AppConfig):
    name = "benchmarks.dw2_project.items"
    label = "items"
    default_auto_field = "django.db.models.AutoField"
