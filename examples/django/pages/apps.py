from django.apps import AppConfig
from django.db.backends.signals import connection_created


def sqlite_pragmas(sender, connection, **kwargs):
    """WAL journal on every new SQLite connection (see DATABASES in mysite/settings.py)."""
    if connection.vendor == 'sqlite':
        with connection.cursor() as cursor:
            cursor.execute('PRAGMA journal_mode=WAL')
            cursor.execute('PRAGMA synchronous=NORMAL')


class PagesConfig(AppConfig):
    name = 'pages'
    default_auto_field = 'django.db.models.BigAutoField'

    def ready(self):
        connection_created.connect(sqlite_pragmas)
