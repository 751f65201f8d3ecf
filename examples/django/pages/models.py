from django.db import models


class Item(models.Model):
    """Rows of the SQLite workload; each request works on its own `token`."""
    token = models.CharField(max_length=32, db_index=True)
    name = models.CharField(max_length=100)
    value = models.IntegerField(default=0)


class Note(models.Model):
    """What the CSRF-protected form saves."""
    name = models.CharField(max_length=100)
    message = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)
